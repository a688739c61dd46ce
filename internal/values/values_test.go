package values_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/pki"
	"github.com/openbao/operator/internal/values"
)

// cluster builds a minimal OpenBaoCluster; opts change it.
// inputOf is the input a pass that kept the cluster's status would build.
func inputOf(c *v1alpha1.OpenBaoCluster) values.Input { return values.InputFor(c, &c.Status) }

func cluster(opts ...func(*v1alpha1.OpenBaoCluster)) *v1alpha1.OpenBaoCluster {
	c := &v1alpha1.OpenBaoCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "ns"},
		Spec:       v1alpha1.OpenBaoClusterSpec{Version: "2.4.0", Replicas: 3},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func withValues(js string) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) { c.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(js)} }
}

func withConfig(key, js string) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) {
		if c.Spec.Config == nil {
			c.Spec.Config = map[string]apiextensionsv1.JSON{}
		}
		c.Spec.Config[key] = apiextensionsv1.JSON{Raw: []byte(js)}
	}
}

func initialized(c *v1alpha1.OpenBaoCluster) { c.Status.Initialized = true }

// lookup follows a dotted path through nested maps.
func lookup(m map[string]any, path string) any {
	var cur any = m
	for _, p := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

func TestComputeMergeOrder(t *testing.T) {
	cases := map[string]struct {
		specValues string
		override   map[string]any
		path       string
		want       any
	}{
		"a free key in spec.values reaches the chart": {
			specValues: `{"terminationGracePeriodSeconds": 45}`,
			path:       "terminationGracePeriodSeconds", want: float64(45),
		},
		"overrideValues beat spec.values": {
			specValues: `{"terminationGracePeriodSeconds": 45}`,
			override:   map[string]any{"terminationGracePeriodSeconds": 60},
			path:       "terminationGracePeriodSeconds", want: 60,
		},
		"nested maps merge key by key: spec.values keeps its sibling": {
			specValues: `{"podDisruptionBudget": {"maxUnavailable": 2}}`,
			override:   map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}},
			path:       "podDisruptionBudget.maxUnavailable", want: float64(2),
		},
		"nested maps merge key by key: overrideValues add their key": {
			specValues: `{"podDisruptionBudget": {"maxUnavailable": 2}}`,
			override:   map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}},
			path:       "podDisruptionBudget.enabled", want: false,
		},
		"owned values beat overrideValues": {
			override: map[string]any{"replicas": 7},
			path:     "replicas", want: int64(1),
		},
		"owned maps beat overrideValues key by key": {
			override: map[string]any{"image": map[string]any{"tag": "9.9.9"}},
			path:     "image.tag", want: "2.4.0",
		},
		"overrideValues may set imageRegistry": {
			override: map[string]any{"imageRegistry": "mirror.example.com"},
			path:     "imageRegistry", want: "mirror.example.com",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var opts []func(*v1alpha1.OpenBaoCluster)
			if tc.specValues != "" {
				opts = append(opts, withValues(tc.specValues))
			}
			got, err := values.Compute(inputOf(cluster(opts...)), values.Operator{OverrideValues: tc.override}, values.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if v := lookup(got, tc.path); !reflect.DeepEqual(v, tc.want) {
				t.Errorf("%s = %#v, want %#v", tc.path, v, tc.want)
			}
		})
	}
}

func TestComputeDoesNotChangeOverrideValues(t *testing.T) {
	override := map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}}
	c := cluster(withValues(`{"podDisruptionBudget": {"maxUnavailable": 2}}`))
	if _, err := values.Compute(inputOf(c), values.Operator{OverrideValues: override}, values.Config{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}}
	if !reflect.DeepEqual(override, want) {
		t.Errorf("overrideValues changed to %v", override)
	}
}

func TestSpecValuesRejectsEveryProtectedKey(t *testing.T) {
	for _, key := range values.CRProtectedKeys() {
		t.Run(key, func(t *testing.T) {
			_, err := values.Compute(inputOf(cluster(withValues(`{"`+key+`": {}}`))), values.Operator{}, values.Config{})
			var owned *values.OwnedKeyError
			if !errors.As(err, &owned) {
				t.Fatalf("error %v, want *OwnedKeyError", err)
			}
			if want := "spec.values." + key; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
		})
	}
}

