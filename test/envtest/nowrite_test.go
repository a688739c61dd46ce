package envtest_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSecondReconcileWritesNothing drives the reconciler directly, in a
// namespace the suite's manager does not watch, and counts every request
// that changes state in the API server.
func TestSecondReconcileWritesNothing(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "direct")
	c := newCluster(t, "direct", `
metadata: {name: quiet}
spec:
  version: 2.4.0
  ingress: {enabled: true, host: bao.example.com}
  monitoring: {serviceMonitor: {enabled: false}}
  podDisruptionBudget: {maxUnavailable: 1}
  values: {podAnnotations: {team: a}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	countedCfg, counter := countingConfig()
	counted, err := client.New(countedCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	recorder := events.NewFakeRecorder(100)
	r, err := newReconciler(counted, counted, recorder)
	if err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}

	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("first reconcile: %v", err)
	}
	first := counter.writes.Swap(0)
	if first < 10 {
		t.Fatalf("first reconcile made %d writes; want at least one per child and the status", first)
	}
	drain(counter.log)

	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("second reconcile: %v", err)
	}
	if n := counter.writes.Load(); n != 0 {
		t.Fatalf("second reconcile with nothing changed made %d writes: %s", n, strings.Join(drain(counter.log), ", "))
	}
	t.Logf("first reconcile: %d writes; second: 0", first)
}

func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case s := <-ch:
			out = append(out, s)
		default:
			return out
		}
	}
}

// TestADeletedClusterIsForgotten: what the reconciler keeps of a cluster
// between passes (the Applier's record of each child, init pacing,
// autopilot state) is released once the cluster is gone, so an operator
// that serves clusters coming and going does not grow.
func TestADeletedClusterIsForgotten(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "forget")
	c := newCluster(t, "forget", `
metadata: {name: brief}
spec: {version: 2.4.0}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	r, err := newReconciler(k8s, k8s, &events.FakeRecorder{})
	if err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if !r.Remembers(req.NamespacedName) {
		t.Fatal("the reconciler remembers nothing of a cluster it reconciled; the test is vacuous")
	}
	if err := k8s.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if r.Remembers(req.NamespacedName) {
		t.Error("the reconciler still holds memory of a deleted cluster")
	}
}
