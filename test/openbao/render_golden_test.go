package openbao_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/openbao/operator/test/fixtures"
	"github.com/openbao/operator/test/testbin"
)

// TestEveryRenderedClusterConfigPassesOpenBaosOwnChecks holds the config.hcl
// of every sample and fixture cluster, as the operator renders it from the
// CR (internal/render's golden files), against OpenBao's own loader; with
// self-init, the self-init file is loaded beside it, as pod-0 does.
func TestEveryRenderedClusterConfigPassesOpenBaosOwnChecks(t *testing.T) {
	t.Parallel()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	configs, err := filepath.Glob(filepath.Join(root, "internal", "render", "testdata", "golden", "*", "config.hcl"))
	if want := len(fixtures.Files(t)); err != nil || len(configs) != want {
		t.Fatalf("want the config.hcl of each of the %d sample and fixture clusters, found %d (%v)", want, len(configs), err)
	}
	for _, config := range configs {
		dir := filepath.Dir(config)
		group := config
		if _, err := os.Stat(filepath.Join(dir, "self-init.hcl")); err == nil {
			group += "+" + filepath.Join(dir, "self-init.hcl")
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			if out, ok := runChecker(t, group); !ok {
				t.Errorf("OpenBao rejects the config rendered for %s:\n%s", filepath.Base(dir), out)
			}
			// The read replicas' config.hcl, where the cluster has them.
			read := filepath.Join(dir, "read-config.hcl")
			if _, err := os.Stat(read); err != nil {
				return
			}
			if out, ok := runChecker(t, read); !ok {
				t.Errorf("OpenBao rejects the read replicas' config rendered for %s:\n%s", filepath.Base(dir), out)
			}
		})
	}
}