func TestSpecValuesMustBeAnObject(t *testing.T) {
	_, err := values.Compute(inputOf(cluster(withValues(`[1, 2]`))), values.Operator{}, values.Config{})
	if err == nil || !strings.Contains(err.Error(), "spec.values") {
		t.Fatalf("error %v, want one naming spec.values", err)
	}
}

func TestCheckOverrideValues(t *testing.T) {
	cases := map[string]struct {
		override map[string]any
		wantKey  string // "" when allowed
	}{
		"no overrides are allowed":          {override: nil},
		"free keys are allowed":             {override: map[string]any{"podAnnotations": map[string]any{"a": "b"}}},
		"imageRegistry is allowed":          {override: map[string]any{"imageRegistry": "mirror.example.com"}},
		"replicas is owned":                 {override: map[string]any{"replicas": 5}, wantKey: "replicas"},
		"image is owned":                    {override: map[string]any{"image": map[string]any{}}, wantKey: "image"},
		"the first owned key in order wins": {override: map[string]any{"tls": 1, "config": 1}, wantKey: "config"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := values.CheckOverrideValues(tc.override)
			if tc.wantKey == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var owned *values.OwnedKeyError
			if !errors.As(err, &owned) || owned.Layer != "overrideValues" || owned.Key != tc.wantKey {
				t.Fatalf("error %#v, want OwnedKeyError for overrideValues.%s", err, tc.wantKey)
			}
			if !strings.Contains(err.Error(), "overrideValues."+tc.wantKey) {
				t.Errorf("message %q does not name overrideValues.%s", err, tc.wantKey)
			}
		})
	}
}

func TestCRProtectedKeysAreSortedAndIncludeImageRegistry(t *testing.T) {
	keys := values.CRProtectedKeys()
	for i := 1; i < len(keys); i++ {
		if keys[i-1] >= keys[i] {
			t.Fatalf("not sorted at %q", keys[i])
		}
	}
	found := false
	for _, k := range keys {
		found = found || k == "imageRegistry"
	}
	if !found {
		t.Error("imageRegistry is operator-wide and must be protected in spec.values")
	}
	keys[0] = "changed"
	if values.CRProtectedKeys()[0] == "changed" {
		t.Error("CRProtectedKeys returns the package's own slice")
	}
}

