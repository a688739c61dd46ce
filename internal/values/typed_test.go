package values_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/values"
)

func withPDB(p v1alpha1.PodDisruptionBudgetSpec) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) { c.Spec.PodDisruptionBudget = &p }
}

func withMonitoring(m v1alpha1.MonitoringSpec) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) { c.Spec.Monitoring = &m }
}

func withPullSecrets(names ...string) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) {
		for _, n := range names {
			c.Spec.ImagePullSecrets = append(c.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: n})
		}
	}
}

// TestTypedFieldsBecomeTheChartValuesTheyStandFor: the typed fields set
// the same chart values a spec.values would, in the same JSON shapes, and
// what they leave unset is left to the chart's values.yaml.
func TestTypedFieldsBecomeTheChartValuesTheyStandFor(t *testing.T) {
	scraper := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}
	cases := map[string]struct {
		opt  func(*v1alpha1.OpenBaoCluster)
		path string
		want any
	}{
		"imagePullSecrets become the chart's list of names": {
			opt: withPullSecrets("regcred"), path: "imagePullSecrets",
			want: []any{map[string]any{"name": "regcred"}},
		},
		"a PDB count": {
			opt:  withPDB(v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}),
			path: "podDisruptionBudget.maxUnavailable", want: float64(1),
		},
		"a PDB percentage": {
			opt:  withPDB(v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("20%"))}),
			path: "podDisruptionBudget.maxUnavailable", want: "20%",
		},
		"a disabled PDB": {
			opt: withPDB(v1alpha1.PodDisruptionBudgetSpec{Enabled: ptr.To(false)}), path: "podDisruptionBudget.enabled", want: false,
		},
		"a PDB without enabled leaves it to the chart (true)": {
			opt: withPDB(v1alpha1.PodDisruptionBudgetSpec{}), path: "podDisruptionBudget.enabled", want: nil,
		},
		"serviceMonitor.enabled": {
			opt:  withMonitoring(v1alpha1.MonitoringSpec{ServiceMonitor: v1alpha1.ServiceMonitorSpec{Enabled: true}}),
			path: "serviceMonitor.enabled", want: true,
		},
		"serviceMonitor.interval": {
			opt:  withMonitoring(v1alpha1.MonitoringSpec{ServiceMonitor: v1alpha1.ServiceMonitorSpec{Enabled: true, Interval: "1m"}}),
			path: "serviceMonitor.interval", want: "1m",
		},
		"no interval leaves it to the chart (30s)": {
			opt:  withMonitoring(v1alpha1.MonitoringSpec{ServiceMonitor: v1alpha1.ServiceMonitorSpec{Enabled: true}}),
			path: "serviceMonitor.interval", want: nil,
		},
		"serviceMonitor.labels": {
			opt: withMonitoring(v1alpha1.MonitoringSpec{ServiceMonitor: v1alpha1.ServiceMonitorSpec{Enabled: true,
				Labels: map[string]string{"release": "kps"}}}),
			path: "serviceMonitor.labels", want: map[string]any{"release": "kps"},
		},
		"prometheusRule.enabled is the chart's alerts.enabled": {
			opt: withMonitoring(v1alpha1.MonitoringSpec{ServiceMonitor: v1alpha1.ServiceMonitorSpec{Enabled: true},
				PrometheusRule: v1alpha1.PrometheusRuleSpec{Enabled: ptr.To(false)}}),
			path: "serviceMonitor.alerts.enabled", want: false,
		},
		"no prometheusRule leaves the alerts to the chart (on)": {
			opt:  withMonitoring(v1alpha1.MonitoringSpec{ServiceMonitor: v1alpha1.ServiceMonitorSpec{Enabled: true}}),
			path: "serviceMonitor.alerts.enabled", want: nil,
		},
		"prometheusRule.backupMaxAgeSeconds": {
			opt: withMonitoring(v1alpha1.MonitoringSpec{ServiceMonitor: v1alpha1.ServiceMonitorSpec{Enabled: true},
				PrometheusRule: v1alpha1.PrometheusRuleSpec{BackupMaxAgeSeconds: ptr.To[int64](7200)}}),
			path: "serviceMonitor.alerts.backupMaxAgeSeconds", want: float64(7200),
		},
		"prometheusRule.runbookBaseURL": {
			opt: withMonitoring(v1alpha1.MonitoringSpec{ServiceMonitor: v1alpha1.ServiceMonitorSpec{Enabled: true},
				PrometheusRule: v1alpha1.PrometheusRuleSpec{RunbookBaseURL: "https://mirror.example/runbooks"}}),
			path: "serviceMonitor.alerts.runbookBaseURL", want: "https://mirror.example/runbooks",
		},
		"scrapers": {
			opt:  withMonitoring(v1alpha1.MonitoringSpec{ServiceMonitor: v1alpha1.ServiceMonitorSpec{Enabled: true}, Scrapers: []networkingv1.NetworkPolicyPeer{scraper}}),
			path: "serviceMonitor.scrapers",
			want: []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := values.Compute(inputOf(cluster(tc.opt)), values.Operator{}, values.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if v := lookup(got, tc.path); !reflect.DeepEqual(v, tc.want) {
				t.Errorf("%s = %#v, want %#v", tc.path, v, tc.want)
			}
		})
	}
}

