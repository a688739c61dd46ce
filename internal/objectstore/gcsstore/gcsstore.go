// Package gcsstore is the objectstore.Store of Google Cloud Storage, a
// thin client of GCS's JSON API over net/http. The SDK
// (cloud.google.com/go/storage) brought grpc, protobuf and OpenTelemetry
// into the operator's binary, and the backup executor, a subcommand of
// that binary, paid for their mapped pages in resident memory.
//
// Put is a resumable upload of fixed-size chunks (upload.go): it holds one
// chunk in memory whatever the object's size, and the object exists only
// once the last chunk is sent. A stream that fails cancels the session
// and never sends the last chunk, so no object appears. The last chunk
// carries the CRC32C of the whole object, and GCS refuses an object whose
// bytes do not match; Put also returns that CRC32C and Stat reads the
// stored one, in GCS's own form (base64 of the big-endian 32 bits).
package gcsstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/openbao/operator/internal/objectstore"
)

// DefaultChunkSize bounds the memory of an upload (one chunk).
const DefaultChunkSize = 8 << 20

// chunkUnit is GCS's granularity of resumable chunks: every chunk but the
// last is a multiple of it.
const chunkUnit = 256 << 10

// publicEndpoint serves the JSON API under /storage/v1 and uploads under
// /upload/storage/v1.
const publicEndpoint = "https://storage.googleapis.com"

// scopeReadWrite is the OAuth scope of reading and writing objects.
const scopeReadWrite = "https://www.googleapis.com/auth/devstorage.read_write"

type store struct {
	client    *http.Client
	endpoint  string // scheme://host[:port], no trailing slash
	bucket    string
	chunkSize int
}

// New returns the Store of one GCS bucket. It makes no request to the
// store. An http:// endpoint (an emulator) is used without credentials:
// no token is ever sent in the clear. Without a service account key it
// uses Application Default Credentials only when cfg.AmbientIdentity is
// set, and otherwise refuses.
func New(ctx context.Context, cfg objectstore.Config) (objectstore.Store, error) {
	endpoint, err := endpointOf(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	client, err := httpClient(ctx, cfg, strings.HasPrefix(endpoint, "http://"))
	if err != nil {
		return nil, err
	}
	return &store{client: client, endpoint: endpoint, bucket: cfg.Bucket, chunkSize: chunkSizeOf(cfg.PartSize)}, nil
}

// chunkSizeOf rounds the configured part size up to GCS's unit, so that
// the memory bound reported is the one used.
func chunkSizeOf(partSize int64) int {
	if partSize <= 0 {
		partSize = DefaultChunkSize
	}
	return int((partSize + chunkUnit - 1) / chunkUnit * chunkUnit)
}

func endpointOf(endpoint string) (string, error) {
	if endpoint == "" {
		return publicEndpoint, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("object store endpoint %q: want https://host[:port] or http://host[:port]", endpoint)
	}
	return strings.TrimSuffix(endpoint, "/"), nil
}

// httpClient authenticates with the service account's JSON key when
// given, else with Application Default Credentials (Workload Identity, the
// metadata server) only when cfg.AmbientIdentity allows it, and not at all
// over plain HTTP. Without a key and without that switch it refuses, and
// reads nothing of the environment (GOOGLE_APPLICATION_CREDENTIALS, the
// metadata server): the process's own token must never go to an endpoint
// someone else named.
func httpClient(ctx context.Context, cfg objectstore.Config, plainHTTP bool) (*http.Client, error) {
	base, err := objectstore.NewHTTPTransport(cfg.CAPEM)
	if err != nil {
		return nil, err
	}
	// GCS answers an unfinished chunk with 308 and no Location: that is
	// a status to read, never a redirect to follow.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if plainHTTP {
		return &http.Client{Transport: base, CheckRedirect: noRedirect}, nil
	}
	var creds *google.Credentials
	switch c := cfg.Credentials; {
	case c != nil && !c.ServiceAccountJSON.IsZero():
		creds, err = google.CredentialsFromJSONWithType(ctx, []byte(c.ServiceAccountJSON.Reveal()), google.ServiceAccount, scopeReadWrite)
	case cfg.AmbientIdentity:
		creds, err = google.FindDefaultCredentials(ctx, scopeReadWrite)
	default:
		return nil, fmt.Errorf("GCS bucket %q: %w", cfg.Bucket, objectstore.ErrNoCredentials)
	}
	if err != nil {
		// The error of the JSON parser may quote the key: say only what failed.
		return nil, errors.New("GCS credentials: no valid service account JSON key nor Application Default Credentials")
	}
	transport := &oauth2.Transport{Source: creds.TokenSource, Base: base}
	return &http.Client{Transport: transport, CheckRedirect: noRedirect}, nil
}

