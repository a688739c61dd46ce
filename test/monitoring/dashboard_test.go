package monitoring_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/test/testbin"
)

// exportedNames are the operator's metric families, with the series names
// a histogram adds.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{}
	for _, d := range controllers.ExportedMetrics() {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			out[m[1]+suffix] = true
		}
	}
	return out
}

// metricName finds metric names in an expression: our prefix, or any
// identifier directly followed by a selector's brace.
var metricName = regexp.MustCompile(`\b(openbao_[a-z0-9_]+|[a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{`)

// openbaoSeries are OpenBao's own series (prefix vault_ in 2.4), scraped
// from the servers' metrics listener. The dashboard may use them;
// test/openbao checks each one it names against a real server's scrape.
var openbaoSeries = regexp.MustCompile(`^vault_[a-zA-Z0-9_]+$`)

// foreignSeries lists the series an expression uses that the operator
// does not export (nor OpenBao, with openbao).
func foreignSeries(expr string, exported map[string]bool, openbao bool) []string {
	var out []string
	for _, m := range metricName.FindAllStringSubmatch(expr, -1) {
		if !exported[m[1]] && !(openbao && openbaoSeries.MatchString(m[1])) {
			out = append(out, m[1])
		}
	}
	for _, m := range regexp.MustCompile(`\bopenbao_[a-z0-9_]+`).FindAllString(expr, -1) {
		if !exported[m] {
			out = append(out, m)
		}
	}
	return out
}

type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboardQueriesParseAndUseOnlyTheOperatorsSeries has promtool parse
// every query of the dashboard (as recording rules, with the template
// variables filled in) and checks that each names only series the
// operator exports, or OpenBao's own selected by this cluster's job.
func TestDashboardQueriesParseAndUseOnlyTheOperatorsSeries(t *testing.T) {
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "grafana", "openbao-operator-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("the dashboard is no JSON: %v", err)
	}
	exported := exportedNames(t)
	fill := strings.NewReplacer("$namespace", "team-a", "$name", "tuned")
	var rules []map[string]string
	for i, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for j, target := range p.Targets {
			if foreign := foreignSeries(target.Expr, exported, true); len(foreign) > 0 || !strings.Contains(target.Expr, "openbao_") && !strings.Contains(target.Expr, "vault_") {
				t.Errorf("panel %q query %q uses series neither the operator nor OpenBao exports: %v", p.Title, target.Expr, foreign)
			}
			// OpenBao's series carry the scrape's labels: the headless
			// Service names the job (the ServiceMonitor selects it).
			if strings.Contains(target.Expr, "vault_") && strings.Count(target.Expr, `job="$name-internal"`) != strings.Count(target.Expr, "vault_") {
				t.Errorf("panel %q query %q: each OpenBao series needs job=\"$name-internal\" to select this cluster", p.Title, target.Expr)
			}
			rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:panel%d:query%d", i, j), "expr": fill.Replace(target.Expr)})
		}
	}
	dir := t.TempDir()
	writeYAML(t, filepath.Join(dir, "dashboard.yaml"), map[string]any{
		"groups": []map[string]any{{"name": "dashboard", "rules": rules}},
	})
	runPromtool(t, dir, "check", "rules", "dashboard.yaml")
}

// TestAlertRulesUseOnlyTheOperatorsSeries keeps the alerts on series the
// operator exports: a renamed metric would silence an alert for good.
func TestAlertRulesUseOnlyTheOperatorsSeries(t *testing.T) {
	spec := renderedRules(t)
	exported := exportedNames(t)
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(raw, &parsed); err != nil {
		t.Fatal(err)
	}
	for _, g := range parsed.Groups {
		for _, r := range g.Rules {
			if foreign := foreignSeries(r.Expr, exported, false); len(foreign) > 0 {
				t.Errorf("alert %s uses series the operator does not export: %v", r.Alert, foreign)
			}
		}
	}
}
