// Package storetest is the conformance suite every objectstore.Store
// passes against its real server or emulator: the contract of
// objectstore.Store, call by call, including that a failed Put leaves
// nothing and that Put's memory stays near a few parts whatever the size.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/openbao/operator/internal/objectstore"
)

// Target is one store under test.
type Target struct {
	Store objectstore.Store
	// PartSize and Concurrency are the store's; memory of a Put should be
	// about their product.
	PartSize    int64
	Concurrency int
	// Leftovers counts the incomplete uploads or parts the store holds;
	// nil where the store cannot be asked.
	Leftovers func(t *testing.T) int
}

// Run runs the suite as subtests; each works under its own prefix.
func Run(t *testing.T, target Target) {
	t.Run("PutStatOpenListDelete", func(t *testing.T) { putStatOpenListDelete(t, target) })
	t.Run("FailedPutLeavesNothing", func(t *testing.T) { failedPutLeavesNothing(t, target) })
	t.Run("PutMemoryIsBounded", func(t *testing.T) { putMemoryIsBounded(t, target) })
	t.Run("OpenVersionReadsOnlyTheVersionStatGave", func(t *testing.T) { openVersion(t, target) })
}

// openVersion: a restore checks an object in a first read and posts it in
// a second; the second must read the bytes Stat described, or fail with
// ErrVersionChanged once the object was replaced.
func openVersion(t *testing.T, target Target) {
	ctx, s, key := context.Background(), target.Store, "version/ns/bao/v.snap"
	first, second := randomBytes(4321), randomBytes(5432)
	if _, err := s.Put(ctx, key, bytes.NewReader(first)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Delete(ctx, key) })
	obj, err := s.Stat(ctx, key)
	if err != nil || obj.Version == "" {
		t.Fatalf("stat: %+v %v, want a version", obj, err)
	}
	if got := readVersion(ctx, s, key, obj.Version); !bytes.Equal(got.data, first) || got.err != nil {
		t.Fatalf("the version Stat gave: %d bytes, %v", len(got.data), got.err)
	}
	if _, err := s.Put(ctx, key, bytes.NewReader(second)); err != nil {
		t.Fatal(err)
	}
	if got := readVersion(ctx, s, key, obj.Version); !errors.Is(got.err, objectstore.ErrVersionChanged) {
		t.Fatalf("the replaced version: %d bytes, %v; want ErrVersionChanged", len(got.data), got.err)
	}
}

type versionRead struct {
	data []byte
	err  error
}

