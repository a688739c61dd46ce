package envtest_test

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkReconcile measures one reconcile of a settled cluster against the
// real API server: "unchanged" is the steady state (render cached, no
// writes); "changed" alters the spec every iteration, so each pass renders
// afresh and applies the ConfigMap and StatefulSet it changes.
//
//	make tools && go test ./test/envtest -run '^$' -bench Reconcile -benchmem
func BenchmarkReconcile(b *testing.B) {
	ctx := context.Background()
	createNamespace(b, "bench")
	c := newCluster(b, "bench", `
metadata: {name: bench}
spec:
  version: 2.4.0
  ingress: {enabled: true, host: bao.example.com}
`)
	if err := k8s.Create(ctx, c); err != nil {
		b.Fatal(err)
	}
	countedCfg, counter := countingConfig()
	cl, err := client.New(countedCfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	r, err := newReconciler(cl, cl, &events.FakeRecorder{}) // nil channel: discards events
	if err != nil {
		b.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		b.Fatal(err)
	}

	b.Run("unchanged", func(b *testing.B) {
		counter.writes.Store(0)
		for b.Loop() {
			if _, err := r.Reconcile(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(counter.writes.Load())/float64(b.N), "writes/op")
	})
	b.Run("changed", func(b *testing.B) {
		counter.writes.Store(0)
		i := 0
		for b.Loop() {
			i++
			latest := c.DeepCopy()
			if err := k8s.Get(ctx, req.NamespacedName, latest); err != nil {
				b.Fatal(err)
			}
			latest.Spec.Config = map[string]apiextJSON{"default_lease_ttl": jsonValue(fmt.Sprintf(`"%dh"`, i))}
			if err := k8s.Update(ctx, latest); err != nil {
				b.Fatal(err)
			}
			if _, err := r.Reconcile(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(counter.writes.Load())/float64(b.N), "writes/op")
	})
}
