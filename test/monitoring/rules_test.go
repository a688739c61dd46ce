// Package monitoring_test checks the chart's PrometheusRule and the
// Grafana dashboard with promtool, which `make tools` unpacks from Debian's
// prometheus package (test/tools/build.sh, deb_recipes).
package monitoring_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/test/fixtures"
	"github.com/openbao/operator/test/testbin"
)

// The overrides fixture is the cluster team-a/tuned with serviceMonitor on.
const fixture = "overrides"

var self = `namespace="team-a",name="tuned"`

// renderedRules renders the fixture with backups on and returns the
// PrometheusRule's spec, which is a promtool rule file as it stands.
func renderedRules(t *testing.T) map[string]any {
	t.Helper()
	return renderedRulesWith(t, nil)
}

// renderedRulesWith is renderedRules with serviceMonitor.alerts values
// merged over the fixture's.
func renderedRulesWith(t *testing.T, alerts map[string]any) map[string]any {
	t.Helper()
	r, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	files := fixtures.Files(t)
	c := fixtures.Load(t, files[fixture])
	in := values.InputFor(c, &c.Status)
	cfg, err := values.ConfigFor(in)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := values.Compute(in, values.Operator{Namespace: "openbao-operator-system"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	vals["backup"] = map[string]any{"enabled": true}
	if alerts != nil {
		sm, _ := vals["serviceMonitor"].(map[string]any)
		if sm == nil {
			t.Fatal("the fixture's values hold no serviceMonitor")
		}
		sm["alerts"] = alerts
	}
	objs, err := r.Render(c.Namespace, c.Name, vals)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "PrometheusRule" {
			spec, _, _ := unstructured.NestedMap(o.Object, "spec")
			return spec
		}
	}
	t.Fatal("the chart rendered no PrometheusRule with serviceMonitor enabled")
	return nil
}

// rule is one alerting rule as rendered.
type rule struct {
	Alert       string            `json:"alert"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func alertRules(t *testing.T, spec map[string]any) map[string][]rule {
	t.Helper()
	raw, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Groups []struct {
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &parsed); err != nil {
		t.Fatal(err)
	}
	out := map[string][]rule{}
	for _, g := range parsed.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = append(out[r.Alert], r)
		}
	}
	return out
}

func promtool(t *testing.T) string {
	t.Helper()
	dir, err := testbin.Dir()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "promtool")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("promtool is missing (run `make tools`): %v", err)
	}
	return path
}

func runPromtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// alertCase is one promtool unit test: series in, which alerts fire at
// evalTime (by severity), for one alert name.
type alertCase struct {
	alert    string
	series   map[string]string // series selector -> promtool values notation
	evalTime string
	// firing are the severities expected to fire, with the labels each
	// firing alert carries besides its rule's.
	firing []map[string]string
}

var sameCluster = map[string]string{"namespace": "team-a", "name": "tuned"}

func cases() []alertCase {
	sel := func(metric string, extra ...string) string {
		return metric + "{" + strings.Join(append([]string{self}, extra...), ",") + "}"
	}
	other := `{namespace="team-b",name="tuned"}`
	return []alertCase{
		{"OpenBaoServerSealed", map[string]string{sel("openbao_cluster_sealed_replicas"): "1x20",
			"openbao_cluster_sealed_replicas" + other: "1x20"}, "10m", []map[string]string{sameCluster}},
		{"OpenBaoServerSealed", map[string]string{sel("openbao_cluster_sealed_replicas"): "0 0 1x20"}, "4m", nil},
		{"OpenBaoServersUnready", map[string]string{sel("openbao_cluster_ready_replicas"): "2x30",
			sel("openbao_cluster_desired_replicas"): "3x30"}, "20m", []map[string]string{sameCluster}},
		{"OpenBaoServersUnready", map[string]string{sel("openbao_cluster_ready_replicas"): "3x30",
			sel("openbao_cluster_desired_replicas"): "3x30"}, "20m", nil},
		{"OpenBaoQuorumLost", map[string]string{sel("openbao_cluster_ready_replicas"): "1x30",
			sel("openbao_cluster_desired_replicas"): "3x30"}, "10m", []map[string]string{sameCluster}},
		{"OpenBaoQuorumLost", map[string]string{sel("openbao_cluster_ready_replicas"): "2x30",
			sel("openbao_cluster_desired_replicas"): "3x30"}, "10m", nil},
		{"OpenBaoNoFailureTolerance", map[string]string{sel("openbao_cluster_raft_failure_tolerance"): "0x60",
			sel("openbao_cluster_desired_replicas"): "3x60"}, "40m", []map[string]string{sameCluster}},
		{"OpenBaoNoFailureTolerance", map[string]string{sel("openbao_cluster_raft_failure_tolerance"): "0x60",
			sel("openbao_cluster_desired_replicas"): "1x60"}, "40m", nil},
		{"OpenBaoRaftUnhealthy", map[string]string{sel("openbao_cluster_raft_healthy"): "0x60"}, "40m", []map[string]string{sameCluster}},
		// A sick read replica (non-voter) alone: autopilot's verdict is
		// unhealthy, no voter is; a sick voter beside it fires.
		{"OpenBaoRaftUnhealthy", map[string]string{sel("openbao_cluster_raft_healthy"): "0x60",
			sel("openbao_cluster_raft_unhealthy_servers", `voter="false"`): "1x60",
			sel("openbao_cluster_raft_unhealthy_servers", `voter="true"`):  "0x60"}, "40m", nil},
		{"OpenBaoRaftUnhealthy", map[string]string{sel("openbao_cluster_raft_healthy"): "0x60",
			sel("openbao_cluster_raft_unhealthy_servers", `voter="false"`): "1x60",
			sel("openbao_cluster_raft_unhealthy_servers", `voter="true"`):  "1x60"}, "40m", []map[string]string{sameCluster}},
		// A server certificate of a 24h rotation period issued at time 0:
		// expiry at 24h, renewal due at 16h (a third before expiry). Healthy
		// at 2h although it expires within 7 days; overdue by a quarter of
		// its 8h window at 18h (warning), half of it gone at 20h (critical).
		{"OpenBaoCertificateExpiresSoon", map[string]string{sel("openbao_tls_cert_expiry_timestamp", `type="server"`): "86400x1300",
			sel("openbao_tls_cert_renewal_due_timestamp", `type="server"`): "57600x1300"}, "2h", nil},
		{"OpenBaoCertificateExpiresSoon", map[string]string{sel("openbao_tls_cert_expiry_timestamp", `type="server"`): "86400x1300",
			sel("openbao_tls_cert_renewal_due_timestamp", `type="server"`): "57600x1300"}, "17h50m", nil},
		{"OpenBaoCertificateExpiresSoon", map[string]string{sel("openbao_tls_cert_expiry_timestamp", `type="server"`): "86400x1300",
			sel("openbao_tls_cert_renewal_due_timestamp", `type="server"`): "57600x1300"},
			"18h10m", []map[string]string{withLabels(sameCluster, "type", "server", "severity", "warning")}},
		{"OpenBaoCertificateExpiresSoon", map[string]string{sel("openbao_tls_cert_expiry_timestamp", `type="server"`): "86400x1300",
			sel("openbao_tls_cert_renewal_due_timestamp", `type="server"`): "57600x1300"},
			"20h10m", []map[string]string{withLabels(sameCluster, "type", "server", "severity", "warning"),
				withLabels(sameCluster, "type", "server", "severity", "critical")}},
		{"OpenBaoBackupMissing", map[string]string{sel("openbao_backup_last_success_timestamp"): "0x1700"}, "27h", []map[string]string{sameCluster}},
		{"OpenBaoBackupMissing", map[string]string{sel("openbao_backup_last_success_timestamp"): "0x1700"}, "20h", nil},
		{"OpenBaoBackupFailing", map[string]string{sel("openbao_backup_consecutive_failures"): "0 1 2x20"}, "10m", []map[string]string{sameCluster}},
		{"OpenBaoUpgradeHalted", map[string]string{sel("openbao_upgrade_status"): "2x20"}, "10m", []map[string]string{sameCluster}},
		{"OpenBaoUpgradeHalted", map[string]string{sel("openbao_upgrade_status"): "1x20"}, "10m", nil},
		{"OpenBaoUpgradeStuck", map[string]string{sel("openbao_upgrade_status"): "1x200"}, "150m", []map[string]string{sameCluster}},
		{"OpenBaoReconcileErrors", map[string]string{sel("openbao_reconcile_errors_total"): "0+1x60"}, "50m", []map[string]string{sameCluster}},
		{"OpenBaoReconcileErrors", map[string]string{sel("openbao_reconcile_errors_total"): "0+0x60"}, "50m", nil},
		{"OpenBaoClusterDegraded", map[string]string{sel("openbao_cluster_phase", `phase="Degraded"`): "1x30",
			sel("openbao_cluster_phase", `phase="Running"`): "0x30"}, "20m", []map[string]string{withLabels(sameCluster, "phase", "Degraded")}},
	}
}

func withLabels(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// TestAlertRulesFireWhenAPersonMustAct runs promtool's rule unit tests
// against the rendered rules: each alert fires on the series that call
// for it, after its hold time, for this cluster only, and stays quiet
// otherwise. Every alert has a case and a runbook.
func TestAlertRulesFireWhenAPersonMustAct(t *testing.T) {
	spec := renderedRules(t)
	byName := alertRules(t, spec)
	dir := t.TempDir()
	writeYAML(t, filepath.Join(dir, "rules.yaml"), spec)
	runPromtool(t, dir, "check", "rules", "rules.yaml")
	tested := map[string]bool{}
	var tests []map[string]any
	for _, c := range cases() {
		tested[c.alert] = true
		tests = append(tests, promtoolTest(t, c, byName[c.alert]))
	}
	for name, rules := range byName {
		if !tested[name] {
			t.Errorf("alert %s has no test case", name)
		}
		for _, r := range rules {
			if r.Annotations["runbook"] == "" || r.Annotations["runbook_url"] == "" || r.Labels["severity"] == "" {
				t.Errorf("alert %s lacks a runbook or runbook_url annotation or a severity", name)
			}
		}
	}
	writeYAML(t, filepath.Join(dir, "tests.yaml"), map[string]any{
		"rule_files": []string{"rules.yaml"}, "evaluation_interval": "1m", "tests": tests,
	})
	runPromtool(t, dir, "test", "rules", "tests.yaml")
}

// promtoolTest turns a case into promtool's format; the expected alerts
// carry their rule's own labels and annotations, as promtool compares them.
func promtoolTest(t *testing.T, c alertCase, rules []rule) map[string]any {
	t.Helper()
	if len(rules) == 0 {
		t.Fatalf("no rendered alert %s", c.alert)
	}
	var series []map[string]string
	for s, v := range c.series {
		series = append(series, map[string]string{"series": s, "values": v})
	}
	expected := []map[string]any{}
	for _, labels := range c.firing {
		r := rules[0]
		for _, candidate := range rules {
			if sev, ok := labels["severity"]; ok && candidate.Labels["severity"] == sev {
				r = candidate
			}
		}
		expected = append(expected, map[string]any{
			"exp_labels": withLabels(labels, "severity", r.Labels["severity"]), "exp_annotations": r.Annotations,
		})
	}
	return map[string]any{"interval": "1m", "input_series": series, "alert_rule_test": []map[string]any{
		{"eval_time": c.evalTime, "alertname": c.alert, "exp_alerts": expected},
	}}
}

func writeYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}
