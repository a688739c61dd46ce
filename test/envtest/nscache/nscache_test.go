package nscache_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openbao/operator/internal/nscache"
)

// seen is a set of "namespace/name", written by handlers.
type seen struct {
	mu  sync.Mutex
	set map[string]bool
}

func (s *seen) add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		s.set = map[string]bool{}
	}
	s.set[key] = true
}

func (s *seen) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set[key]
}

func (s *seen) wait(t *testing.T, key string) {
	t.Helper()
	eventually(t, 30*time.Second, "an event for "+key, func() error {
		if !s.has(key) {
			return errors.New("no event yet")
		}
		return nil
	})
}

// A controller's Watches are set up once, at start; a namespace served
// later must reach them without a restart.
func TestControllerHearsNamespaceAddedAfterItStarted(t *testing.T) {
	warm, later := namespace(t, "warm"), namespace(t, "later")
	var nc *nscache.Cache
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		NewCache: func(c *rest.Config, opts cache.Options) (cache.Cache, error) {
			var err error
			nc, err = nscache.New(c, opts, nil)
			return nc, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var requests seen
	err = ctrl.NewControllerManagedBy(mgr).Named("nscache-test").For(&corev1.ConfigMap{}).
		Complete(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			requests.add(req.String())
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	nc.SetNamespaces([]string{warm})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// The controller is running, its handler on the kind's informer.
	create(t, configMap(warm, "first", nil))
	requests.wait(t, warm+"/first")

	create(t, configMap(later, "before", nil))
	nc.SetNamespaces([]string{warm, later})
	create(t, configMap(later, "after", nil))
	requests.wait(t, later+"/before")
	requests.wait(t, later+"/after")
}

// Reads go to the cache of their namespace; a namespace not served is an
// error, never an empty answer.
func TestReadsAreRoutedByNamespace(t *testing.T) {
	a, b, other := namespace(t, "a"), namespace(t, "b"), namespace(t, "other")
	create(t, configMap(a, "in-a", map[string]string{"team": "x"}))
	create(t, configMap(b, "in-b", map[string]string{"team": "y"}))
	create(t, configMap(other, "in-other", map[string]string{"team": "x"}))
	create(t, &corev1.Secret{ObjectMeta: metaWithLabels(a, "cached", map[string]string{"cache": "yes"})})
	create(t, &corev1.Secret{ObjectMeta: metaWithLabels(a, "filtered-out", nil)})
	// The operator restricts some kinds by label; each namespace keeps it.
	byLabel := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{"cache": "yes"})}
	c := startCache(t, cfg, cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: byLabel}}, nil, a, b)
	ctx := context.Background()

	if err := c.Get(ctx, client.ObjectKey{Namespace: a, Name: "in-a"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("get in a served namespace: %v", err)
	}
	wantNotServed(t, other, c.Get(ctx, client.ObjectKey{Namespace: other, Name: "in-other"}, &corev1.ConfigMap{}))
	wantNotServed(t, other, c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(other)))

	wantList(t, c, []string{a + "/in-a", b + "/in-b"})
	wantList(t, c, []string{a + "/in-a"}, client.MatchingLabels{"team": "x"})
	wantList(t, c, []string{b + "/in-b"}, client.InNamespace(b))
	wantList(t, c, []string{a + "/in-a"}, client.Limit(1))

	secrets := &corev1.SecretList{}
	if err := c.List(ctx, secrets, client.InNamespace(a)); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 1 || secrets.Items[0].Name != "cached" {
		t.Fatalf("secrets listed in %s: %v, want only the labelled one", a, secrets.Items)
	}
}

