package open

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openbao/operator/internal/objectstore"
)

// TestTheOperatorNeverOpensAStoreWithItsOwnIdentity: whatever the
// configuration it is handed says, OperatorStore opens no S3 or GCS store
// without credentials of the store's own, though the process holds an
// identity in its environment.
func TestTheOperatorNeverOpensAStoreWithItsOwnIdentity(t *testing.T) {
	adc := filepath.Join(t.TempDir(), "adc.json")
	if err := os.WriteFile(adc, []byte(`{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", adc)
	t.Setenv("AWS_ACCESS_KEY_ID", "ENV-AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "ENV-SECRET")
	for _, provider := range []string{objectstore.ProviderS3, objectstore.ProviderGCS, objectstore.ProviderAzure} {
		cfg := objectstore.Config{Provider: provider, Endpoint: "https://store.example.com", Bucket: "bkt", AmbientIdentity: true}
		if _, err := OperatorStore(context.Background(), cfg); !errors.Is(err, objectstore.ErrNoCredentials) {
			t.Errorf("%s: %v, want ErrNoCredentials", provider, err)
		}
		if _, err := Store(context.Background(), cfg); provider != objectstore.ProviderAzure && err != nil {
			t.Errorf("%s: the executor's Store with the switch: %v", provider, err)
		}
	}
}

// ambientAllowed are the only files that may name Config.AmbientIdentity:
// its definition, the stores that read it, OperatorStore, which clears it,
// and the executor, which sets it in the cluster's Job. Any other file
// naming it (a controller, the operator's main) would let a tenant's spec
// reach a store with the operator's identity.
var ambientAllowed = map[string]bool{
	"internal/objectstore/config.go":                true,
	"internal/objectstore/s3store/s3store.go":       true,
	"internal/objectstore/gcsstore/gcsstore.go":     true,
	"internal/objectstore/azurestore/azurestore.go": true,
	"internal/executor/prepare.go":                  true,
}

// TestOnlyTheExecutorSetsTheAmbientIdentitySwitch scans every non-test Go
// file of the module for the identifier AmbientIdentity.
func TestOnlyTheExecutorSetsTheAmbientIdentitySwitch(t *testing.T) {
	root := moduleRoot(t)
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "vendor" || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if namesAmbient(t, path) {
			seen[rel] = true
			if !ambientAllowed[rel] {
				t.Errorf("%s names AmbientIdentity: only the executor may set it, and the operator must open stores with open.OperatorStore", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"internal/executor/prepare.go", "internal/objectstore/s3store/s3store.go", "internal/objectstore/gcsstore/gcsstore.go"} {
		if !seen[must] {
			t.Errorf("%s no longer names AmbientIdentity: the scan is looking in the wrong place", must)
		}
	}
}

func namesAmbient(t *testing.T, path string) bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && id.Name == "AmbientIdentity" {
			found = true
		}
		return !found
	})
	return found
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}
