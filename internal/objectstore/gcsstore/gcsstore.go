// Package gcsstore is the objectstore.Store of Google Cloud Storage, over
// cloud.google.com/go/storage and its JSON API.
//
// Put is a resumable upload of fixed-size chunks: the writer holds one
// chunk in memory whatever the object's size, and the object exists only
// once the last chunk is sent, by Close. A stream that fails cancels the
// writer's context before Close, so the upload is never finalized and no
// object appears. The client sends the CRC32C of the whole object with the
// last chunk and GCS refuses an object whose bytes do not match; Put also
// computes that CRC32C from the bytes it sent and Stat reads the stored
// one, in GCS's own form (base64 of the big-endian 32 bits).
package gcsstore

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/openbao/operator/internal/objectstore"
)

// DefaultChunkSize bounds the memory of an upload (one chunk).
const DefaultChunkSize = 8 << 20

// maxAttempts bounds the client's tries of one call.
const maxAttempts = 3

// chunkUnit is GCS's granularity of resumable chunks.
const chunkUnit = 256 << 10

type store struct {
	client    *storage.Client
	bucket    *storage.BucketHandle
	chunkSize int
}

// New returns the Store of one GCS bucket. It makes no request to the
// store. An http:// endpoint (an emulator) is used without credentials:
// no token is ever sent in the clear.
func New(ctx context.Context, cfg objectstore.Config) (objectstore.Store, error) {
	httpClient, err := httpClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	opts := []option.ClientOption{option.WithHTTPClient(httpClient)}
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(cfg.Endpoint, "/")+"/storage/v1/"))
	}
	client, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("GCS client: %w", err)
	}
	// The client retries until its context ends; the executor retries
	// whole runs itself and retention runs again later, so a few tries
	// suffice and a store that is down is reported within seconds.
	client.SetRetry(storage.WithMaxAttempts(maxAttempts))
	chunk := cfg.PartSize
	if chunk <= 0 {
		chunk = DefaultChunkSize
	}
	// The client rounds a chunk up to the unit; round here so the bound
	// reported is the one used.
	chunk = (chunk + chunkUnit - 1) / chunkUnit * chunkUnit
	return &store{client: client, bucket: client.Bucket(cfg.Bucket), chunkSize: int(chunk)}, nil
}

// httpClient authenticates with the service account's JSON key when
// given, with Application Default Credentials (Workload Identity, the
// metadata server) otherwise, and not at all for an http:// endpoint.
func httpClient(ctx context.Context, cfg objectstore.Config) (*http.Client, error) {
	base, err := objectstore.NewHTTPTransport(cfg.CAPEM)
	if err != nil {
		return nil, err
	}
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("object store endpoint %q: want https://host[:port] or http://host[:port]", cfg.Endpoint)
		}
		if u.Scheme == "http" {
			return &http.Client{Transport: base}, nil
		}
	}
	var creds *google.Credentials
	if c := cfg.Credentials; c != nil && !c.ServiceAccountJSON.IsZero() {
		creds, err = google.CredentialsFromJSONWithType(ctx, []byte(c.ServiceAccountJSON.Reveal()), google.ServiceAccount, storage.ScopeReadWrite)
	} else {
		creds, err = google.FindDefaultCredentials(ctx, storage.ScopeReadWrite)
	}
	if err != nil {
		// The error of the JSON parser may quote the key: say only what failed.
		return nil, errors.New("GCS credentials: no valid service account JSON key nor Application Default Credentials")
	}
	return &http.Client{Transport: &oauth2.Transport{Source: creds.TokenSource, Base: base}}, nil
}

func (s *store) Put(ctx context.Context, key string, r io.Reader) (objectstore.PutResult, error) {
	// Canceling wctx before Close abandons the resumable session: GCS
	// finalizes an object only with the last chunk, which Close sends.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := s.bucket.Object(key).NewWriter(wctx)
	w.ChunkSize = s.chunkSize
	w.ContentType = "application/octet-stream"
	sum := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	n, err := io.Copy(w, io.TeeReader(r, sum))
	if err != nil {
		cancel()
		_ = w.Close()
		return objectstore.PutResult{}, s.fail("put", key, err)
	}
	if err := w.Close(); err != nil {
		return objectstore.PutResult{}, s.fail("put", key, err)
	}
	return objectstore.PutResult{Size: n, Checksum: encodeCRC32C(sum.Sum32())}, nil
}

