// Package nscache is a controller-runtime cache whose namespaces change
// while it runs. The operator holds rights on its workload kinds only in the
// namespaces a provisioner has bound it to, and that set grows and shrinks
// without a restart; cache.Options.DefaultNamespaces is fixed at start, so
// this cache keeps one ordinary cache per served namespace, starts and stops
// them as SetNamespaces says, and fans informer handlers out to all of them,
// including namespaces added after the handlers were.
//
// Kinds that clusterWide names, and cluster-scoped kinds, are served by one
// ordinary cluster-wide cache.
//
// Not supported: opts.DefaultNamespaces and ByObject[...].Namespaces (the
// namespaces come from SetNamespaces; New rejects them), and List with a
// Continue token (as with controller-runtime's multi-namespace cache).
package nscache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Cache serves namespaced kinds from the namespaces last given to
// SetNamespaces and the other kinds from one cluster-wide cache.
type Cache struct {
	cfg         *rest.Config
	opts        cache.Options
	clusterWide func(schema.GroupVersionKind) bool
	cluster     cache.Cache
	stopped     chan struct{} // closed when Start returns

	// setMu serializes SetNamespaces, so that the last call wins, without
	// holding mu while the caches of new namespaces are built.
	setMu sync.Mutex

	mu         sync.Mutex
	log        logr.Logger
	startCtx   context.Context // nil until Start
	stopping   bool            // Start's context ended: launch nothing more
	running    sync.WaitGroup  // the per-namespace caches' Start calls
	namespaces map[string]*member
	fanouts    map[kindKey]*fanout
	indexes    []fieldIndex
}

var _ cache.Cache = (*Cache)(nil)

// member is the cache of one served namespace.
type member struct {
	ns    string
	cache cache.Cache
	// ctx is cancelled when the namespace leaves the served set; the
	// cache's run, reads in flight and the handlers' gates all follow it.
	ctx      context.Context
	cancel   context.CancelFunc
	launched chan struct{} // closed when the cache's Start is called
	// informers holds this namespace's informer of each fanned-out kind;
	// guarded by Cache.mu.
	informers map[kindKey]cache.Informer
}

// fieldIndex is an IndexField call, kept to apply to later namespaces.
type fieldIndex struct {
	key   kindKey
	obj   client.Object
	field string
	fn    client.IndexerFunc
}

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
	return &Cache{
		cfg: cfg, opts: opts, clusterWide: clusterWide, cluster: cluster,
		stopped:    make(chan struct{}),
		log:        log.Log.WithName("nscache"),
		namespaces: map[string]*member{},
		fanouts:    map[kindKey]*fanout{},
	}, nil
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
// namespaces: it starts a cache for each new one (if Start has run; else at
// Start) and stops the ones no longer named. Safe to call concurrently and
// before Start.
func (c *Cache) SetNamespaces(namespaces []string) {
	c.setMu.Lock()
	defer c.setMu.Unlock()
	want := normalize(namespaces)
	c.mu.Lock()
	add, remove := diff(c.namespaces, want)
	for _, ns := range remove {
		c.removeLocked(ns)
	}
	logger := c.log
	c.mu.Unlock()

	for _, ns := range add {
		m, err := c.newMember(ns)
		if err == nil {
			c.mu.Lock()
			err = c.installLocked(m)
			c.mu.Unlock()
		}
		if err != nil {
			// Left unserved: reads there answer NotServedError, and the
			// next SetNamespaces naming it tries again.
			logger.Error(err, "cannot serve namespace", "namespace", ns)
		}
	}
}

// Namespaces returns the served set, sorted.
func (c *Cache) Namespaces() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.namespaces))
}

