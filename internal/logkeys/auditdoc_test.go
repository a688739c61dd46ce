package logkeys

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestTheAuditTableListsEveryEventType: every event_type a log call of the
// operator writes is a row of docs/audit-log.md, and every row is one the
// code writes.
func TestTheAuditTableListsEveryEventType(t *testing.T) {
	root := filepath.Join("..", "..")
	inCode := map[string]string{}
	for _, dir := range []string{"controllers", "internal", "cmd"} {
		for typ, where := range eventTypes(t, filepath.Join(root, dir)) {
			inCode[typ] = where
		}
	}
	if len(inCode) < 20 {
		t.Fatalf("found only %d event types in the code: the scan is broken", len(inCode))
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "audit-log.md"))
	if err != nil {
		t.Fatal(err)
	}
	inDoc := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_.]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		inDoc[m[1]] = true
	}
	for typ, where := range inCode {
		if !inDoc[typ] {
			t.Errorf("event_type %s (%s) is not in docs/audit-log.md", typ, where)
		}
	}
	for typ := range inDoc {
		if _, ok := inCode[typ]; !ok && strings.Contains(typ, ".") {
			t.Errorf("docs/audit-log.md lists event_type %s, which no code writes", typ)
		}
	}
}

// eventTypes finds, in the non-test Go files under dir, every call argument
// list in which the string "event_type" is followed by a string literal.
func eventTypes(t *testing.T, dir string) map[string]string {
	t.Helper()
	found := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			for i, arg := range call.Args[:max(len(call.Args)-1, 0)] {
				if literal(arg) != "event_type" {
					continue
				}
				typ := literal(call.Args[i+1])
				if typ == "" {
					t.Errorf("%s: event_type is not a string literal", fset.Position(arg.Pos()))
					continue
				}
				found[typ] = fset.Position(arg.Pos()).String()
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func literal(e ast.Expr) string {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return ""
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		return ""
	}
	return s
}
