package render_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/openbao/operator/api/v1alpha1"
)

// TestAStandbyClientServiceSelectsNoPodUntilPromoted: a standby that has
// not been promoted renders a client Service whose selector no server pod
// matches, and a NetworkPolicy that admits no API client beyond the
// operator, the servers and the Jobs; promoted, both open as for any
// cluster.
func TestAStandbyClientServiceSelectsNoPodUntilPromoted(t *testing.T) {
	r := newRenderer(t)
	standing := fixture(t, "from_backup", func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.Standby = &v1alpha1.StandbySpec{}
		c.Status.Initialized = true
	})
	objs := renderWith(t, r, standing, testOperator)
	pods := podLabels(t, objs)
	svc := service(t, objs, standing.ClientServiceName())
	if matches(svc.Spec.Selector, pods) || svc.Spec.Selector["openbao.org/standby"] != "closed" {
		t.Fatalf("a standby's client Service selects its servers: %v (pod labels %v)", svc.Spec.Selector, pods)
	}
	if apiAdmitsClients(t, objs) {
		t.Fatal("a standby's NetworkPolicy admits the listed API clients")
	}

	promoted := standing.DeepCopy()
	promoted.Status.Standby = &v1alpha1.StandbyStatus{PromotedAt: &metav1.Time{}}
	objs = renderWith(t, r, promoted, testOperator)
	svc = service(t, objs, promoted.ClientServiceName())
	if _, closed := svc.Spec.Selector["openbao.org/standby"]; closed || !apiAdmitsClients(t, objs) {
		t.Fatalf("a promoted standby stays closed: selector %v", svc.Spec.Selector)
	}
}

// podLabels are the labels of the servers' pod template, with the active
// server's label OpenBao's service registration adds.
func podLabels(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	labels, _, _ := unstructured.NestedStringMap(find(objs, "StatefulSet")[0].Object, "spec", "template", "metadata", "labels")
	labels["openbao-active"], labels["openbao-sealed"] = "true", "false"
	return labels
}

func service(t *testing.T, objs []*unstructured.Unstructured, name string) *corev1.Service {
	t.Helper()
	for _, o := range find(objs, "Service") {
		if o.GetName() == name {
			svc := &corev1.Service{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, svc); err != nil {
				t.Fatal(err)
			}
			return svc
		}
	}
	t.Fatalf("no Service %s", name)
	return nil
}

func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// apiAdmitsClients says the servers' NetworkPolicy admits the fixture's
// apiClients (pods labelled app: client) to port 8200.
func apiAdmitsClients(t *testing.T, objs []*unstructured.Unstructured) bool {
	t.Helper()
	for _, o := range find(objs, "NetworkPolicy") {
		np := &networkingv1.NetworkPolicy{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, np); err != nil {
			t.Fatal(err)
		}
		for _, rule := range np.Spec.Ingress {
			if len(rule.Ports) != 1 || rule.Ports[0].Port.IntValue() != 8200 {
				continue
			}
			for _, peer := range rule.From {
				if peer.PodSelector != nil && peer.PodSelector.MatchLabels["app"] == "client" {
					return true
				}
			}
		}
	}
	return false
}

// TestTheClientServiceRoutesToStandbysExceptWithACME: the client Service
// selects every unsealed server (standbys forward requests to the active
// one, so a step-down leaves it endpoints), matching a standby's labels
// too; with tls.mode ACME it selects the active server only, since each
// server orders its own certificate and a tls-alpn-01 challenge must
// reach the server that ordered.
func TestTheClientServiceRoutesToStandbysExceptWithACME(t *testing.T) {
	r := newRenderer(t)
	for _, tc := range []struct {
		fixture        string
		selectsStandby bool
	}{{"initialized", true}, {"tls_acme", false}} {
		c := fixture(t, tc.fixture, func(*v1alpha1.OpenBaoCluster) {})
		objs := renderWith(t, r, c, testOperator)
		standby := podLabels(t, objs)
		standby["openbao-active"] = "false"
		svc := service(t, objs, c.ClientServiceName())
		if got := matches(svc.Spec.Selector, standby); got != tc.selectsStandby {
			t.Errorf("%s: client Service selector %v selects a standby: %v, want %v", tc.fixture, svc.Spec.Selector, got, tc.selectsStandby)
		}
		sealed := podLabels(t, objs)
		sealed["openbao-sealed"], sealed["openbao-active"] = "true", "false"
		if matches(svc.Spec.Selector, sealed) {
			t.Errorf("%s: client Service selector %v selects a sealed server", tc.fixture, svc.Spec.Selector)
		}
		if !matches(svc.Spec.Selector, podLabels(t, objs)) {
			t.Errorf("%s: client Service selector %v misses the active server", tc.fixture, svc.Spec.Selector)
		}
	}
}
