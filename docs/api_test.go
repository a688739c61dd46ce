package docs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/openbao/operator/test/testbin"
)

// apiDocsArgs is `make generate`'s crd-ref-docs command line, less the
// output path: from the repository root, the Go types in api/ rendered by
// the templates in hack/api-docs.
var apiDocsArgs = []string{
	"--config", "hack/api-docs/config.yaml", "--templates-dir", "hack/api-docs/templates",
	"--source-path", "./api", "--renderer", "markdown", "--log-level", "ERROR",
}

// TestAPIReferenceIsCurrent renders the API reference from the types as
// they are now and compares it with docs/api.md: a field, a comment or a
// validation marker changed without `make generate` leaves the reference
// describing an API that no longer exists.
func TestAPIReferenceIsCurrent(t *testing.T) {
	dir, err := testbin.Dir()
	if err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(dir, "crd-ref-docs")
	if _, err := os.Stat(tool); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no %s under CI: make test builds it first (make docs-tools)", tool)
		}
		t.Skipf("SKIP: docs/api.md not checked: no %s (`make docs-tools` builds it; `make generate` and `make test` do too)", tool)
	}
	out := filepath.Join(t.TempDir(), "api.md")
	cmd := exec.Command(tool, append(apiDocsArgs, "--output-path", out)...)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("crd-ref-docs: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/api.md is stale: run `make generate`; first difference:\n%s", firstDifference(string(got), string(want)))
	}
}

// firstDifference shows the first line where docs/api.md and the fresh
// rendering part.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + "\n  docs/api.md: " + gl + "\n  generated:   " + wl
		}
	}
	return "(none: the files differ only in line endings)"
}
