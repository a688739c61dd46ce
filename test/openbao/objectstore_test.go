package openbao_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/objectstore/s3store"
	"github.com/openbao/operator/test/miniotest"
	"github.com/openbao/operator/test/storetest"
)

func s3Store(t *testing.T, m *miniotest.Server, mutate ...func(*s3store.Config)) objectstore.Store {
	t.Helper()
	cfg := s3store.Config{
		Endpoint: m.Endpoint, Bucket: m.Bucket, Region: "us-east-1", PathStyle: true, PartSize: 5 << 20,
		Credentials: &s3store.Credentials{AccessKeyID: s3store.NewSecret(m.AccessKey), SecretAccessKey: s3store.NewSecret(m.SecretKey)},
	}
	for _, f := range mutate {
		f(&cfg)
	}
	s, err := s3store.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func incompleteUploads(t *testing.T, m *miniotest.Server) int {
	t.Helper()
	n := 0
	for u := range m.Client.ListIncompleteUploads(context.Background(), m.Bucket, "", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		n++
	}
	return n
}

// TestS3StoreAgainstMinIO: a multipart stream lands whole, and its size
// and composite SHA-256 read back equal to what was sent; a stream that
// fails (the snapshot check, a canceled context) leaves neither an object
// nor parts; refusals are classified.
func TestS3StoreAgainstMinIO(t *testing.T) {
	t.Parallel()
	m := miniotest.Start(t)
	ctx := context.Background()
	for _, concurrency := range []int{1, 2} {
		store := s3Store(t, m, func(c *s3store.Config) { c.Concurrency = concurrency })
		data := make([]byte, 12<<20+12345) // three parts, the last short
		rand.Read(data)
		put, err := store.Put(ctx, "p/ns/bao/a.snap", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		got, err := store.Stat(ctx, "p/ns/bao/a.snap")
		if err != nil {
			t.Fatal(err)
		}
		if put.Size != int64(len(data)) || got.Size != put.Size || got.Checksum != put.Checksum || got.Checksum == "" {
			t.Fatalf("concurrency %d: sent %+v, stored %+v", concurrency, put, got)
		}
		t.Logf("concurrency %d: stored %d bytes, checksum %s", concurrency, got.Size, got.Checksum)
	}

	failing := io.MultiReader(bytes.NewReader(make([]byte, 7<<20)), &errAfter{err: errors.New("snapshot check: corrupt")})
	store := s3Store(t, m)
	if _, err := store.Put(ctx, "p/ns/bao/bad.snap", failing); err == nil {
		t.Fatal("a failing stream was stored")
	}
	cctx, stall := storetest.NewStall(ctx)
	slow := io.MultiReader(bytes.NewReader(make([]byte, 6<<20)), stall)
	if _, err := store.Put(cctx, "p/ns/bao/canceled.snap", slow); err == nil {
		t.Fatal("a canceled stream was stored")
	}
	for _, key := range []string{"p/ns/bao/bad.snap", "p/ns/bao/canceled.snap"} {
		if _, err := store.Stat(ctx, key); !errors.Is(err, objectstore.ErrNotFound) {
			t.Errorf("%s: %v, want no object", key, err)
		}
	}
	if n := incompleteUploads(t, m); n != 0 {
		t.Errorf("%d incomplete uploads left", n)
	}

	objs, err := store.List(ctx, "p/ns/bao/")
	if err != nil || len(objs) != 1 || objs[0].Key != "p/ns/bao/a.snap" {
		t.Fatalf("list: %+v %v", objs, err)
	}
	if err := store.Delete(ctx, "p/ns/bao/a.snap"); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, "p/ns/bao/a.snap"); err != nil {
		t.Errorf("deleting an absent object: %v", err)
	}

	wrong := s3Store(t, m, func(c *s3store.Config) { c.Credentials.SecretAccessKey = s3store.NewSecret("wrong-secret") })
	_, err = wrong.Put(ctx, "p/ns/bao/x.snap", bytes.NewReader([]byte("x")))
	if !objectstore.IsPermanent(err) || bytes.Contains([]byte(err.Error()), []byte(m.SecretKey)) {
		t.Errorf("wrong credentials: %v, want a permanent error without the secret", err)
	}
	noBucket := s3Store(t, m, func(c *s3store.Config) { c.Bucket = "missing" })
	if _, err := noBucket.List(ctx, ""); !objectstore.IsPermanent(err) {
		t.Errorf("a missing bucket: %v, want a permanent error", err)
	}
	m.Kill()
	if _, err := store.Stat(ctx, "x"); err == nil || objectstore.IsPermanent(err) {
		t.Errorf("a store that is down: %v, want an error that may pass", err)
	}
}

// errAfter fails the stream, as the snapshot check does.
type errAfter struct{ err error }

func (e *errAfter) Read([]byte) (int, error) { return 0, e.err }

// TestOpenVersionReadsOnlyTheVersionStatReturned: against MinIO, an object
// replaced after Stat is not read under the old version (If-Match on its
// ETag fails with ErrVersionChanged); the version as it is reads fine.
func TestOpenVersionReadsOnlyTheVersionStatReturned(t *testing.T) {
	t.Parallel()
	m := miniotest.Start(t)
	store := s3Store(t, m)
	ctx := context.Background()
	if _, err := store.Put(ctx, "k.snap", strings.NewReader("first")); err != nil {
		t.Fatal(err)
	}
	first, err := store.Stat(ctx, "k.snap")
	if err != nil || first.Version == "" {
		t.Fatalf("stat: %+v %v", first, err)
	}
	if _, err := store.Put(ctx, "k.snap", strings.NewReader("second")); err != nil {
		t.Fatal(err)
	}
	r, err := store.OpenVersion(ctx, "k.snap", first.Version)
	if err == nil {
		_, err = io.ReadAll(r)
		r.Close()
	}
	if !errors.Is(err, objectstore.ErrVersionChanged) {
		t.Fatalf("reading a replaced version: %v, want ErrVersionChanged", err)
	}
	second, err := store.Stat(ctx, "k.snap")
	if err != nil {
		t.Fatal(err)
	}
	r, err = store.OpenVersion(ctx, "k.snap", second.Version)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if data, err := io.ReadAll(r); err != nil || string(data) != "second" {
		t.Fatalf("reading the current version: %q %v", data, err)
	}
}
