// Package docs_test checks the condition reasons the operator sets
// against themselves and against docs/troubleshooting.md: every Reason*
// constant in api/, internal/ and controllers/ says its own value, and the
// troubleshooting reference lists every value and no other.
package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// root is the repository, one level up from docs/.
const root = ".."

// reason is one Reason* constant as written.
type reason struct {
	where, name string
	// value is the string it holds; alias names the constant of another
	// package it is set to (backup.ReasonRestoreInProgress = day2.…).
	value, alias string
}

// reasonConstants parses the non-test Go files under dirs.
func reasonConstants(t *testing.T, dirs ...string) []reason {
	t.Helper()
	var out []reason
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			out = append(out, reasonsOf(t, path, f)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func reasonsOf(t *testing.T, path string, f *ast.File) []reason {
	var out []reason
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Reason") || i >= len(vs.Values) {
					continue
				}
				r := reason{where: path, name: name.Name}
				switch v := vs.Values[i].(type) {
				case *ast.BasicLit:
					r.value, _ = strconv.Unquote(v.Value)
				case *ast.SelectorExpr:
					r.alias = v.Sel.Name
				default:
					t.Errorf("%s: %s is neither a string nor another package's reason; this test cannot read it", path, name.Name)
				}
				out = append(out, r)
			}
		}
	}
	return out
}

var dirs = []string{"api", "internal", "controllers"}

func TestEveryReasonConstantIsNamedForItsValue(t *testing.T) {
	rs := reasonConstants(t, dirs...)
	if len(rs) < 100 {
		t.Fatalf("found only %d reason constants: the walk is broken", len(rs))
	}
	for _, r := range rs {
		want := strings.TrimPrefix(r.name, "Reason")
		switch {
		case r.alias != "" && r.alias != r.name:
			t.Errorf("%s: %s is set to %s: an alias keeps its name", r.where, r.name, r.alias)
		case r.alias == "" && r.value != want:
			t.Errorf("%s: %s = %q: rename the constant to Reason%s, or its value to %q", r.where, r.name, r.value, r.value, want)
		}
	}
}

// documented are the reasons of docs/troubleshooting.md: the first cell of
// a table row, in backquotes.
var documented = regexp.MustCompile("(?m)^\\| `([A-Za-z0-9]+)` \\|")

func TestTroubleshootingListsEveryReasonAndNoOther(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	inDoc := map[string]bool{}
	for _, m := range documented.FindAllStringSubmatch(string(doc), -1) {
		inDoc[m[1]] = true
	}
	inCode := map[string]string{}
	for _, r := range reasonConstants(t, dirs...) {
		if r.value != "" {
			inCode[r.value] = r.where + ": " + r.name
		}
	}
	var missing, stale []string
	for v, where := range inCode {
		if !inDoc[v] {
			missing = append(missing, v+" ("+where+")")
		}
	}
	for v := range inDoc {
		if _, ok := inCode[v]; !ok {
			stale = append(stale, v)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("docs/troubleshooting.md lacks %d reasons the operator sets; add a row for each:\n  %s",
			len(missing), strings.Join(missing, "\n  "))
	}
	if len(stale) > 0 {
		t.Errorf("docs/troubleshooting.md lists reasons no constant holds any more: %s", strings.Join(stale, ", "))
	}
}
