// Package nscache is a controller-runtime cache whose namespaces change
// while it runs. The operator holds rights on its workload kinds only in the
// namespaces a provisioner has bound it to, and that set grows and shrinks
// without a restart; cache.Options.DefaultNamespaces is fixed at start.
//
// Each namespaced kind has one informer, as in a cluster-wide cache, fed by
// one watch per served namespace (spread.go): a namespace costs its
// watches, not an informer set of its own. SetNamespaces changes the
// namespaces under the running informers; reads in a namespace not served
// answer NotServedError, and reads in a namespace just added wait until
// the informer holds what it listed there.
//
// Kinds that clusterWide names, and cluster-scoped kinds, are served by one
// ordinary cluster-wide cache.
//
// Not supported: opts.DefaultNamespaces and ByObject[...].Namespaces (the
// namespaces come from SetNamespaces; New rejects them), and List with a
// Continue token.
package nscache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Cache serves namespaced kinds from the namespaces last given to
// SetNamespaces and the other kinds from one cluster-wide cache.
type Cache struct {
	opts        cache.Options
	clusterWide func(schema.GroupVersionKind) bool
	cluster     cache.Cache
	// shared holds the namespaced kinds' informers; its own List and Watch
	// are replaced by spreads over the served namespaces.
	shared  cache.Cache
	lister  client.WithWatch
	opening chan struct{} // see kindSource.opening
	log     logr.Logger
	stopped chan struct{} // closed when Start returns

	mu      sync.Mutex
	started bool
	served  []string // normalized
	spreads map[kindKey]*spread
}

var _ cache.Cache = (*Cache)(nil)

// maxOpening bounds the lists and watch requests the cache has in flight.
const maxOpening = 8

// New returns the cache; give it to the manager through ctrl.Options.NewCache
// (a closure that keeps the *Cache so the caller can call SetNamespaces).
// clusterWide may be nil: then only cluster-scoped kinds are cluster-wide.
func New(cfg *rest.Config, opts cache.Options, clusterWide func(schema.GroupVersionKind) bool) (*Cache, error) {
	opts, err := withDefaults(cfg, opts)
	if err != nil {
		return nil, err
	}
	if clusterWide == nil {
		clusterWide = func(schema.GroupVersionKind) bool { return false }
	}
	cluster, err := cache.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("create the cluster-wide cache: %w", err)
	}
	lister, err := client.NewWithWatch(cfg, client.Options{HTTPClient: opts.HTTPClient, Scheme: opts.Scheme, Mapper: opts.Mapper})
	if err != nil {
		return nil, fmt.Errorf("create the namespaces' client: %w", err)
	}
	c := &Cache{
		opts: opts, clusterWide: clusterWide, cluster: cluster, lister: lister,
		log:     log.Log.WithName("nscache"),
		opening: make(chan struct{}, maxOpening),
		stopped: make(chan struct{}),
		spreads: map[kindKey]*spread{},
	}
	sharedOpts := opts
	sharedOpts.NewInformer = c.newInformer
	if c.shared, err = cache.New(cfg, sharedOpts); err != nil {
		return nil, fmt.Errorf("create the namespaced kinds' cache: %w", err)
	}
	return c, nil
}

// withDefaults fills in the HTTP client, scheme and RESTMapper once, so
// that every namespace's cache shares them instead of each discovering the
// API anew, and rejects the namespace options SetNamespaces replaces.
func withDefaults(cfg *rest.Config, opts cache.Options) (cache.Options, error) {
	if len(opts.DefaultNamespaces) > 0 {
		return opts, errors.New("nscache: DefaultNamespaces is not supported: the namespaces come from SetNamespaces")
	}
	var err error
	if opts.HTTPClient == nil {
		if opts.HTTPClient, err = rest.HTTPClientFor(cfg); err != nil {
			return opts, fmt.Errorf("create the HTTP client: %w", err)
		}
	}
	if opts.Scheme == nil {
		opts.Scheme = scheme.Scheme
	}
	if opts.Mapper == nil {
		if opts.Mapper, err = apiutil.NewDynamicRESTMapper(cfg, opts.HTTPClient); err != nil {
			return opts, fmt.Errorf("create the REST mapper: %w", err)
		}
	}
	for obj, byObject := range opts.ByObject {
		if byObject.Namespaces != nil {
			return opts, fmt.Errorf("nscache: ByObject[%T].Namespaces is not supported: the namespaces come from SetNamespaces", obj)
		}
		// Resolving the scope now fails fast on an unknown kind and warms
		// the mapper, so that building a namespace's cache later, in
		// SetNamespaces (which returns no error), does not fail on it.
		if _, err := apiutil.IsObjectNamespaced(obj, opts.Scheme, opts.Mapper); err != nil {
			return opts, fmt.Errorf("resolve the scope of %T: %w", obj, err)
		}
	}
	return opts, nil
}

