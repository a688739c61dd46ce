package scale_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

const (
	operatorNamespace = "openbao-operator-system"
	createWorkers     = 16
)

// newClient is the harness's own client, as another user: its requests are
// in neither the operator's metrics nor its audit entries. Its rate limit
// is high, so that creating the clusters is not throttled here.
func newClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	return client.New(cfg, client.Options{Scheme: scheme})
}

// namespaceOf spreads the clusters round-robin over n namespaces.
func namespaceOf(i, n int) string { return fmt.Sprintf("scale-%03d", i%n) }
func clusterName(i int) string    { return fmt.Sprintf("bao-%04d", i) }

func createNamespaces(ctx context.Context, c client.Client, n int) error {
	names := []string{operatorNamespace}
	for i := range n {
		names = append(names, namespaceOf(i, n))
	}
	for _, n := range names {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			return fmt.Errorf("create namespace %s: %w", n, err)
		}
	}
	return nil
}

// createClusters creates n minimal clusters (spec.version only: every
// other field takes its production default) in the given number of
// namespaces, from createWorkers goroutines.
func createClusters(ctx context.Context, c client.Client, n, namespaces int) error {
	return createEach(n, func(i int) error {
		obj := minimalCluster(namespaceOf(i, namespaces), clusterName(i))
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create cluster %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
		}
		return nil
	})
}

// createEach calls create for 0..n-1 from createWorkers goroutines; a
// worker stops at its first error, and the first error is returned.
func createEach(n int, create func(i int) error) error {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		once     sync.Once
	)
	for range createWorkers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := create(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// minimalCluster is unstructured so that the API server sees only
// spec.version and defaults the rest, as for a user's manifest.
func minimalCluster(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"version": "2.4.0"}}}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("OpenBaoCluster"))
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// convergence records when each cluster was first seen applied.
type convergence struct {
	start time.Time
	at    map[string]time.Duration // "ns/name" → time since start
}

// poll checks every cluster once: its status reports the children applied
// for the current generation, and its StatefulSet exists.
func (cv *convergence) poll(ctx context.Context, c client.Client) error {
	clusters := &v1alpha1.OpenBaoClusterList{}
	if err := c.List(ctx, clusters); err != nil {
		return fmt.Errorf("list clusters: %w", err)
	}
	sets := &appsv1.StatefulSetList{}
	if err := c.List(ctx, sets, client.HasLabels{v1alpha1.LabelCluster}); err != nil {
		return fmt.Errorf("list StatefulSets: %w", err)
	}
	have := map[string]bool{}
	for _, s := range sets.Items {
		have[s.Namespace+"/"+s.Name] = true
	}
	now := time.Since(cv.start)
	for i := range clusters.Items {
		cl := &clusters.Items[i]
		key := cl.Namespace + "/" + cl.Name
		if _, done := cv.at[key]; done || !applied(cl) || !have[cl.Namespace+"/"+cl.StatefulSetName()] {
			continue
		}
		cv.at[key] = now
	}
	return nil
}

func applied(c *v1alpha1.OpenBaoCluster) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionDegraded)
	return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == v1alpha1.ReasonReconciled &&
		c.Status.ObservedGeneration == c.Generation
}

// waitConverged polls until n clusters are applied or the timeout passes,
// and returns the time the last one took.
func (cv *convergence) waitConverged(ctx context.Context, c client.Client, n int, timeout time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(timeout)
	for {
		if err := cv.poll(ctx, c); err != nil {
			return 0, err
		}
		if len(cv.at) >= n {
			var last time.Duration
			for _, d := range cv.at {
				last = max(last, d)
			}
			return last, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d of %d clusters applied after %s", len(cv.at), n, timeout)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// clusterStates counts the clusters by phase and the reason of their
// OpenBaoInitialized condition, e.g. "Pending [OpenBaoInitialized=False
// PodStarting]": it says what
// the clusters are waiting for while the operator is measured idle.
func clusterStates(ctx context.Context, c client.Client) (map[string]float64, error) {
	list := &v1alpha1.OpenBaoClusterList{}
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	out := map[string]float64{}
	for i := range list.Items {
		cl := &list.Items[i]
		state := "no OpenBaoInitialized condition"
		if cond := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ConditionOpenBaoInitialized); cond != nil {
			state = fmt.Sprintf("OpenBaoInitialized=%s %s", cond.Status, cond.Reason)
		}
		out[fmt.Sprintf("%s [%s]", cl.Status.Phase, state)]++
	}
	return out, nil
}

// percentile returns the p-th percentile (0..1) of the convergence times.
func (cv *convergence) percentile(p float64) time.Duration {
	ds := make([]time.Duration, 0, len(cv.at))
	for _, d := range cv.at {
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(p*float64(len(ds))))]
}