// newMember builds, without starting it, the cache of one namespace: the
// caller's options (label selectors by kind included) restricted to ns.
func (c *Cache) newMember(ns string) (*member, error) {
	opts := c.opts
	opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	nc, err := cache.New(c.cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("create the cache of namespace %s: %w", ns, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &member{
		ns: ns, cache: nc, ctx: ctx, cancel: cancel,
		launched: make(chan struct{}), informers: map[kindKey]cache.Informer{},
	}, nil
}

// installLocked gives a new namespace the recorded indexes and the
// fanned-out informers with their handlers, then serves it. It is one
// critical section with the fan-outs' AddEventHandler, so a handler lands
// in each namespace exactly once. Nothing here waits on a sync: informers
// of a cache not yet started only register.
func (c *Cache) installLocked(m *member) error {
	for _, ix := range c.indexes {
		if err := m.cache.IndexField(m.ctx, ix.obj, ix.field, ix.fn); err != nil {
			m.cancel()
			return fmt.Errorf("index %s in namespace %s: %w", ix.field, m.ns, err)
		}
	}
	for _, f := range c.fanouts {
		if err := f.attachLocked(m); err != nil {
			m.cancel()
			// The handlers attached so far must not wait on a namespace
			// that is not served.
			for _, f := range c.fanouts {
				f.detachLocked(m.ns)
			}
			return err
		}
	}
	c.namespaces[m.ns] = m
	if c.startCtx != nil {
		c.launchLocked(m)
	}
	return nil
}

// removeLocked stops serving ns at once: its cache stops (its RBAC is about
// to go, and a reflector on a forbidden namespace logs errors forever) and
// its handlers' gates close.
func (c *Cache) removeLocked(ns string) {
	m := c.namespaces[ns]
	delete(c.namespaces, ns)
	m.cancel()
	for _, f := range c.fanouts {
		f.detachLocked(ns)
	}
}

// launchLocked runs a namespace's cache until the namespace is removed or
// Start's context ends.
func (c *Cache) launchLocked(m *member) {
	if c.stopping {
		return
	}
	close(m.launched)
	runCtx, cancel := context.WithCancel(c.startCtx)
	stop := context.AfterFunc(m.ctx, cancel)
	logger := c.log
	c.running.Go(func() {
		defer stop()
		defer cancel()
		if err := m.cache.Start(runCtx); err != nil {
			logger.Error(err, "the cache of a namespace stopped", "namespace", m.ns)
		}
	})
}

// Start runs the cluster-wide cache and the caches of the served namespaces
// (those set before Start too) until ctx ends.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.startCtx != nil {
		c.mu.Unlock()
		return errors.New("nscache: already started")
	}
	c.startCtx = ctx
	c.log = log.FromContext(ctx).WithName("nscache")
	for _, m := range c.namespaces {
		c.launchLocked(m)
	}
	c.mu.Unlock()

	// The cluster-wide cache returns when ctx ends, or at once with an
	// error, which the manager must hear about without waiting for ctx.
	err := c.cluster.Start(ctx)
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	if err != nil {
		close(c.stopped)
		return fmt.Errorf("run the cluster-wide cache: %w", err)
	}
	c.running.Wait()
	close(c.stopped)
	return nil
}

// WaitForCacheSync waits for the cluster-wide cache and every served
// namespace's cache. A namespace removed meanwhile does not count.
func (c *Cache) WaitForCacheSync(ctx context.Context) bool {
	synced := c.cluster.WaitForCacheSync(ctx)
	for _, m := range c.members() {
		mctx, done := m.bind(ctx)
		ok := m.cache.WaitForCacheSync(mctx)
		done()
		if !ok && m.ctx.Err() == nil {
			synced = false
		}
	}
	return synced
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

// members returns the served namespaces' caches, sorted by namespace.
func (c *Cache) members() []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*member, 0, len(c.namespaces))
	for _, ns := range slices.Sorted(maps.Keys(c.namespaces)) {
		out = append(out, c.namespaces[ns])
	}
	return out
}

// member returns the cache of ns, or nil when ns is not served.
func (c *Cache) member(ns string) *member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.namespaces[ns]
}

// bind returns ctx, also cancelled when the namespace is removed, so that a
// read or a wait on a removed namespace's cache does not block until the
// caller gives up.
func (m *member) bind(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(m.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}