// SetNamespaces makes the namespaced kinds served from exactly these
// namespaces: each kind's informer starts following the new ones and
// forgets the ones no longer named. Safe to call concurrently and before
// Start.
func (c *Cache) SetNamespaces(namespaces []string) {
	want := normalize(namespaces)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.served = want
	for _, s := range c.spreads {
		s.setNamespaces(want)
	}
}

// Namespaces returns the served set, sorted.
func (c *Cache) Namespaces() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.served)
}

func (c *Cache) serves(ns string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := slices.BinarySearch(c.served, ns)
	return ok
}

// newInformer is the shared cache's NewInformer: the informer of a
// namespaced kind, listing and watching the served namespaces instead of
// the whole cluster (lw, where the operator holds no rights).
func (c *Cache) newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	key, src, err := c.sourceOf(obj)
	if err != nil {
		// Cannot happen for objects the shared cache made from this
		// scheme; if it does, the cluster-wide informer's refused lists
		// say so in the log, and its reads never sync.
		c.log.Error(err, "cannot spread the informer over the served namespaces")
		return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	}
	s := newSpread(key.gvk.Kind, src, c.log)
	inf := toolscache.NewSharedIndexInformerWithOptions(s, obj, toolscache.SharedIndexInformerOptions{
		ResyncPeriod: resync, Indexers: indexers, ObjectDescription: key.gvk.String(),
	})
	s.bind(inf)
	c.mu.Lock()
	defer c.mu.Unlock()
	s.setNamespaces(c.served)
	c.spreads[key] = s
	return inf
}

func (c *Cache) sourceOf(obj runtime.Object) (kindKey, *kindSource, error) {
	gvk, err := apiutil.GVKForObject(obj, c.opts.Scheme)
	if err != nil {
		return kindKey{}, nil, err
	}
	key := keyOf(gvk, obj)
	src, err := newSource(c.lister, c.opening, c.opts, key)
	return key, src, err
}

// spreadOf returns the spread of a kind, nil before its informer exists.
func (c *Cache) spreadOf(key kindKey) *spread {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spreads[key]
}

// Start runs both caches until ctx ends.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("nscache: already started")
	}
	c.started = true
	c.mu.Unlock()
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for _, part := range []cache.Cache{c.cluster, c.shared} {
		wg.Go(func() { errs <- part.Start(ctx) })
	}
	// Either returns when ctx ends, or at once with an error, which the
	// manager must hear about without waiting for ctx.
	err := <-errs
	if err == nil {
		err = <-errs
	}
	go func() { wg.Wait(); close(c.stopped) }()
	if err != nil {
		return fmt.Errorf("run the cache: %w", err)
	}
	return nil
}

// WaitForCacheSync waits for both caches and, for each namespaced kind,
// for every served namespace to sync or to fail its list (allSettled). A
// namespace removed meanwhile does not count.
func (c *Cache) WaitForCacheSync(ctx context.Context) bool {
	if !c.cluster.WaitForCacheSync(ctx) || !c.shared.WaitForCacheSync(ctx) {
		return false
	}
	c.mu.Lock()
	spreads := make([]*spread, 0, len(c.spreads))
	for _, s := range c.spreads {
		spreads = append(spreads, s)
	}
	c.mu.Unlock()
	for _, s := range spreads {
		if !toolscache.WaitForCacheSync(ctx.Done(), s.allSettled) {
			return false
		}
	}
	return true
}

// IsStopped reports whether Start has returned.
func (c *Cache) IsStopped() bool {
	select {
	case <-c.stopped:
		return true
	default:
		return false
	}
}

// waitNamespace waits until the kind's informer holds what it listed in ns,
// or ns is no longer served (NotServedError), or its list failed (that
// error: a read must not hold a worker for as long as the rights are
// missing), or ctx ends.
func (c *Cache) waitNamespace(ctx context.Context, key kindKey, ns string) error {
	ticker := time.NewTicker(syncPoll)
	defer ticker.Stop()
	for {
		if !c.serves(ns) {
			return &NotServedError{Namespace: ns, GVK: key.gvk}
		}
		if s := c.spreadOf(key); s != nil {
			if s.namespaceSynced(ns) {
				return nil
			}
			if err := s.listError(ns); err != nil {
				return fmt.Errorf("namespace %s cannot be listed for %s yet: %w", ns, key.gvk.Kind, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the %s informer to sync namespace %s: %w", key.gvk, ns, ctx.Err())
		case <-ticker.C:
		}
	}
}
