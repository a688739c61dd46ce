// Package golden compares rendered output with files under testdata. Run a
// test with -update to rewrite the files from what the code renders now.
package golden

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files with the current output")

// Assert fails the test when got differs from the golden file at path.
func Assert(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run the test with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update to accept):\n%s", path, diff(want, got))
	}
}

// diff shows the first differing line with a little context.
func diff(want, got []byte) string {
	w, g := bytes.Split(want, []byte("\n")), bytes.Split(got, []byte("\n"))
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl []byte
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if !bytes.Equal(wl, gl) {
			return "line " + strconv.Itoa(i+1) + ":\n- " + string(wl) + "\n+ " + string(gl)
		}
	}
	return "(no line differs; trailing bytes differ)"
}

// Set is the golden files under one directory that one test renders. When
// the test ends, a file under the directory that none of its Asserts
// compared is stale: nothing renders it any more, so it fails the test
// (with -update it is removed). A run narrowed with -run skips the check.
type Set struct {
	dir  string
	mu   sync.Mutex
	seen map[string]bool
}

// NewSet starts tracking dir for t.
func NewSet(t testing.TB, dir string) *Set {
	s := &Set{dir: dir, seen: map[string]bool{}}
	t.Cleanup(func() { s.checkStale(t) })
	return s
}

// Assert is Assert, recording path as rendered.
func (s *Set) Assert(t testing.TB, path string, got []byte) {
	t.Helper()
	s.mu.Lock()
	s.seen[filepath.Clean(path)] = true
	s.mu.Unlock()
	Assert(t, path, got)
}

func (s *Set) checkStale(t testing.TB) {
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" || t.Failed() {
		return
	}
	err := filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || s.seen[filepath.Clean(path)] {
			return err
		}
		if *update {
			return os.Remove(path)
		}
		t.Errorf("stale golden file %s: no test renders it any more (run with -update to remove it)", path)
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}
