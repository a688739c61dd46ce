package render_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/test/fixtures"
)

func TestRenderIsDeterministic(t *testing.T) {
	files := fixtures.Files(t)
	for _, name := range fixtures.Names(files) {
		t.Run(name, func(t *testing.T) {
			c := fixtures.Load(t, files[name])
			_, vals, first := renderFixture(t, newRenderer(t), c)
			cached := newRenderer(t)
			second, err := cached.Render(c.Namespace, c.Name, vals)
			if err != nil {
				t.Fatal(err)
			}
			third, err := cached.Render(c.Namespace, c.Name, vals) // from the cache
			if err != nil {
				t.Fatal(err)
			}
			a, b, cc := manifests(t, first), manifests(t, second), manifests(t, third)
			if !bytes.Equal(a, b) {
				t.Error("two fresh renderers render different YAML")
			}
			if !bytes.Equal(b, cc) {
				t.Error("a cached render differs from the first")
			}
		})
	}
}

func TestRenderCacheReturnsCopies(t *testing.T) {
	r := newRenderer(t)
	c := fixture(t, sample)
	_, vals, first := renderFixture(t, r, c)
	want := string(manifests(t, first))
	first[0].SetName("mutated")
	first[0].Object["spec"] = "mutated"
	sts := find(first, "StatefulSet")[0]
	sts.SetLabels(map[string]string{"mutated": "true"})
	second, err := r.Render(c.Namespace, c.Name, vals)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(manifests(t, second)); got != want {
		t.Error("mutating a returned object changed the next render")
	}
	second[0].SetName("again")
	third, _ := r.Render(c.Namespace, c.Name, vals)
	if third[0].GetName() == "again" {
		t.Error("a cache hit returned the cached objects themselves")
	}
}

func TestRenderDoesNotChangeTheValues(t *testing.T) {
	r := newRenderer(t)
	c := fixture(t, "overrides")
	vals := valuesWith(t, c, testOperator)
	before := string(mustYAML(t, vals))
	if _, err := r.Render(c.Namespace, c.Name, vals); err != nil {
		t.Fatal(err)
	}
	if after := string(mustYAML(t, vals)); after != before {
		t.Error("Render changed the values it was given")
	}
}

func TestReplicasWaitForInitialization(t *testing.T) {
	cases := map[string]struct {
		replicas    int32
		initialized bool
		want        int32
	}{
		"before initialization 3 requested run 1": {replicas: 3, want: 1},
		"before initialization 5 requested run 1": {replicas: 5, want: 1},
		"after initialization 3 requested run 3":  {replicas: 3, initialized: true, want: 3},
		"after initialization 5 requested run 5":  {replicas: 5, initialized: true, want: 5},
	}
	r := newRenderer(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fixture(t, sample, func(c *v1alpha1.OpenBaoCluster) {
				c.Spec.Replicas = tc.replicas
				c.Status.Initialized = tc.initialized
			})
			sts := statefulSet(t, renderWith(t, r, c, testOperator))
			if sts.Spec.Replicas == nil || *sts.Spec.Replicas != tc.want {
				t.Errorf("StatefulSet replicas %v, want %d", sts.Spec.Replicas, tc.want)
			}
		})
	}
}