func TestReplicas(t *testing.T) {
	cases := map[string]struct {
		replicas    int32
		initialized bool
		want        int32
	}{
		"an uninitialized cluster of 3 runs 1 server":  {replicas: 3, want: 1},
		"an uninitialized cluster of 1 runs 1 server":  {replicas: 1, want: 1},
		"an uninitialized cluster of 11 runs 1 server": {replicas: 11, want: 1},
		"an initialized cluster runs spec.replicas":    {replicas: 5, initialized: true, want: 5},
		"an initialized cluster of 1 runs 1 server":    {replicas: 1, initialized: true, want: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := cluster(func(c *v1alpha1.OpenBaoCluster) {
				c.Spec.Replicas = tc.replicas
				c.Status.Initialized = tc.initialized
			})
			if got := inputOf(c).Replicas; got != tc.want {
				t.Errorf("Replicas = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestComputeReplicasFollowsStatus(t *testing.T) {
	for _, c := range []*v1alpha1.OpenBaoCluster{cluster(), cluster(initialized)} {
		vals, err := values.Compute(inputOf(c), values.Operator{}, values.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := vals["replicas"], int64(inputOf(c).Replicas); got != want {
			t.Errorf("initialized=%v: replicas value %v, want %d", c.Status.Initialized, got, want)
		}
	}
}

func TestLabelsTheOperatorOwnsCannotBeSet(t *testing.T) {
	for _, tc := range []struct{ values, key string }{
		{`{"podLabels": {"openbao.org/cluster": "other"}}`, "openbao.org/cluster"},
		{`{"commonLabels": {"app.kubernetes.io/instance": "x"}}`, "app.kubernetes.io/instance"},
		{`{"podLabels": {"openbao-initialized": "true"}}`, "openbao-initialized"},
		{`{"serviceMonitor": {"labels": {"openbao.org/cluster": "other"}}}`, "openbao.org/cluster"},
	} {
		_, err := values.Compute(inputOf(cluster(withValues(tc.values))), values.Operator{}, values.Config{})
		var labelErr *values.ProtectedLabelError
		if !errors.As(err, &labelErr) || labelErr.Key != tc.key || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: %v, want a ProtectedLabelError naming %s", tc.values, err, tc.key)
		}
	}
	if err := values.CheckOverrideValues(map[string]any{"podLabels": map[string]any{"openbao-active": "true"}}); err == nil {
		t.Error("watches.yaml may set openbao-active on the pods")
	}
	typed := cluster(withMonitoring(v1alpha1.MonitoringSpec{ServiceMonitor: v1alpha1.ServiceMonitorSpec{Enabled: true,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "someone"}}}))
	_, err := values.Compute(inputOf(typed), values.Operator{}, values.Config{})
	if want := "spec.monitoring.serviceMonitor.labels.app.kubernetes.io/managed-by"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a protected ServiceMonitor label: %v, want an error naming %s", err, want)
	}
	if _, err := values.Compute(inputOf(cluster(withValues(`{"podLabels": {"team": "a"}}`))), values.Operator{}, values.Config{}); err != nil {
		t.Errorf("an ordinary pod label is refused: %v", err)
	}
}

func TestADisruptionBudgetThatCouldCostQuorumIsRefused(t *testing.T) {
	for _, tc := range []struct {
		values   string
		replicas int32
		ok       bool
	}{
		{`{"podDisruptionBudget": {"maxUnavailable": 1}}`, 3, true},
		{`{"podDisruptionBudget": {"maxUnavailable": 2}}`, 3, false},
		{`{"podDisruptionBudget": {"maxUnavailable": 2}}`, 5, true},
		{`{"podDisruptionBudget": {"maxUnavailable": "50%"}}`, 3, false},
		{`{"podDisruptionBudget": {"enabled": false, "maxUnavailable": 3}}`, 3, true},
	} {
		c := cluster(withValues(tc.values), func(c *v1alpha1.OpenBaoCluster) { c.Spec.Replicas = tc.replicas })
		_, err := values.Compute(inputOf(c), values.Operator{}, values.Config{})
		var pdbErr *values.DisruptionBudgetError
		if tc.ok != (err == nil) || (!tc.ok && !errors.As(err, &pdbErr)) {
			t.Errorf("%s with %d replicas: %v", tc.values, tc.replicas, err)
		}
		if err != nil && !strings.Contains(err.Error(), "quorum") {
			t.Errorf("the refusal does not explain the arithmetic: %v", err)
		}
	}
}

// TestCertificateNamesIncludeTheRouteHosts: a client coming through a
// TLS-passthrough Gateway or an Ingress checks OpenBao's certificate
// against the external name; a disabled route adds none, and the spec's
// own extra names are kept, not overwritten.
func TestCertificateNamesIncludeTheRouteHosts(t *testing.T) {
	c := cluster(func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.TLS.ExtraSANs = []string{"bao.internal.example"}
		c.Spec.Ingress = &v1alpha1.IngressSpec{Enabled: true, Host: "bao.example.com"}
		c.Spec.Gateway = &v1alpha1.GatewaySpec{Enabled: true, Hostnames: []string{"vault.example.com", "*.bao.example.net"}}
	})
	sans := pki.DesiredSANs(values.PKISpec(c)).DNSNames
	for _, want := range []string{"bao.internal.example", "bao.example.com", "vault.example.com", "*.bao.example.net"} {
		if !slices.Contains(sans, want) {
			t.Errorf("certificate names %v lack %s", sans, want)
		}
	}
	if len(c.Spec.TLS.ExtraSANs) != 1 {
		t.Errorf("spec.tls.extraSANs changed to %v", c.Spec.TLS.ExtraSANs)
	}
	c.Spec.Ingress.Enabled, c.Spec.Gateway.Enabled = false, false
	if sans := pki.DesiredSANs(values.PKISpec(c)).DNSNames; slices.Contains(sans, "bao.example.com") || slices.Contains(sans, "vault.example.com") {
		t.Errorf("disabled routes still name the certificate: %v", sans)
	}
}

// The wrapper image runs as PID 1 of every OpenBao server: a tenant's
// spec.values and the site's overrideValues can name it no more than the
// operator's --wrapper-image.
func TestNoOneButTheOperatorNamesTheWrapperImage(t *testing.T) {
	evil := `{"wrapper": {"image": "evil.example/bao-wrapper:1"}}`
	_, err := values.Compute(inputOf(cluster(withValues(evil))), values.Operator{WrapperImage: "registry.example/bao-wrapper:1.1.1"}, values.Config{})
	var owned *values.OwnedKeyError
	if !errors.As(err, &owned) || !strings.Contains(err.Error(), "spec.values.wrapper") {
		t.Errorf("spec.values naming the wrapper image: %v, want an OwnedKeyError naming spec.values.wrapper", err)
	}
	if err := values.CheckOverrideValues(map[string]any{"wrapper": map[string]any{"image": "evil.example/bao-wrapper:1"}}); err == nil {
		t.Error("overrideValues may name the wrapper image")
	}
	got, err := values.Compute(inputOf(cluster()), values.Operator{WrapperImage: "registry.example/bao-wrapper:1.1.1"}, values.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if v := lookup(got, "wrapper.image"); v != "registry.example/bao-wrapper:1.1.1" {
		t.Errorf("wrapper.image = %v, want the operator's --wrapper-image", v)
	}
}

// TestCertificateNamesCoverTheReadReplicas: a client of the read Service
// and a voter dialing a read replica by its stable name verify the one
// server certificate, so it names both; without read replicas it names
// neither.
func TestCertificateNamesCoverTheReadReplicas(t *testing.T) {
	c := cluster(func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.ReadReplicas = &v1alpha1.ReadReplicasSpec{Replicas: 2}
	})
	sans := pki.DesiredSANs(values.PKISpec(c)).DNSNames
	ns := c.Namespace
	for _, want := range []string{"bao-read." + ns + ".svc", "bao-read-1.bao-read-internal." + ns + ".svc", "bao-read-internal." + ns + ".svc"} {
		if !slices.Contains(sans, want) {
			t.Errorf("certificate names %v lack %s", sans, want)
		}
	}
	if slices.Contains(sans, "bao-read-2.bao-read-internal."+ns+".svc") {
		t.Errorf("certificate names a read replica beyond spec.readReplicas.replicas: %v", sans)
	}
	c.Spec.ReadReplicas = nil
	for _, name := range pki.DesiredSANs(values.PKISpec(c)).DNSNames {
		if strings.Contains(name, "-read") {
			t.Errorf("without read replicas the certificate still names %s", name)
		}
	}
}

// TestReadReplicasStartOnlyOnceInitializedAndStandbyReadsWaitFor25: a
// non-voter joins a cluster that exists, so nothing of the read replicas
// is rendered before initialization; and the controller refuses standby
// reads on 2.4 with the webhook's message.
func TestReadReplicasStartOnlyOnceInitializedAndStandbyReadsWaitFor25(t *testing.T) {
	c := cluster(func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.ReadReplicas = &v1alpha1.ReadReplicasSpec{Replicas: 2}
	})
	compute := func() map[string]any {
		t.Helper()
		in := inputOf(c)
		cfg, err := values.ConfigFor(in)
		if err != nil {
			t.Fatal(err)
		}
		vals, err := values.Compute(in, values.Operator{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return vals["readReplicas"].(map[string]any)
	}
	if read := compute(); read["enabled"] != false {
		t.Fatalf("before initialization: readReplicas %v, want disabled", read)
	}
	c.Status.Initialized = true
	read := compute()
	if read["enabled"] != true || read["replicas"] != int64(2) {
		t.Fatalf("once initialized: readReplicas %v, want 2 enabled", read)
	}
	if hcl, _ := read["config"].(map[string]any)["hcl"].(string); !strings.Contains(strings.Join(strings.Fields(hcl), " "), "retry_join_as_non_voter = true") {
		t.Errorf("the read replicas' config.hcl does not join as a non-voter:\n%s", hcl)
	}

	c.Spec.ReadReplicas.StandbyReads = ptr.To(true)
	_, err := values.Compute(inputOf(c), values.Operator{}, values.Config{})
	var sr *values.StandbyReadsError
	if !errors.As(err, &sr) || !strings.Contains(err.Error(), "spec.readReplicas.standbyReads") {
		t.Fatalf("standby reads on 2.4: %v, want a StandbyReadsError naming the field", err)
	}
}
