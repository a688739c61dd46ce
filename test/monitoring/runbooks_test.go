package monitoring_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/test/testbin"
)

// operatorNamespace is where the install chart is rendered.
const operatorNamespace = "openbao-operator-system"

// defaultRunbooks is both charts' default serviceMonitor.alerts.runbookBaseURL.
const defaultRunbooks = "https://github.com/openbao/operator/blob/main/docs/runbooks"

// operatorRules renders the install chart from disk with its ServiceMonitor
// on and returns its PrometheusRule's spec; nil when it renders none.
func operatorRules(t *testing.T, values map[string]any) map[string]any {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c, err := loader.LoadDir(filepath.Join(root, "helm-charts", "openbao-operator"))
	if err != nil {
		t.Fatal(err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = render.KubeVersion
	vals, err := chartutil.ToRenderValues(c, values,
		chartutil.ReleaseOptions{Name: "openbao-operator", Namespace: operatorNamespace, IsInstall: true}, caps)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Engine{Strict: true}.Render(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if filepath.Ext(name) != ".yaml" {
			continue // NOTES.txt
		}
		for _, doc := range strings.Split(text, "\n---") {
			var obj struct {
				Kind string         `json:"kind"`
				Spec map[string]any `json:"spec"`
			}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
			}
			if obj.Kind == "PrometheusRule" {
				return obj.Spec
			}
		}
	}
	return nil
}

var monitoringOn = map[string]any{"serviceMonitor": map[string]any{"enabled": true}}

// TestEveryAlertLinksARunbookPageAndEveryPageAnAlert renders the rules of
// both charts and holds them and docs/runbooks to each other: each alert's
// runbook_url is <base>/<AlertName>.md and that page exists; each page
// (but the index) belongs to an alert that a chart renders.
func TestEveryAlertLinksARunbookPageAndEveryPageAnAlert(t *testing.T) {
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	byName := alertRules(t, renderedRules(t))
	for name, rules := range alertRules(t, operatorRules(t, monitoringOn)) {
		byName[name] = append(byName[name], rules...)
	}
	if len(byName["OpenBaoOperatorDown"]) == 0 {
		t.Error("the install chart renders no OpenBaoOperatorDown alert")
	}
	dir := filepath.Join(root, "docs", "runbooks")
	for name, rules := range byName {
		for _, r := range rules {
			if want := defaultRunbooks + "/" + name + ".md"; r.Annotations["runbook_url"] != want {
				t.Errorf("alert %s: runbook_url %q, want %q", name, r.Annotations["runbook_url"], want)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, name+".md")); err != nil {
			t.Errorf("alert %s has no runbook page: %v", name, err)
		}
	}
	pages, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(pages)
	for _, p := range pages {
		name := strings.TrimSuffix(filepath.Base(p), ".md")
		if name != "README" && len(byName[name]) == 0 {
			t.Errorf("runbook page %s belongs to no rendered alert", filepath.Base(p))
		}
	}
}

// TestRunbookBaseURLIsAValueOfBothCharts moves the links elsewhere, for a
// site that mirrors the docs.
func TestRunbookBaseURLIsAValueOfBothCharts(t *testing.T) {
	mirror := "https://docs.example.com/openbao/runbooks/"
	rules := alertRules(t, operatorRules(t, map[string]any{"serviceMonitor": map[string]any{
		"enabled": true, "alerts": map[string]any{"runbookBaseURL": mirror}}}))
	if got := rules["OpenBaoOperatorDown"][0].Annotations["runbook_url"]; got != mirror+"OpenBaoOperatorDown.md" {
		t.Errorf("install chart: runbook_url %q", got)
	}
	cluster := alertRules(t, renderedRulesWith(t, map[string]any{"runbookBaseURL": mirror}))
	if got := cluster["OpenBaoServerSealed"][0].Annotations["runbook_url"]; got != mirror+"OpenBaoServerSealed.md" {
		t.Errorf("cluster chart: runbook_url %q", got)
	}
}

// TestTheOperatorDownAlertFiresAfterItsHoldAndResolves runs promtool on the
// install chart's rule: the alert fires once the operator's target has
// been down (up 0) or gone (no series) for its 5 minutes, resolves when
// one replica answers, is not silenced by another installation's operator
// answering, and stays quiet while one of two replicas is up.
func TestTheOperatorDownAlertFiresAfterItsHoldAndResolves(t *testing.T) {
	spec := operatorRules(t, monitoringOn)
	if spec == nil {
		t.Fatal("the install chart rendered no PrometheusRule with serviceMonitor enabled")
	}
	r := alertRules(t, spec)["OpenBaoOperatorDown"]
	if len(r) != 1 {
		t.Fatalf("want one OpenBaoOperatorDown rule, got %d", len(r))
	}
	dir := t.TempDir()
	writeYAML(t, filepath.Join(dir, "rules.yaml"), spec)
	runPromtool(t, dir, "check", "rules", "rules.yaml")
	job := `up{job="openbao-operator-metrics",namespace="` + operatorNamespace + `"`
	// absent() of a comparison carries no label of its own: the rule names
	// the installation's namespace, for routing as the clusters' alerts are.
	firing := []map[string]any{{"exp_labels": map[string]string{"severity": "critical", "namespace": operatorNamespace},
		"exp_annotations": r[0].Annotations}}
	at := func(evalTime string, exp []map[string]any) map[string]any {
		return map[string]any{"eval_time": evalTime, "alertname": "OpenBaoOperatorDown", "exp_alerts": exp}
	}
	none := []map[string]any{}
	tests := []map[string]any{
		// Up for 10m, down (up 0) from 10m to 30m, up again from 30m.
		{"interval": "1m", "input_series": []map[string]string{
			{"series": job + `,instance="a"}`, "values": "1x9 0x20 1x20"},
			{"series": `up{job="openbao-operator-metrics",namespace="elsewhere",instance="b"}`, "values": "1x50"},
		}, "alert_rule_test": []map[string]any{
			at("9m", none), at("14m", none), at("16m", firing), at("29m", firing), at("31m", none),
		}},
		// The target vanishes at 10m (no ready pod behind the Service).
		{"interval": "1m", "input_series": []map[string]string{
			{"series": job + `,instance="a"}`, "values": "1x9"},
		}, "alert_rule_test": []map[string]any{at("13m", none), at("21m", firing)}},
		// One of two replicas down: the other still answers.
		{"interval": "1m", "input_series": []map[string]string{
			{"series": job + `,instance="a"}`, "values": "0x30"},
			{"series": job + `,instance="b"}`, "values": "1x30"},
		}, "alert_rule_test": []map[string]any{at("20m", none)}},
	}
	writeYAML(t, filepath.Join(dir, "tests.yaml"), map[string]any{
		"rule_files": []string{"rules.yaml"}, "evaluation_interval": "1m", "tests": tests,
	})
	runPromtool(t, dir, "test", "rules", "tests.yaml")
}

// TestTheOperatorDownAlertNeedsTheMetricsService: without the Service the
// ServiceMonitor has no target, and the alert would fire for good, so the
// chart refuses a ServiceMonitor without it.
func TestTheOperatorDownAlertNeedsTheMetricsService(t *testing.T) {
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c, err := loader.LoadDir(filepath.Join(root, "helm-charts", "openbao-operator"))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(c, map[string]any{"serviceMonitor": map[string]any{"enabled": true},
		"metrics": map[string]any{"service": map[string]any{"enabled": false}}},
		chartutil.ReleaseOptions{Name: "openbao-operator", Namespace: operatorNamespace, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	_, err = engine.Engine{Strict: true}.Render(c, vals)
	if err == nil || !strings.Contains(err.Error(), "metrics.service.enabled") {
		t.Errorf("serviceMonitor.enabled without metrics.service: %v, want a refusal naming metrics.service.enabled", err)
	}
}

// TestTheKustomizeRuleIsTheChartsRule: config/prometheus, which scrapes the
// operator for kustomize installations, carries the same OpenBaoOperatorDown.
func TestTheKustomizeRuleIsTheChartsRule(t *testing.T) {
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kustomized struct {
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &kustomized); err != nil {
		t.Fatal(err)
	}
	want, err := yaml.Marshal(operatorRules(t, monitoringOn))
	if err != nil {
		t.Fatal(err)
	}
	got, err := yaml.Marshal(kustomized.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("config/prometheus/rules.yaml differs from the install chart's rule:\n%s\nwant:\n%s", got, want)
	}
}