// TestSelfInitStaysOutOfTheConfigMap: self-init requests may carry
// credentials, so the operator keeps them in a Secret of its own; the pod
// template projects it, optionally, next to config.hcl, the same before and
// after initialization so that initializing rolls no pod.
func TestSelfInitStaysOutOfTheConfigMap(t *testing.T) {
	r := newRenderer(t)
	templates := map[bool]string{}
	for _, initialized := range []bool{false, true} {
		c := fixture(t, "selfinit", func(c *v1alpha1.OpenBaoCluster) { c.Status.Initialized = initialized })
		objs := renderWith(t, r, c, testOperator)
		var cm corev1.ConfigMap
		typed(t, objs, "ConfigMap", &cm)
		if _, ok := cm.Data["config.hcl"]; !ok {
			t.Error("ConfigMap lacks config.hcl")
		}
		if _, ok := cm.Data[values.SelfInitFile]; ok {
			t.Errorf("initialized=%v: the ConfigMap carries %s", initialized, values.SelfInitFile)
		}
		var sts appsv1.StatefulSet
		typed(t, objs, "StatefulSet", &sts)
		if !projectsOptionalSecret(sts.Spec.Template.Spec.Volumes, c.SelfInitSecretName()) {
			t.Errorf("initialized=%v: the config volume does not project Secret %s optionally", initialized, c.SelfInitSecretName())
		}
		tmpl, _ := json.Marshal(sts.Spec.Template)
		templates[initialized] = string(tmpl)
	}
	if templates[false] != templates[true] {
		t.Error("the pod template changes at initialization: every pod would roll")
	}
}

func projectsOptionalSecret(volumes []corev1.Volume, name string) bool {
	for _, v := range volumes {
		if v.Name != "config" || v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.Secret != nil && src.Secret.Name == name && src.Secret.Optional != nil && *src.Secret.Optional {
				return true
			}
		}
	}
	return false
}