// objectURL is the JSON API's URL of an object; the name is one path
// segment, its slashes escaped.
func (s *store) objectURL(key string, query url.Values) string {
	u := s.endpoint + "/storage/v1/b/" + url.PathEscape(s.bucket) + "/o/" + url.PathEscape(key)
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	return u
}

func (s *store) Stat(ctx context.Context, key string) (objectstore.Object, error) {
	query := url.Values{"fields": {"name,size,updated,crc32c,generation"}}
	var res objectResource
	if err := s.getJSON(ctx, s.objectURL(key, query), &res); err != nil {
		if isStatus(err, http.StatusNotFound) {
			return objectstore.Object{}, fmt.Errorf("object store stat %s: %w", key, objectstore.ErrNotFound)
		}
		return objectstore.Object{}, s.fail("stat", key, err)
	}
	return res.object()
}

func (s *store) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	resp, err := s.call(ctx, http.MethodGet, s.objectURL(key, url.Values{"alt": {"media"}}), nil)
	if err != nil {
		if isStatus(err, http.StatusNotFound) {
			err = fmt.Errorf("%w: %w", objectstore.ErrNotFound, err)
		}
		return nil, s.fail("get", key, err)
	}
	return objectstore.Download(resp.Body, func(err error) error { return s.fail("get", key, withoutQuery(err)) }), nil
}

// OpenVersion reads the generation Stat returned, and only while it is
// still the live one (ifGenerationMatch): a replaced object is refused,
// in a bucket that keeps old generations as well.
func (s *store) OpenVersion(ctx context.Context, key, version string) (io.ReadCloser, error) {
	if _, err := strconv.ParseInt(version, 10, 64); err != nil {
		return nil, &objectstore.Error{Op: "get", Key: key, Permanent: true, Err: fmt.Errorf("version %q is not one this store gave", version)}
	}
	query := url.Values{"alt": {"media"}, "generation": {version}, "ifGenerationMatch": {version}}
	resp, err := s.call(ctx, http.MethodGet, s.objectURL(key, query), nil)
	if err != nil {
		if isStatus(err, http.StatusNotFound) || isStatus(err, http.StatusPreconditionFailed) {
			return nil, fmt.Errorf("object store get %s: %w", key, objectstore.ErrVersionChanged)
		}
		return nil, s.fail("get", key, err)
	}
	return objectstore.Download(resp.Body, func(err error) error { return s.fail("get", key, withoutQuery(err)) }), nil
}

func (s *store) List(ctx context.Context, prefix string) ([]objectstore.Object, error) {
	var out []objectstore.Object
	query := url.Values{"prefix": {prefix}, "fields": {"items(name,size,updated),nextPageToken"}}
	for {
		var page listResponse
		u := s.endpoint + "/storage/v1/b/" + url.PathEscape(s.bucket) + "/o?" + query.Encode()
		if err := s.getJSON(ctx, u, &page); err != nil {
			return nil, s.fail("list", prefix, err)
		}
		for _, item := range page.Items {
			obj, err := item.object()
			if err != nil {
				return nil, s.fail("list", prefix, err)
			}
			obj.Checksum = "" // List promises keys, sizes and times only.
			out = append(out, obj)
		}
		if page.NextPageToken == "" {
			return out, nil
		}
		query.Set("pageToken", page.NextPageToken)
	}
}

func (s *store) Delete(ctx context.Context, key string) error {
	resp, err := s.call(ctx, http.MethodDelete, s.objectURL(key, nil), nil)
	if err != nil {
		if isStatus(err, http.StatusNotFound) {
			return nil
		}
		return s.fail("delete", key, err)
	}
	return drain(resp)
}

// fail classifies an error of a call: refusals of the credentials, of
// the bucket or of the request cannot pass by retrying; other failures
// (network, throttling, 5xx) may.
func (s *store) fail(op, key string, err error) error {
	permanent := tokenRefused(err)
	var apiErr *apiError
	if errors.As(err, &apiErr) {
		switch apiErr.Code {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
			http.StatusRequestEntityTooLarge:
			permanent = true
		}
	}
	return &objectstore.Error{Op: op, Key: key, Permanent: permanent, Err: err}
}
