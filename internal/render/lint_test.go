package render_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"

	helmcharts "github.com/openbao/operator/helm-charts"
	"github.com/openbao/operator/internal/render"
)

// chartDir copies the embedded chart, the one the operator renders, into a
// temporary directory for helm lint.
func chartDir(t *testing.T) string {
	t.Helper()
	sub, err := fs.Sub(helmcharts.OpenBaoCluster, helmcharts.OpenBaoClusterDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), helmcharts.OpenBaoClusterDir)
	if err := os.CopyFS(dir, sub); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "templates", "_helpers.tpl")); err != nil {
		t.Fatalf("the copy lacks _helpers.tpl: %v", err)
	}
	return dir
}

func TestHelmLint(t *testing.T) {
	dir := chartDir(t)
	cases := map[string]func(t *testing.T) map[string]any{
		"with the chart defaults": func(*testing.T) map[string]any { return nil },
		"with the values of the sample": func(t *testing.T) map[string]any {
			return valuesWith(t, fixture(t, sample), testOperator)
		},
		"with the values of the overrides fixture": func(t *testing.T) map[string]any {
			return valuesWith(t, fixture(t, "overrides"), testOperator)
		},
	}
	for name, vals := range cases {
		t.Run(name, func(t *testing.T) {
			linter := lint.AllWithKubeVersion(dir, vals(t), "openbao-test", &render.KubeVersion)
			var warnings []string
			for _, m := range linter.Messages {
				t.Logf("%s", m)
				switch {
				case m.Severity >= support.ErrorSev:
					t.Errorf("helm lint: %s", m)
				case m.Severity == support.WarningSev:
					warnings = append(warnings, m.Path)
				}
			}
			if len(warnings) == 0 {
				return
			}
			t.Errorf("helm lint warned in %v", warnings)
		})
	}
}
