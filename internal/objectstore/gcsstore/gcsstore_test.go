package gcsstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/openbao/operator/internal/objectstore"
)

// TestABadKeyIsRefusedWithoutQuotingIt: the JSON parser's error may quote
// the key it was given.
func TestABadKeyIsRefusedWithoutQuotingIt(t *testing.T) {
	_, err := New(context.Background(), objectstore.Config{Provider: objectstore.ProviderGCS, Bucket: "b",
		Endpoint:    "https://storage.example.com",
		Credentials: &objectstore.Credentials{ServiceAccountJSON: objectstore.NewSecret(`{"type":"KEY-NEVER-PRINTED"}`)}})
	if err == nil || strings.Contains(err.Error(), "KEY-NEVER-PRINTED") {
		t.Fatalf("%v: want an error without the key", err)
	}
}

func TestChunksAreRoundedToGCSsUnit(t *testing.T) {
	g := startFakeGCS(t)
	s := g.store(t, 5<<20+1)
	if got := s.(*store).chunkSize; got != 5<<20+256<<10 {
		t.Errorf("chunk %d", got)
	}
	data := bytes.Repeat([]byte("x"), 12<<20)
	if _, err := s.Put(context.Background(), "k", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	ranges := g.contentRanges()
	want := []string{"bytes 0-5505023/*", "bytes 5505024-11010047/*", "bytes 11010048-12582911/12582912"}
	if fmt.Sprint(ranges) != fmt.Sprint(want) {
		t.Errorf("sent %q, want %q", ranges, want)
	}
}

// TestAFailedStreamNeverSendsTheLastChunk: the last chunk is what makes
// the object, so a stream that fails (the snapshot check) or a context
// canceled must end the session without it, and cancel it.
func TestAFailedStreamNeverSendsTheLastChunk(t *testing.T) {
	streams := map[string]func() (context.Context, io.Reader){
		"reader error": func() (context.Context, io.Reader) {
			return context.Background(), io.MultiReader(bytes.NewReader(make([]byte, 300<<10)), failingReader{})
		},
		"canceled": func() (context.Context, io.Reader) {
			ctx, cancel := context.WithCancel(context.Background())
			return ctx, io.MultiReader(bytes.NewReader(make([]byte, 300<<10)), cancelingReader{cancel})
		},
	}
	for name, stream := range streams {
		t.Run(name, func(t *testing.T) {
			g := startFakeGCS(t)
			ctx, r := stream()
			if _, err := g.store(t, chunkUnit).Put(ctx, "k", r); err == nil {
				t.Fatal("a failed stream was stored")
			}
			for _, cr := range g.contentRanges() {
				if !strings.HasSuffix(cr, "/*") {
					t.Errorf("sent the last chunk %q of a failed stream", cr)
				}
			}
			if !g.sessionCanceled() {
				t.Error("the session was not canceled")
			}
		})
	}
}

// TestPutReturnsTheCRC32CGCSComputes: Castagnoli's CRC of "123456789" is
// 0xE3069283 (IEEE's would be 0xCBF43926), sent with the last chunk and
// returned in GCS's form, base64 of the big-endian bytes.
func TestPutReturnsTheCRC32CGCSComputes(t *testing.T) {
	g := startFakeGCS(t)
	res, err := g.store(t, 0).Put(context.Background(), "k", strings.NewReader("123456789"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Checksum != "4waSgw==" || res.Size != 9 {
		t.Errorf("put %+v, want 9 bytes with CRC32C 4waSgw==", res)
	}
	if g.lastHash != "crc32c=4waSgw==" {
		t.Errorf("the last chunk carried X-Goog-Hash %q", g.lastHash)
	}
}

func TestStatRetriesThreeTimesAndReadsTheObject(t *testing.T) {
	g := startFakeGCS(t)
	s := g.store(t, 0)
	g.statStatus = http.StatusServiceUnavailable
	_, err := s.Stat(context.Background(), "dir/k")
	if err == nil || objectstore.IsPermanent(err) || g.stats != maxAttempts {
		t.Fatalf("a store that fails: %v after %d tries, want an error that may pass after %d", err, g.stats, maxAttempts)
	}
	g.statStatus = http.StatusNotFound
	if _, err := s.Stat(context.Background(), "dir/k"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Errorf("absent: %v, want ErrNotFound", err)
	}
	g.statStatus = http.StatusOK
	obj, err := s.Stat(context.Background(), "dir/k")
	if err != nil || obj.Key != "dir/k" || obj.Size != 9 || obj.Checksum != "4waSgw==" || obj.LastModified.IsZero() {
		t.Errorf("stat %+v %v", obj, err)
	}
	if g.statPath != "/storage/v1/b/b/o/dir%2Fk" {
		t.Errorf("stat requested %s: want the name as one segment", g.statPath)
	}
}

func TestListFollowsPageTokens(t *testing.T) {
	g := startFakeGCS(t)
	objs, err := g.store(t, 0).List(context.Background(), "p/")
	if err != nil || len(objs) != 3 || objs[2].Key != "p/c" || objs[2].Size != 3 || objs[0].Checksum != "" {
		t.Errorf("list %+v %v", objs, err)
	}
}

func TestDeleteOfAnAbsentObjectSucceeds(t *testing.T) {
	g := startFakeGCS(t)
	if err := g.store(t, 0).Delete(context.Background(), "gone"); err != nil {
		t.Error(err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("snapshot check: corrupt") }

type cancelingReader struct{ cancel context.CancelFunc }

func (c cancelingReader) Read([]byte) (int, error) {
	c.cancel()
	return 0, context.Canceled
}

// fakeGCS answers the few JSON API requests the tests make and records
// the uploads' Content-Range headers.
type fakeGCS struct {
	*httptest.Server
	mu         sync.Mutex
	ranges     []string
	lastHash   string
	canceled   bool
	statStatus int
	stats      int
	statPath   string
}

func startFakeGCS(t *testing.T) *fakeGCS {
	g := &fakeGCS{statStatus: http.StatusOK}
	g.Server = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.Close)
	return g
}

func (g *fakeGCS) store(t *testing.T, partSize int64) objectstore.Store {
	s, err := New(context.Background(), objectstore.Config{Endpoint: g.URL, Bucket: "b", PartSize: partSize})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (g *fakeGCS) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/upload/storage/v1/b/b/o":
		w.Header().Set("Location", g.URL+"/session?upload_id=1")
	case r.Method == http.MethodPut && r.URL.Path == "/session":
		g.chunk(w, r)
	case r.Method == http.MethodDelete && r.URL.Path == "/session":
		g.canceled = true
		w.WriteHeader(499)
	case r.Method == http.MethodGet && r.URL.Path == "/storage/v1/b/b/o":
		g.list(w, r)
	case r.Method == http.MethodGet:
		g.stats++
		g.statPath = r.URL.EscapedPath()
		if g.statStatus != http.StatusOK {
			http.Error(w, `{"error":{"message":"no"}}`, g.statStatus)
			return
		}
		fmt.Fprint(w, `{"name":"dir/k","size":"9","crc32c":"4waSgw==","updated":"2026-01-02T03:04:05.000Z","generation":"17"}`)
	default:
		http.Error(w, `{"error":{"message":"No such object"}}`, http.StatusNotFound)
	}
}

// chunk answers 308 with the bytes held, or 200 once the total is known.
func (g *fakeGCS) chunk(w http.ResponseWriter, r *http.Request) {
	cr := r.Header.Get("Content-Range")
	g.ranges = append(g.ranges, cr)
	_, _ = io.Copy(io.Discard, r.Body)
	if !strings.HasSuffix(cr, "/*") {
		g.lastHash = r.Header.Get("X-Goog-Hash")
		fmt.Fprint(w, `{"name":"k"}`)
		return
	}
	end := strings.TrimSuffix(cr[strings.Index(cr, "-")+1:], "/*")
	if _, err := strconv.Atoi(end); err != nil {
		http.Error(w, "bad range", http.StatusBadRequest)
		return
	}
	w.Header().Set("Range", "bytes=0-"+end)
	w.WriteHeader(http.StatusPermanentRedirect)
}

func (g *fakeGCS) list(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("prefix") != "p/" {
		http.Error(w, "prefix", http.StatusBadRequest)
		return
	}
	if r.URL.Query().Get("pageToken") == "" {
		fmt.Fprint(w, `{"items":[{"name":"p/a","size":"1","crc32c":"AAAAAA=="},{"name":"p/b","size":"2"}],"nextPageToken":"t2"}`)
		return
	}
	fmt.Fprint(w, `{"items":[{"name":"p/c","size":"3"}]}`)
}

func (g *fakeGCS) contentRanges() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.ranges...)
}

func (g *fakeGCS) sessionCanceled() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.canceled
}
