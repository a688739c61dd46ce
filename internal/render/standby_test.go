package render_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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

// TestTheClientServiceRoutesToStandbysWhereTheyForwardEveryRequest: the
// client Service selects every unsealed server (standbys forward requests
// to the active one, so a step-down leaves it endpoints), matching a
// standby's labels too; it selects the active server only with tls.mode
// ACME, since each server orders its own certificate and a tls-alpn-01
// challenge must reach the server that ordered, and from OpenBao 2.5,
// whose standbys answer reads from their own trailing store. A cluster
// formed from a backup selects the active server only until that restore
// completed: for seconds after the upload OpenBao (2.4) has its standbys
// forward to the source cluster's active server, which the snapshot names.
func TestTheClientServiceRoutesToStandbysWhereTheyForwardEveryRequest(t *testing.T) {
	r := newRenderer(t)
	completed := &v1alpha1.FromBackupStatus{Restore: "r", InstalledAt: &metav1.Time{}, CompletedAt: &metav1.Time{}}
	for _, tc := range []struct {
		fixture, version string
		fromBackup       *v1alpha1.FromBackupStatus
		selectsStandby   bool
	}{
		{"initialized", "", nil, true},
		{"tls_acme", "", nil, false},
		{"initialized", "2.5.0", nil, false},
		{"read_replicas_standby_reads", "", nil, false},
		{"initialized", "2.4.1", nil, true},
		{"initialized", "not-a-version", nil, false},
		{"from_backup", "", nil, false},
		{"from_backup", "", &v1alpha1.FromBackupStatus{Restore: "r", InstalledAt: &metav1.Time{}}, false},
		{"from_backup", "", completed, true},
	} {
		c := fixture(t, tc.fixture, func(c *v1alpha1.OpenBaoCluster) {
			if tc.version != "" {
				c.Spec.Version = tc.version
			}
			if tc.fromBackup != nil {
				c.Status.FromBackup = tc.fromBackup
			}
		})
		what := tc.fixture + " at " + c.Spec.Version
		if tc.fromBackup != nil {
			what += fmt.Sprintf(" (restore installed %v, completed %v)", tc.fromBackup.InstalledAt != nil, tc.fromBackup.CompletedAt != nil)
		}
		objs := renderWith(t, r, c, testOperator)
		standby := podLabels(t, objs)
		standby["openbao-active"] = "false"
		svc := service(t, objs, c.ClientServiceName())
		if got := matches(svc.Spec.Selector, standby); got != tc.selectsStandby {
			t.Errorf("%s: client Service selector %v selects a standby: %v, want %v", what, svc.Spec.Selector, got, tc.selectsStandby)
		}
		sealed := podLabels(t, objs)
		sealed["openbao-sealed"], sealed["openbao-active"] = "true", "false"
		if matches(svc.Spec.Selector, sealed) {
			t.Errorf("%s: client Service selector %v selects a sealed server", what, svc.Spec.Selector)
		}
		if !matches(svc.Spec.Selector, podLabels(t, objs)) {
			t.Errorf("%s: client Service selector %v misses the active server", what, svc.Spec.Selector)
		}
	}
}