// A namespace dropped from the set is gone at once: from reads and from
// handlers.
func TestRemovedNamespaceIsForgotten(t *testing.T) {
	gone, kept := namespace(t, "gone"), namespace(t, "kept")
	c := startCache(t, cfg, cache.Options{}, nil, gone, kept)
	ctx := context.Background()
	inf, err := c.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	var events seen
	if _, err := inf.AddEventHandler(recorder(&events)); err != nil {
		t.Fatal(err)
	}
	create(t, configMap(gone, "x", nil))
	events.wait(t, gone+"/x")
	wantList(t, c, []string{gone + "/x"})

	watches := configMapWatches(t)
	c.SetNamespaces([]string{kept})
	// Its cache stops, watch included: its rights are about to go.
	eventually(t, 10*time.Second, "the removed namespace's watch to end", func() error {
		if n := configMapWatches(t); n != watches-1 {
			return fmt.Errorf("%d ConfigMap watches in a namespace, want %d", n, watches-1)
		}
		return nil
	})
	if got := c.Namespaces(); !slices.Equal(got, []string{kept}) {
		t.Fatalf("Namespaces() = %q, want [%s]", got, kept)
	}
	wantList(t, c, []string{})
	wantNotServed(t, gone, c.Get(ctx, client.ObjectKey{Namespace: gone, Name: "x"}, &corev1.ConfigMap{}))

	create(t, configMap(gone, "y", nil))
	create(t, configMap(kept, "y", nil))
	events.wait(t, kept+"/y")
	time.Sleep(2 * time.Second) // the removed namespace's watch would have delivered by now
	if events.has(gone + "/y") {
		t.Fatalf("a handler heard of %s/y after the namespace was removed", gone)
	}
}

// Kinds marked cluster-wide, and cluster-scoped kinds, do not depend on the
// served namespaces.
func TestClusterWideKindsIgnoreNamespaces(t *testing.T) {
	anywhere := namespace(t, "anywhere")
	create(t, configMap(anywhere, "cm", nil))
	isConfigMap := func(gvk schema.GroupVersionKind) bool { return gvk == configMapGVK }
	c := startCache(t, cfg, cache.Options{}, isConfigMap)
	ctx := context.Background()

	if err := c.Get(ctx, client.ObjectKey{Namespace: anywhere, Name: "cm"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("get a cluster-wide kind with no namespace served: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: anywhere}, &corev1.Namespace{}); err != nil {
		t.Fatalf("get a cluster-scoped kind with no namespace served: %v", err)
	}
	var events seen
	inf, err := c.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandler(recorder(&events)); err != nil {
		t.Fatal(err)
	}
	events.wait(t, anywhere+"/cm")
	// A namespaced kind not marked cluster-wide is still per namespace.
	wantNotServed(t, anywhere, c.List(ctx, &corev1.SecretList{}, client.InNamespace(anywhere)))
}

func wantNotServed(t *testing.T, namespace string, err error) {
	t.Helper()
	var notServed *nscache.NotServedError
	if !errors.As(err, &notServed) || notServed.Namespace != namespace {
		t.Fatalf("got %v, want a NotServedError for namespace %s", err, namespace)
	}
}

func wantList(t *testing.T, c *nscache.Cache, want []string, opts ...client.ListOption) {
	t.Helper()
	list := &corev1.ConfigMapList{}
	if err := c.List(context.Background(), list, opts...); err != nil {
		t.Fatalf("list: %v", err)
	}
	if got := names(list); !slices.Equal(got, want) {
		t.Fatalf("listed %q, want %q", got, want)
	}
}

// recorder records "namespace/name" of every object it hears of.
func recorder(s *seen) toolscache.ResourceEventHandler {
	record := func(obj any) {
		if o, ok := obj.(client.Object); ok {
			s.add(o.GetNamespace() + "/" + o.GetName())
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}
}

// isNotServedOrGone is true for errors a read may meet while its
// namespace is being dropped.
func isNotServedOrGone(err error) bool {
	var notServed *nscache.NotServedError
	return err == nil || errors.As(err, &notServed) || apierrors.IsNotFound(err)
}

// SetNamespaces races reads, informer requests and the namespaces' own
// starts; run with -race.
func TestSetNamespacesRacesReads(t *testing.T) {
	a, b := namespace(t, "a"), namespace(t, "b")
	create(t, configMap(a, "cm", nil))
	create(t, configMap(b, "cm", nil))
	c := startCache(t, cfg, cache.Options{}, nil, a)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	loop := func(step func(i int) error) {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				if err := step(i); !isNotServedOrGone(err) && ctx.Err() == nil {
					errs <- err
					return
				}
			}
		})
	}
	sets := [][]string{{a}, {a, b}, {b}, {}}
	loop(func(i int) error { c.SetNamespaces(sets[i%len(sets)]); time.Sleep(50 * time.Millisecond); return nil })
	loop(func(int) error { return c.List(ctx, &corev1.ConfigMapList{}) })
	loop(func(int) error { return c.Get(ctx, client.ObjectKey{Namespace: b, Name: "cm"}, &corev1.ConfigMap{}) })
	loop(func(int) error {
		inf, err := c.GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false))
		if err != nil {
			return err
		}
		h, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{})
		if err != nil {
			return err
		}
		_ = h.HasSynced()
		return inf.RemoveEventHandler(h)
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("unexpected error while namespaces change: %v", err)
	}
	c.SetNamespaces([]string{a, b})
	wantList(t, c, []string{a + "/cm", b + "/cm"})
	if fmt.Sprint(c.Namespaces()) != fmt.Sprint([]string{a, b}) {
		t.Fatalf("Namespaces() = %q", c.Namespaces())
	}
}

