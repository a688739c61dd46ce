package baoconfig

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"

	hcl1 "github.com/hashicorp/hcl"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestRenderMatchesGoldenFiles(t *testing.T) {
	names := make([]string, 0, len(goldenCases))
	for name := range goldenCases {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			got, err := Render(goldenCases[name])
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			compareGolden(t, name+".hcl", got)
		})
	}
	t.Run("selfinit", func(t *testing.T) {
		got, err := RenderSelfInit(goldenSelfInit)
		if err != nil {
			t.Fatalf("RenderSelfInit: %v", err)
		}
		compareGolden(t, "selfinit.hcl", got)
	})
}

// compareGolden checks got against testdata/name (or rewrites it with
// -update) and that OpenBao's HCL1 parser reads it.
func compareGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	if _, err := hcl1.ParseBytes(got); err != nil {
		t.Fatalf("HCL1 does not parse the rendering: %v\n%s", err, got)
	}
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test ./internal/baoconfig -update): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendering (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