// TestEveryServerWaitsForItsEndpointToLeaveBeforeItStops: the client
// Service routes to every server, so each server's SIGTERM (which seals it
// and closes its listener) is held back by a preStop sleep while kube-proxy
// drops the deleted pod's endpoint, on the voters' and the read replicas'
// StatefulSets alike; values.shutdownDelaySeconds sets it, 0 turns it off,
// and one that would eat the grace period is refused naming both values.
func TestEveryServerWaitsForItsEndpointToLeaveBeforeItStops(t *testing.T) {
	r := newRenderer(t)
	delays := func(c *v1alpha1.OpenBaoCluster) map[string]int64 {
		out := map[string]int64{}
		for _, sts := range statefulSets(t, renderWith(t, r, c, testOperator)) {
			for _, ct := range sts.Spec.Template.Spec.Containers {
				if ct.Name != "openbao" {
					continue
				}
				out[sts.Name] = -1
				if ct.Lifecycle != nil && ct.Lifecycle.PreStop != nil && ct.Lifecycle.PreStop.Sleep != nil {
					out[sts.Name] = ct.Lifecycle.PreStop.Sleep.Seconds
				}
			}
		}
		return out
	}
	withValues := func(raw string) func(*v1alpha1.OpenBaoCluster) {
		return func(c *v1alpha1.OpenBaoCluster) { c.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(raw)} }
	}
	for _, tc := range []struct {
		name, fixture, values string
		want                  int64
	}{
		{"the default, voters and read replicas", "read_replicas", "", 2},
		{"a longer wait", "initialized", `{"shutdownDelaySeconds": 10}`, 10},
		{"no wait", "initialized", `{"shutdownDelaySeconds": 0}`, -1},
	} {
		var opts []func(*v1alpha1.OpenBaoCluster)
		if tc.values != "" {
			opts = append(opts, withValues(tc.values))
		}
		got := delays(fixture(t, tc.fixture, opts...))
		if want := map[bool]int{true: 2, false: 1}[tc.fixture == "read_replicas"]; len(got) != want {
			t.Fatalf("%s: the server container in %d StatefulSets, want %d", tc.name, len(got), want)
		}
		for sts, d := range got {
			if d != tc.want {
				t.Errorf("%s: StatefulSet %s's server waits %d s before SIGTERM (-1: no preStop sleep), want %d", tc.name, sts, d, tc.want)
			}
		}
	}

	c := fixture(t, "initialized", withValues(`{"shutdownDelaySeconds": 30}`))
	_, err := r.Render(c.Namespace, c.Name, valuesWith(t, c, testOperator))
	if err == nil || !strings.Contains(err.Error(), "values.shutdownDelaySeconds") ||
		!strings.Contains(err.Error(), "values.terminationGracePeriodSeconds") {
		t.Errorf("a wait as long as the grace period (30 s): %v, want a refusal naming both values", err)
	}
}

// TestTheReadServiceSelectsNoPodUntilASnapshotOfAnotherClusterIsRestored:
// a cluster formed from a backup, with read replicas, renders a read
// Service no read replica matches until that restore completed: for
// seconds after the upload OpenBao (2.4) has its standbys forward to the
// source cluster's active server.
func TestTheReadServiceSelectsNoPodUntilASnapshotOfAnotherClusterIsRestored(t *testing.T) {
	r := newRenderer(t)
	from := fixture(t, "from_backup", func(*v1alpha1.OpenBaoCluster) {}).Spec.Bootstrap
	for _, tc := range []struct {
		name     string
		status   *v1alpha1.FromBackupStatus
		selected bool
	}{
		{"no restore yet", nil, false},
		{"installed, not completed", &v1alpha1.FromBackupStatus{Restore: "r", InstalledAt: &metav1.Time{}}, false},
		{"completed", &v1alpha1.FromBackupStatus{Restore: "r", InstalledAt: &metav1.Time{}, CompletedAt: &metav1.Time{}}, true},
	} {
		c := fixture(t, "read_replicas", func(c *v1alpha1.OpenBaoCluster) {
			c.Spec.Bootstrap = from.DeepCopy()
			c.Status.FromBackup = tc.status
		})
		objs := renderWith(t, r, c, testOperator)
		var read map[string]string
		for _, sts := range find(objs, "StatefulSet") {
			if sts.GetName() == c.ReadStatefulSetName() {
				read, _, _ = unstructured.NestedStringMap(sts.Object, "spec", "template", "metadata", "labels")
			}
		}
		if read == nil {
			t.Fatalf("%s: no read StatefulSet", tc.name)
		}
		read["openbao-active"], read["openbao-sealed"] = "false", "false"
		svc := service(t, objs, c.ReadServiceName())
		if got := matches(svc.Spec.Selector, read); got != tc.selected {
			t.Errorf("%s: read Service selector %v selects a read replica (%v): %v, want %v", tc.name, svc.Spec.Selector, read, got, tc.selected)
		}
	}
}