// TestTypedMonitoringTurnsTheMetricsListenerOn: config.hcl's metrics
// listener follows spec.monitoring as it follows spec.values.
func TestTypedMonitoringTurnsTheMetricsListenerOn(t *testing.T) {
	on := cluster(withMonitoring(v1alpha1.MonitoringSpec{ServiceMonitor: v1alpha1.ServiceMonitorSpec{Enabled: true}}))
	off := cluster(withMonitoring(v1alpha1.MonitoringSpec{}))
	if !values.MetricsListener(on) || values.MetricsListener(off) {
		t.Errorf("MetricsListener(enabled) = %v, MetricsListener(disabled) = %v", values.MetricsListener(on), values.MetricsListener(off))
	}
	if !values.MetricsListener(cluster(withValues(`{"serviceMonitor": {"enabled": true}}`))) {
		t.Error("spec.values.serviceMonitor.enabled, the escape hatch, no longer turns the listener on")
	}
}

// TestATypedFieldAndItsValuesKeyTogetherAreRefused: one of them would win
// silently; the refusal names both.
func TestATypedFieldAndItsValuesKeyTogetherAreRefused(t *testing.T) {
	cases := map[string]struct {
		opt        func(*v1alpha1.OpenBaoCluster)
		values     string
		field, key string
	}{
		"imagePullSecrets": {withPullSecrets("a"), `{"imagePullSecrets": [{"name": "b"}]}`, "imagePullSecrets", "imagePullSecrets"},
		"podDisruptionBudget": {withPDB(v1alpha1.PodDisruptionBudgetSpec{}), `{"podDisruptionBudget": {"enabled": false}}`,
			"podDisruptionBudget", "podDisruptionBudget"},
		"monitoring": {withMonitoring(v1alpha1.MonitoringSpec{}), `{"serviceMonitor": {"interval": "1m"}}`, "monitoring", "serviceMonitor"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := cluster(tc.opt, withValues(tc.values))
			_, err := values.Compute(inputOf(c), values.Operator{}, values.Config{})
			var oe *values.TypedOverlapError
			if !errors.As(err, &oe) || oe.Field != tc.field || oe.Key != tc.key {
				t.Fatalf("Compute: %v, want the overlap of spec.%s and spec.values.%s", err, tc.field, tc.key)
			}
			if !strings.Contains(err.Error(), "spec."+tc.field) || !strings.Contains(err.Error(), "spec.values."+tc.key) {
				t.Errorf("the refusal does not name both fields: %v", err)
			}
			if _, err := values.Compute(inputOf(cluster(tc.opt)), values.Operator{}, values.Config{}); err != nil {
				t.Errorf("the typed field alone is refused: %v", err)
			}
			if _, err := values.Compute(inputOf(cluster(withValues(tc.values))), values.Operator{}, values.Config{}); err != nil {
				t.Errorf("spec.values alone, the escape hatch, is refused: %v", err)
			}
		})
	}
}

// TestATypedDisruptionBudgetThatCouldCostQuorumIsRefused: the quorum rule
// of spec.values.podDisruptionBudget holds on spec.podDisruptionBudget.
func TestATypedDisruptionBudgetThatCouldCostQuorumIsRefused(t *testing.T) {
	for _, tc := range []struct {
		max      intstr.IntOrString
		enabled  *bool
		replicas int32
		ok       bool
	}{
		{intstr.FromInt32(1), nil, 3, true},
		{intstr.FromInt32(2), nil, 3, false},
		{intstr.FromInt32(2), nil, 5, true},
		{intstr.FromString("50%"), nil, 3, false},
		{intstr.FromInt32(3), ptr.To(false), 3, true},
	} {
		c := cluster(withPDB(v1alpha1.PodDisruptionBudgetSpec{Enabled: tc.enabled, MaxUnavailable: &tc.max}),
			func(c *v1alpha1.OpenBaoCluster) { c.Spec.Replicas = tc.replicas })
		_, err := values.Compute(inputOf(c), values.Operator{}, values.Config{})
		var pdbErr *values.DisruptionBudgetError
		if tc.ok != (err == nil) || (!tc.ok && !errors.As(err, &pdbErr)) {
			t.Errorf("maxUnavailable %s with %d replicas: %v", tc.max.String(), tc.replicas, err)
		}
	}
}

// TestTypedPullSecretsAreThePullSecretNames: image verification reads the
// same names the chart gives the servers.
func TestTypedPullSecretsAreThePullSecretNames(t *testing.T) {
	got, err := values.PullSecretNames(cluster(withPullSecrets("a", "b")), values.Operator{})
	if err != nil || !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("PullSecretNames = %v, %v; want [a b]", got, err)
	}
}