func readVersion(ctx context.Context, s objectstore.Store, key, version string) versionRead {
	r, err := s.OpenVersion(ctx, key, version)
	if err != nil {
		return versionRead{err: err}
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	return versionRead{data: data, err: err}
}

func putStatOpenListDelete(t *testing.T, target Target) {
	ctx, s := context.Background(), target.Store
	data := randomBytes(int(2*target.PartSize) + 12345) // three parts, the last short
	put, err := s.Put(ctx, "conf/ns/bao/a.snap", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "conf/ns/bao/small.snap", bytes.NewReader([]byte("x"))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "conf/other/b.snap", bytes.NewReader([]byte("y"))); err != nil {
		t.Fatal(err)
	}
	got, err := s.Stat(ctx, "conf/ns/bao/a.snap")
	if err != nil {
		t.Fatal(err)
	}
	if put.Size != int64(len(data)) || got.Size != put.Size || got.Checksum == "" || got.Checksum != put.Checksum {
		t.Fatalf("sent %d bytes as %+v, the store holds %+v", len(data), put, got)
	}
	t.Logf("stored %d bytes, checksum %s", got.Size, got.Checksum)
	if readBack := ReadAll(t, s, "conf/ns/bao/a.snap"); sha256.Sum256(readBack) != sha256.Sum256(data) {
		t.Fatalf("read back %d bytes that differ from the %d sent", len(readBack), len(data))
	}
	objs, err := s.List(ctx, "conf/ns/bao/")
	if err != nil || len(objs) != 2 || objs[0].Key != "conf/ns/bao/a.snap" || objs[0].Size != int64(len(data)) ||
		objs[1].Key != "conf/ns/bao/small.snap" || objs[0].LastModified.IsZero() {
		t.Fatalf("list: %+v %v", objs, err)
	}
	if objs, err := s.List(ctx, "conf/"); err != nil || len(objs) != 3 {
		t.Fatalf("list at any depth: %+v %v", objs, err)
	}
	for _, key := range []string{"conf/ns/bao/a.snap", "conf/ns/bao/small.snap", "conf/other/b.snap"} {
		if err := s.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Stat(ctx, "conf/ns/bao/a.snap"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Errorf("stat after delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "conf/ns/bao/a.snap"); err != nil {
		t.Errorf("deleting an absent object: %v", err)
	}
}

func failedPutLeavesNothing(t *testing.T, target Target) {
	ctx, s := context.Background(), target.Store
	cases := map[string]func(context.Context) (context.Context, io.Reader){
		// The snapshot check fails after more than a part was sent.
		"fail/after-parts.snap": func(ctx context.Context) (context.Context, io.Reader) {
			return ctx, io.MultiReader(bytes.NewReader(randomBytes(int(target.PartSize*3/2))), failing{})
		},
		// It fails before the first part is full.
		"fail/first-part.snap": func(ctx context.Context) (context.Context, io.Reader) {
			return ctx, io.MultiReader(bytes.NewReader(randomBytes(1000)), failing{})
		},
		// The executor is stopped while the stream stalls.
		"fail/canceled.snap": func(ctx context.Context) (context.Context, io.Reader) {
			cctx, stall := NewStall(ctx)
			return cctx, io.MultiReader(bytes.NewReader(randomBytes(int(target.PartSize)+1)), stall)
		},
	}
	for key, stream := range cases {
		pctx, r := stream(ctx)
		if _, err := s.Put(pctx, key, r); err == nil {
			t.Errorf("%s: a failed stream was stored", key)
		}
		if _, err := s.Stat(ctx, key); !errors.Is(err, objectstore.ErrNotFound) {
			t.Errorf("%s: %v, want no object", key, err)
		}
	}
	if objs, err := s.List(ctx, "fail/"); err != nil || len(objs) != 0 {
		t.Errorf("list after failed puts: %+v %v, want nothing", objs, err)
	}
	if target.Leftovers != nil {
		if n := target.Leftovers(t); n != 0 {
			t.Errorf("%d incomplete uploads left", n)
		}
	}
}

// putMemoryIsBounded streams far more than a few parts from a reader that
// holds nothing, sampling the heap as it is read: the growth must stay
// near PartSize × Concurrency, never near the object's size.
func putMemoryIsBounded(t *testing.T, target Target) {
	const size = 96 << 20
	r := &sampledReader{left: size, rng: rand.NewChaCha8([32]byte{1})}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	r.base = base.HeapAlloc
	put, err := target.Store.Put(context.Background(), "mem/large.snap", r)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Store.Delete(context.Background(), "mem/large.snap")
	if put.Size != size {
		t.Fatalf("stored %d of %d bytes", put.Size, size)
	}
	parts := target.PartSize * int64(max(target.Concurrency, 1))
	t.Logf("Put of %d MiB: peak heap growth %.1f MiB (part %d MiB × %d)",
		size>>20, float64(r.peak)/(1<<20), target.PartSize>>20, max(target.Concurrency, 1))
	if limit := 2*parts + 24<<20; int64(r.peak) > limit {
		t.Errorf("peak heap growth %d bytes, want at most %d: Put buffers more than its parts", r.peak, limit)
	}
}

// sampledReader yields pseudo-random bytes and records the peak of the
// heap above base, once per MiB read.
type sampledReader struct {
	left      int64
	rng       *rand.ChaCha8
	base      uint64
	peak      uint64
	sinceRead int
}

func (r *sampledReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.left))
	_, _ = r.rng.Read(p[:n])
	r.left -= int64(n)
	if r.sinceRead += n; r.sinceRead >= 1<<20 {
		r.sinceRead = 0
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.HeapAlloc > r.base && m.HeapAlloc-r.base > r.peak {
			r.peak = m.HeapAlloc - r.base
		}
	}
	return n, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{byte(n)}).Read(b)
	return b
}

// ReadAll reads a whole object of s.
func ReadAll(t *testing.T, s objectstore.Store, key string) []byte {
	t.Helper()
	r, err := s.Open(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// failing fails the stream, as the snapshot check does.
type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("snapshot check: corrupt") }

// Stall is a stream that stalls while its reader is stopped: its first
// Read cancels the context, then blocks until it is done.
type Stall struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// NewStall returns a context to read under and the stream that cancels it.
func NewStall(ctx context.Context) (context.Context, *Stall) {
	cctx, cancel := context.WithCancel(ctx)
	return cctx, &Stall{ctx: cctx, cancel: cancel}
}

func (b *Stall) Read([]byte) (int, error) {
	b.cancel()
	<-b.ctx.Done()
	time.Sleep(10 * time.Millisecond)
	return 0, b.ctx.Err()
}