// configMapWatches returns how many watches on ConfigMaps in one namespace
// the API server is serving, from its own metrics.
func configMapWatches(t *testing.T) int {
	t.Helper()
	body, err := kubernetes.NewForConfigOrDie(cfg).RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("read the API server's metrics: %v", err)
	}
	total := 0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") ||
			!strings.Contains(line, `resource="configmaps"`) || !strings.Contains(line, `scope="namespace"`) ||
			!strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		n, err := strconv.Atoi(line[strings.LastIndex(line, " ")+1:])
		if err != nil {
			t.Fatalf("parse %q: %v", line, err)
		}
		total += n
	}
	return total
}

// An index registered at start (as a manager's FieldIndexer does) serves
// namespaces added later.
func TestIndexFieldReachesLaterNamespaces(t *testing.T) {
	later := namespace(t, "later")
	c := startCache(t, cfg, cache.Options{}, nil)
	ctx := context.Background()
	err := c.IndexField(ctx, &corev1.ConfigMap{}, "data.owner", func(obj client.Object) []string {
		return []string{obj.(*corev1.ConfigMap).Data["owner"]}
	})
	if err != nil {
		t.Fatal(err)
	}
	c.SetNamespaces([]string{later})
	mine := configMap(later, "mine", nil)
	mine.Data = map[string]string{"owner": "me"}
	create(t, mine)
	create(t, configMap(later, "theirs", nil))
	eventually(t, 30*time.Second, "a list by the index in the later namespace", func() error {
		list := &corev1.ConfigMapList{}
		if err := c.List(ctx, list, client.MatchingFields{"data.owner": "me"}); err != nil {
			return err
		}
		if got := names(list); !slices.Equal(got, []string{later + "/mine"}) {
			return fmt.Errorf("listed %q", got)
		}
		return nil
	})
}

// A read before Start answers at once that the cache has not started, as
// controller-runtime's cache does, instead of waiting for a namespace to
// sync that nothing lists yet.
func TestAReadBeforeStartSaysSo(t *testing.T) {
	ns := namespace(t, "early")
	opts := cache.Options{Scheme: scheme}
	c, err := nscache.New(cfg, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetNamespaces([]string{ns})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, &corev1.ConfigMap{})
	var notStarted *cache.ErrCacheNotStarted
	if !errors.As(err, &notStarted) {
		t.Fatalf("Get before Start = %v, want ErrCacheNotStarted", err)
	}
	err = c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
	if !errors.As(err, &notStarted) {
		t.Fatalf("List before Start = %v, want ErrCacheNotStarted", err)
	}
}