func encodeCRC32C(v uint32) string {
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, v))
}

func (s *store) Stat(ctx context.Context, key string) (objectstore.Object, error) {
	attrs, err := s.bucket.Object(key).Attrs(ctx)
	if err != nil {
		if errors.Is(err, storage.ErrObjectNotExist) {
			return objectstore.Object{}, fmt.Errorf("object store stat %s: %w", key, objectstore.ErrNotFound)
		}
		return objectstore.Object{}, s.fail("stat", key, err)
	}
	return objectOf(attrs), nil
}

func objectOf(a *storage.ObjectAttrs) objectstore.Object {
	return objectstore.Object{Key: a.Name, Size: a.Size, LastModified: a.Updated, Checksum: encodeCRC32C(a.CRC32C),
		Version: strconv.FormatInt(a.Generation, 10)}
}

// OpenVersion reads the object's generation that Stat returned, and only
// while it is still the live one: a replaced object is refused.
func (s *store) OpenVersion(ctx context.Context, key, version string) (io.ReadCloser, error) {
	gen, err := strconv.ParseInt(version, 10, 64)
	if err != nil || gen <= 0 {
		return nil, &objectstore.Error{Op: "get", Key: key, Permanent: true, Err: fmt.Errorf("version %q is not one this store gave", version)}
	}
	r, err := s.bucket.Object(key).Generation(gen).If(storage.Conditions{GenerationMatch: gen}).NewReader(ctx)
	if err != nil {
		if errors.Is(err, storage.ErrObjectNotExist) || isPreconditionFailed(err) {
			return nil, fmt.Errorf("object store get %s: %w", key, objectstore.ErrVersionChanged)
		}
		return nil, s.fail("get", key, err)
	}
	return &objectReader{r: r, fail: func(err error) error { return s.fail("get", key, err) }}, nil
}

func isPreconditionFailed(err error) bool {
	var apiErr *googleapi.Error
	return errors.As(err, &apiErr) && apiErr.Code == http.StatusPreconditionFailed
}

func (s *store) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	r, err := s.bucket.Object(key).NewReader(ctx)
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	return &objectReader{r: r, fail: func(err error) error { return s.fail("get", key, err) }}, nil
}

// objectReader classifies the errors of a download.
type objectReader struct {
	r    *storage.Reader
	fail func(error) error
}

func (o *objectReader) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = o.fail(err)
	}
	return n, err
}

func (o *objectReader) Close() error { return o.r.Close() }

func (s *store) List(ctx context.Context, prefix string) ([]objectstore.Object, error) {
	q := &storage.Query{Prefix: prefix}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated", "CRC32C"}); err != nil {
		return nil, fmt.Errorf("GCS list attributes: %w", err)
	}
	var out []objectstore.Object
	it := s.bucket.Objects(ctx, q)
	for {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, s.fail("list", prefix, err)
		}
		obj := objectOf(attrs)
		obj.Checksum = "" // List promises keys, sizes and times only.
		out = append(out, obj)
	}
}

func (s *store) Delete(ctx context.Context, key string) error {
	err := s.bucket.Object(key).Delete(ctx)
	if err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return s.fail("delete", key, err)
	}
	return nil
}

// fail classifies an error of the client: refusals of the credentials or
// of the bucket cannot pass by retrying; other failures may.
func (s *store) fail(op, key string, err error) error {
	permanent := errors.Is(err, storage.ErrBucketNotExist)
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		switch gerr.Code {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
			http.StatusRequestEntityTooLarge:
			permanent = true
		}
	}
	return &objectstore.Error{Op: op, Key: key, Permanent: permanent, Err: err}
}