func TestNetworkPolicy(t *testing.T) {
	r := newRenderer(t)
	t.Run("networkPolicy.enabled=false renders none", func(t *testing.T) {
		off := false
		c := fixture(t, sample, func(c *v1alpha1.OpenBaoCluster) { c.Spec.NetworkPolicy.Enabled = &off })
		if n := len(find(renderWith(t, r, c, testOperator), "NetworkPolicy")); n != 0 {
			t.Errorf("rendered %d NetworkPolicies", n)
		}
	})
	initialized := func(c *v1alpha1.OpenBaoCluster) { c.Status.Initialized = true }
	// overrides has its ServiceMonitor on, hence the metrics port 8204,
	// which answers sys/init like the API port.
	apiPorts := map[string][]int{sample: {8200}, "overrides": {8200, 8204}, "tls_acme": {8200, 8202}}
	for _, name := range []string{sample, "overrides", "tls_acme"} {
		t.Run("until initialized only the operator reaches the API ports: "+name, func(t *testing.T) {
			var np networkingv1.NetworkPolicy
			typed(t, renderWith(t, r, fixture(t, name), testOperator), "NetworkPolicy", &np)
			want := map[string]string{"kubernetes.io/metadata.name": testOperator.Namespace}
			for _, port := range apiPorts[name] {
				from := ruleFor(t, &np, port).From
				if len(from) != 1 || from[0].NamespaceSelector == nil || !equalLabels(from[0].NamespaceSelector.MatchLabels, want) || from[0].PodSelector != nil {
					t.Errorf("port %d from %+v, want the operator's namespace only", port, from)
				}
			}
		})
	}
	t.Run("without apiClients port 8200 admits every source", func(t *testing.T) {
		var np networkingv1.NetworkPolicy
		typed(t, renderWith(t, r, fixture(t, sample, initialized), testOperator), "NetworkPolicy", &np)
		if from := ruleFor(t, &np, 8200).From; len(from) != 0 {
			t.Errorf("port 8200 from %v, want every source", from)
		}
		checkClusterPortIsPrivate(t, &np, "openbao")
	})
	t.Run("apiClients restrict port 8200 and keep the cluster's pods and the operator", func(t *testing.T) {
		var np networkingv1.NetworkPolicy
		typed(t, renderWith(t, r, fixture(t, "overrides", initialized), testOperator), "NetworkPolicy", &np)
		from := ruleFor(t, &np, 8200).From
		if len(from) != 3 {
			t.Fatalf("port 8200 admits %d peers, want the client, the cluster's pods, the operator: %+v", len(from), from)
		}
		if got := from[0].NamespaceSelector; got == nil || got.MatchLabels["team"] != "a" {
			t.Errorf("first peer %+v, want the listed namespaceSelector team=a", from[0])
		}
		if !selectsCluster(from[1].PodSelector, "tuned") || from[1].NamespaceSelector != nil {
			t.Errorf("second peer %+v, want the cluster's own pods", from[1])
		}
		want := map[string]string{"kubernetes.io/metadata.name": testOperator.Namespace}
		if got := from[2].NamespaceSelector; got == nil || !equalLabels(got.MatchLabels, want) || from[2].PodSelector != nil {
			t.Errorf("third peer %+v, want the operator namespace", from[2])
		}
		checkClusterPortIsPrivate(t, &np, "tuned")
	})
	t.Run("without scrapers the metrics port admits whom port 8200 admits", func(t *testing.T) {
		var np networkingv1.NetworkPolicy
		typed(t, renderWith(t, r, fixture(t, "overrides", initialized), testOperator), "NetworkPolicy", &np)
		if api, metrics := ruleFor(t, &np, 8200).From, ruleFor(t, &np, 8204).From; !reflect.DeepEqual(api, metrics) {
			t.Errorf("port 8204 from %+v, want port 8200's %+v", metrics, api)
		}
	})
	want := map[string]string{"kubernetes.io/metadata.name": "monitoring"}
	for name, c := range map[string]*v1alpha1.OpenBaoCluster{
		"scrapers alone reach the metrics port": fixture(t, "overrides", initialized, func(c *v1alpha1.OpenBaoCluster) {
			c.Spec.Monitoring.Scrapers = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: want}}}
		}),
		"scrapers in the spec.values escape hatch alone reach the metrics port": fixture(t, sample, initialized, func(c *v1alpha1.OpenBaoCluster) {
			c.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"serviceMonitor":{"enabled":true,` +
				`"scrapers":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]}}`)}
		}),
	} {
		t.Run(name, func(t *testing.T) {
			var np networkingv1.NetworkPolicy
			typed(t, renderWith(t, r, c, testOperator), "NetworkPolicy", &np)
			from := ruleFor(t, &np, 8204).From
			if len(from) != 1 || from[0].NamespaceSelector == nil || !equalLabels(from[0].NamespaceSelector.MatchLabels, want) || from[0].PodSelector != nil {
				t.Errorf("port 8204 from %+v, want the monitoring namespace only", from)
			}
		})
	}
	t.Run("without a ServiceMonitor there is no metrics port", func(t *testing.T) {
		var np networkingv1.NetworkPolicy
		typed(t, renderWith(t, r, fixture(t, sample, initialized), testOperator), "NetworkPolicy", &np)
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				if p.Port != nil && p.Port.IntValue() == 8204 {
					t.Errorf("port 8204 is open without a ServiceMonitor: %+v", rule)
				}
			}
		}
	})
}

func ruleFor(t *testing.T, np *networkingv1.NetworkPolicy, port int) networkingv1.NetworkPolicyIngressRule {
	t.Helper()
	var found []networkingv1.NetworkPolicyIngressRule
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port != nil && p.Port.IntValue() == port {
				found = append(found, rule)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d ingress rules for port %d, want 1", len(found), port)
	}
	if len(found[0].Ports) != 1 {
		t.Fatalf("the rule for port %d also opens %v", port, found[0].Ports)
	}
	return found[0]
}

// checkClusterPortIsPrivate: port 8201 (Raft) admits only the cluster's pods.
func checkClusterPortIsPrivate(t *testing.T, np *networkingv1.NetworkPolicy, cluster string) {
	t.Helper()
	from := ruleFor(t, np, 8201).From
	if len(from) != 1 || !selectsCluster(from[0].PodSelector, cluster) || from[0].NamespaceSelector != nil || from[0].IPBlock != nil {
		t.Errorf("port 8201 from %+v, want only the pods of %s", from, cluster)
	}
	if !selectsCluster(&np.Spec.PodSelector, cluster) {
		t.Errorf("policy selects %+v, want the pods of %s", np.Spec.PodSelector, cluster)
	}
}

func selectsCluster(sel *metav1.LabelSelector, cluster string) bool {
	return sel != nil && len(sel.MatchExpressions) == 0 && equalLabels(sel.MatchLabels,
		map[string]string{"app.kubernetes.io/name": "openbao", "app.kubernetes.io/instance": cluster})
}

func equalLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

func TestInvalidValuesAreValuesErrors(t *testing.T) {
	cases := map[string]struct {
		specValues string
		wantText   string
	}{
		"a string for podDisruptionBudget.maxUnavailable": {
			specValues: `{"podDisruptionBudget": {"maxUnavailable": "x"}}`, wantText: "maxUnavailable",
		},
		"an unknown top-level key": {specValues: `{"replicaCount": 3}`, wantText: "replicaCount"},
		"an unknown nested key":    {specValues: `{"serviceMonitor": {"intervall": "5s"}}`, wantText: "intervall"},
		"a grace period above the maximum": {
			specValues: `{"terminationGracePeriodSeconds": 7200}`, wantText: "terminationGracePeriodSeconds",
		},
	}
	r := newRenderer(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fixture(t, sample, func(c *v1alpha1.OpenBaoCluster) {
				c.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(tc.specValues)}
			})
			_, err := r.Render(c.Namespace, c.Name, valuesWith(t, c, testOperator))
			var ve *render.ValuesError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v, want *render.ValuesError", err)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not name %s", err, tc.wantText)
			}
		})
	}
}

// TestChartDefaultsAreTheFirstLayer: a free key no layer sets takes the
// chart's values.yaml default; spec.values and overrideValues replace it.
func TestChartDefaultsAreTheFirstLayer(t *testing.T) {
	cases := map[string]struct {
		specValues string
		override   map[string]any
		want       int64
	}{
		"the chart default applies when nothing sets the key": {want: 30},
		"spec.values beats the chart default":                 {specValues: `{"terminationGracePeriodSeconds": 45}`, want: 45},
		"overrideValues beat spec.values": {
			specValues: `{"terminationGracePeriodSeconds": 45}`, override: map[string]any{"terminationGracePeriodSeconds": 60}, want: 60,
		},
	}
	r := newRenderer(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fixture(t, sample, func(c *v1alpha1.OpenBaoCluster) {
				if tc.specValues != "" {
					c.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(tc.specValues)}
				}
			})
			op := values.Operator{Namespace: testOperator.Namespace, OverrideValues: tc.override}
			got := statefulSet(t, renderWith(t, r, c, op)).Spec.Template.Spec.TerminationGracePeriodSeconds
			if got == nil || *got != tc.want {
				t.Errorf("terminationGracePeriodSeconds %v, want %d", got, tc.want)
			}
		})
	}
}

// TestThePodTemplateCarriesTheHandledRestartRequest: the template changes
// with status.restart.request, the request handled, and with nothing else
// of it: the spec's field alone (not yet handled, or cleared after) moves
// no pod.
func TestThePodTemplateCarriesTheHandledRestartRequest(t *testing.T) {
	r := newRenderer(t)
	annotation := func(spec string, handled *v1alpha1.RestartStatus) (string, bool) {
		c := fixture(t, sample, func(c *v1alpha1.OpenBaoCluster) {
			c.Spec.RestartRequest, c.Status.Restart = spec, handled
		})
		v, ok := statefulSet(t, renderWith(t, r, c, testOperator)).Spec.Template.Annotations[v1alpha1.AnnotationRestartRequest]
		return v, ok
	}
	if v, ok := annotation("", nil); ok {
		t.Errorf("never restarted: the template carries %s=%q", v1alpha1.AnnotationRestartRequest, v)
	}
	if v, ok := annotation("t2", nil); ok {
		t.Errorf("a request not handled yet is in the template already: %q", v)
	}
	handled := &v1alpha1.RestartStatus{Request: "t1"}
	for _, spec := range []string{"t1", "t2", ""} {
		if v, _ := annotation(spec, handled); v != "t1" {
			t.Errorf("spec %q, handled t1: the template carries %q, want t1", spec, v)
		}
	}
}
