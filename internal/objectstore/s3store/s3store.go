// Package s3store is the objectstore.Store of S3 and S3-compatible stores,
// over minio-go: a client made for S3-compatible stores (path-style or
// virtual-hosted addressing, any endpoint, SigV4, instance and web-identity
// credentials) with one module and few dependencies, whose streaming
// multipart upload holds a fixed number of part buffers.
//
// Every part carries its SHA-256, which the store checks on receipt; the
// object then holds the composite SHA-256 (the SHA-256 of the parts'
// digests, "-N"), which Put computes from the bytes it sent and Stat
// reads back.
package s3store

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/openbao/operator/internal/objectstore"
)

// Secret is a credential string that prints as [redacted].
type Secret = objectstore.Secret

// NewSecret wraps a credential.
func NewSecret(v string) Secret { return objectstore.NewSecret(v) }

// Credentials are static S3 credentials.
type Credentials struct {
	AccessKeyID, SecretAccessKey, SessionToken Secret
}

// Config says how to reach one bucket.
type Config struct {
	// Endpoint is the store's URL: https://host[:port] or http://host[:port].
	Endpoint string
	Bucket   string
	// Region of the bucket; empty lets the client discover it.
	Region string
	// PathStyle addresses the bucket in the path; false lets the client
	// choose (virtual-hosted for AWS and Google, path style otherwise).
	PathStyle bool
	// CAPEM verifies a private endpoint; empty uses the system roots.
	CAPEM []byte
	// Credentials, when nil, come from the environment of the pod (a web
	// identity token (IRSA), EKS Pod Identity or instance metadata) only
	// when AmbientIdentity is set; otherwise New refuses.
	Credentials *Credentials
	// AmbientIdentity: see objectstore.Config.AmbientIdentity.
	AmbientIdentity bool
	// PartSize is the size of each uploaded part, at least 5 MiB.
	PartSize int64
	// Concurrency is how many parts are buffered and uploaded at once;
	// memory is about PartSize × Concurrency.
	Concurrency int
}

// DefaultPartSize gives a largest object of 80 GiB (10,000 parts).
const DefaultPartSize = 8 << 20

// minPartSize is S3's smallest part but the last.
const minPartSize = 5 << 20

type store struct {
	client      *minio.Client
	bucket      string
	partSize    int64
	concurrency int
}

// New returns the Store of one bucket. It makes no request, and reads
// nothing of the pod's environment unless cfg.AmbientIdentity is set.
func New(cfg Config) (objectstore.Store, error) {
	if cfg.Credentials == nil && !cfg.AmbientIdentity {
		return nil, fmt.Errorf("S3 bucket %q: %w", cfg.Bucket, objectstore.ErrNoCredentials)
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("object store endpoint %q: want https://host[:port] or http://host[:port]", cfg.Endpoint)
	}
	transport, err := objectstore.NewHTTPTransport(cfg.CAPEM)
	if err != nil {
		return nil, err
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds: credentialsOf(cfg.Credentials), Secure: u.Scheme == "https", Transport: transport,
		Region: cfg.Region, BucketLookup: lookup,
		// Only gates checksums in the options: a streamed multipart
		// upload sends each part's checksum as a header.
		TrailingHeaders: true,
	})
	if err != nil {
		return nil, fmt.Errorf("object store client for %s: %w", u.Host, err)
	}
	s := &store{client: client, bucket: cfg.Bucket, partSize: cfg.PartSize, concurrency: cfg.Concurrency}
	if s.partSize == 0 {
		s.partSize = DefaultPartSize
	}
	if s.partSize < minPartSize {
		return nil, fmt.Errorf("object store part size %d: at least %d bytes", s.partSize, minPartSize)
	}
	if s.concurrency < 1 {
		s.concurrency = 1
	}
	return s, nil
}

// FromConfig is the S3 store of a provider-neutral configuration.
func FromConfig(cfg objectstore.Config) (objectstore.Store, error) {
	var creds *Credentials
	if c := cfg.Credentials; c != nil {
		creds = &Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken}
	}
	return New(Config{
		Endpoint: cfg.Endpoint, Bucket: cfg.Bucket, Region: cfg.Region, PathStyle: cfg.PathStyle, CAPEM: cfg.CAPEM,
		Credentials: creds, AmbientIdentity: cfg.AmbientIdentity, PartSize: cfg.PartSize, Concurrency: cfg.Concurrency,
	})
}

// credentialsOf is the static credentials, or (New checked that
// AmbientIdentity allows it) the pod's IAM identity.
func credentialsOf(c *Credentials) *credentials.Credentials {
	if c == nil {
		return credentials.NewIAM("")
	}
	return credentials.NewStaticV4(c.AccessKeyID.Reveal(), c.SecretAccessKey.Reveal(), c.SessionToken.Reveal())
}

