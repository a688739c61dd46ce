package render_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/openbao/operator/api/v1alpha1"
)

// TestTheServiceMonitorScrapesTheReadReplicasToo: with read replicas, the
// cluster's ServiceMonitor selects the voters' and the read replicas'
// headless Services (every server, by its own address), each serving the
// port the ServiceMonitor scrapes; neither load-balanced Service, whose
// endpoints are a subset of the servers, is selected.
func TestTheServiceMonitorScrapesTheReadReplicasToo(t *testing.T) {
	r := newRenderer(t)
	c := fixture(t, "read_replicas", func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.Monitoring = &v1alpha1.MonitoringSpec{ServiceMonitor: v1alpha1.ServiceMonitorSpec{Enabled: true}}
	})
	objs := renderWith(t, r, c, testOperator)
	sms := find(objs, "ServiceMonitor")
	if len(sms) != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", len(sms))
	}
	match, _, _ := unstructured.NestedStringMap(sms[0].Object, "spec", "selector", "matchLabels")
	endpoints, _, _ := unstructured.NestedSlice(sms[0].Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("%d endpoints, want 1", len(endpoints))
	}
	port, _ := endpoints[0].(map[string]any)["port"].(string)
	selected := map[string]bool{}
	for _, o := range find(objs, "Service") {
		if !labels.SelectorFromSet(match).Matches(labels.Set(o.GetLabels())) {
			continue
		}
		selected[o.GetName()] = true
		var svc corev1.Service
		typed(t, []*unstructured.Unstructured{o}, "Service", &svc)
		served := false
		for _, p := range svc.Spec.Ports {
			served = served || p.Name == port
		}
		if !served {
			t.Errorf("the selected Service %s has no port %q to scrape", o.GetName(), port)
		}
	}
	want := map[string]bool{c.HeadlessServiceName(): true, c.ReadHeadlessServiceName(): true}
	if len(selected) != len(want) || !selected[c.HeadlessServiceName()] || !selected[c.ReadHeadlessServiceName()] {
		t.Fatalf("the ServiceMonitor selects %v, want %v", selected, want)
	}
}