func (s *store) Put(ctx context.Context, key string, r io.Reader) (objectstore.PutResult, error) {
	sum := &compositeSHA256{partSize: s.partSize, part: sha256.New()}
	opts := minio.PutObjectOptions{
		PartSize: uint64(s.partSize), Checksum: minio.ChecksumSHA256, ContentType: "application/octet-stream",
		ConcurrentStreamParts: s.concurrency > 1, NumThreads: uint(s.concurrency),
		// The signed checksum header protects each part; hashing the part
		// again for the signature (on plain HTTP) would add nothing.
		DisableContentSha256: true,
	}
	info, err := s.client.PutObject(ctx, s.bucket, key, io.TeeReader(r, sum), -1, opts)
	if err != nil {
		// minio-go aborts the upload itself, with ctx; once ctx is done
		// that abort fails, so abort again on a context of its own.
		abortCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = s.client.RemoveIncompleteUpload(abortCtx, s.bucket, key)
		return objectstore.PutResult{}, s.fail("put", key, err)
	}
	return objectstore.PutResult{Size: info.Size, Checksum: sum.String()}, nil
}

func (s *store) Stat(ctx context.Context, key string) (objectstore.Object, error) {
	info, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{Checksum: true})
	if err != nil {
		if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
			return objectstore.Object{}, fmt.Errorf("object store stat %s: %w", key, objectstore.ErrNotFound)
		}
		return objectstore.Object{}, s.fail("stat", key, err)
	}
	return objectstore.Object{Key: info.Key, Size: info.Size, LastModified: info.LastModified, Checksum: info.ChecksumSHA256,
		Version: versionOf(info.VersionID, info.ETag)}, nil
}

// Versions are "id:<version ID>" in a versioned bucket, where the ID
// names the bytes for good, else "etag:<ETag>", which changes with them.
const (
	versionIDPrefix = "id:"
	etagPrefix      = "etag:"
)

func versionOf(versionID, etag string) string {
	if versionID != "" && versionID != "null" {
		return versionIDPrefix + versionID
	}
	return etagPrefix + etag
}

// OpenVersion reads the version Stat returned: by its ID, or on the
// condition that the ETag still matches (If-Match).
func (s *store) OpenVersion(ctx context.Context, key, version string) (io.ReadCloser, error) {
	opts := minio.GetObjectOptions{}
	if id, ok := strings.CutPrefix(version, versionIDPrefix); ok {
		opts.VersionID = id
	} else if etag, ok := strings.CutPrefix(version, etagPrefix); ok && etag != "" {
		if err := opts.SetMatchETag(etag); err != nil {
			return nil, s.fail("get", key, err)
		}
	} else {
		return nil, &objectstore.Error{Op: "get", Key: key, Permanent: true, Err: fmt.Errorf("version %q is not one this store gave", version)}
	}
	obj, err := s.client.GetObject(ctx, s.bucket, key, opts)
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	return objectstore.Download(obj, func(err error) error { return s.fail("get", key, err) }), nil
}

func (s *store) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	return objectstore.Download(obj, func(err error) error { return s.fail("get", key, err) }), nil
}

func (s *store) List(ctx context.Context, prefix string) ([]objectstore.Object, error) {
	var out []objectstore.Object
	for info := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if info.Err != nil {
			return nil, s.fail("list", prefix, info.Err)
		}
		out = append(out, objectstore.Object{Key: info.Key, Size: info.Size, LastModified: info.LastModified})
	}
	return out, nil
}

func (s *store) Delete(ctx context.Context, key string) error {
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return s.fail("delete", key, err)
	}
	return nil
}

// fail classifies an error of minio-go. Its ErrorResponse prints the
// store's code and message, which never hold the credentials.
func (s *store) fail(op, key string, err error) error {
	resp := minio.ToErrorResponse(err)
	permanent := false
	switch resp.Code {
	case minio.NoSuchBucket, "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidBucketName",
		"AuthorizationHeaderMalformed", "InvalidToken", "ExpiredToken", "InvalidArgument", "EntityTooLarge":
		permanent = true
	}
	if resp.Code == "PreconditionFailed" || resp.Code == minio.NoSuchVersion {
		return &objectstore.Error{Op: op, Key: key, Permanent: true,
			Err: fmt.Errorf("%w (HTTP %d %s)", objectstore.ErrVersionChanged, resp.StatusCode, resp.Code)}
	}
	if resp.Code != "" {
		err = fmt.Errorf("%s (HTTP %d %s)", resp.Message, resp.StatusCode, resp.Code)
	}
	return &objectstore.Error{Op: op, Key: key, Permanent: permanent, Err: err}
}

// compositeSHA256 computes what the store holds for an object uploaded in
// parts of partSize: the SHA-256 of the parts' SHA-256 digests, base64,
// then "-" and the part count.
type compositeSHA256 struct {
	partSize int64
	part     hash.Hash
	inPart   int64
	digests  []byte
	parts    int
}

func (c *compositeSHA256) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		take := min(int64(len(p)), c.partSize-c.inPart)
		c.part.Write(p[:take])
		c.inPart += take
		p = p[take:]
		if c.inPart == c.partSize {
			c.closePart()
		}
	}
	return n, nil
}

func (c *compositeSHA256) closePart() {
	c.digests = c.part.Sum(c.digests)
	c.parts++
	c.part.Reset()
	c.inPart = 0
}

func (c *compositeSHA256) String() string {
	if c.inPart > 0 || c.parts == 0 {
		c.closePart()
	}
	sum := sha256.Sum256(c.digests)
	return base64.StdEncoding.EncodeToString(sum[:]) + "-" + strconv.Itoa(c.parts)
}
