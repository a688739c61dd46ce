package nscache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// objectForm tells typed, unstructured and metadata-only informers of one
// kind apart, as controller-runtime keeps them apart.
type objectForm int

const (
	typed objectForm = iota
	unstructuredForm
	metadataForm
)

type kindKey struct {
	gvk  schema.GroupVersionKind
	form objectForm
}

func keyOf(gvk schema.GroupVersionKind, obj runtime.Object) kindKey {
	switch obj.(type) {
	case runtime.Unstructured:
		return kindKey{gvk, unstructuredForm}
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return kindKey{gvk, metadataForm}
	}
	return kindKey{gvk, typed}
}

// syncPoll is how often the Done channels of fan-outs and registrations
// check whether every namespace has synced; toolscache.WaitForCacheSync
// polls at the same rate.
const syncPoll = 100 * time.Millisecond

// ErrInformerRemoved is returned by a fan-out informer after RemoveInformer
// removed its kind.
var ErrInformerRemoved = errors.New("nscache: the informer was removed")

// GetInformer returns, for a namespaced kind, an informer fanned out over
// the served namespaces and those added later; otherwise the cluster-wide
// cache's informer. Unless BlockUntilSynced(false), once the cache runs,
// it waits until the informer has synced in every served namespace.
func (c *Cache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	gvk, namespaced, err := c.route(obj)
	if err != nil {
		return nil, err
	}
	if !namespaced {
		return c.cluster.GetInformer(ctx, obj, opts...)
	}
	f, err := c.fanoutFor(keyOf(gvk, obj), obj)
	if err != nil {
		return nil, err
	}
	if blockUntilSynced(opts) && c.isStarted() && !toolscache.WaitForCacheSync(ctx.Done(), f.HasSynced) {
		return nil, apierrors.NewTimeoutError(fmt.Sprintf("failed waiting for the %s informer to sync", gvk), 0)
	}
	return f, nil
}

// GetInformerForKind is GetInformer for the scheme's type of gvk.
func (c *Cache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	obj, err := c.opts.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("make an object of %s: %w", gvk, err)
	}
	cobj, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("the scheme's type %T of %s is not a client.Object", obj, gvk)
	}
	return c.GetInformer(ctx, cobj, opts...)
}

func blockUntilSynced(opts []cache.InformerGetOption) bool {
	var o cache.InformerGetOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o.BlockUntilSynced == nil || *o.BlockUntilSynced
}

func (c *Cache) isStarted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startCtx != nil
}

// fanoutFor returns the fan-out of a kind, creating it and its informer in
// every served namespace (without waiting for them) on first use.
func (c *Cache) fanoutFor(key kindKey, obj client.Object) (*fanout, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.fanouts[key]; ok {
		return f, nil
	}
	f := &fanout{c: c, key: key, proto: obj.DeepCopyObject().(client.Object), regs: map[*registration]struct{}{}}
	for _, m := range c.namespaces {
		if err := f.attachLocked(m); err != nil {
			return nil, err
		}
	}
	c.fanouts[key] = f
	return f, nil
}

// RemoveInformer removes the kind's informer everywhere: from the
// cluster-wide cache, or from every served namespace, and from those added
// later (with its handlers and recorded indexes).
func (c *Cache) RemoveInformer(ctx context.Context, obj client.Object) error {
	gvk, namespaced, err := c.route(obj)
	if err != nil {
		return err
	}
	if !namespaced {
		return c.cluster.RemoveInformer(ctx, obj)
	}
	key := keyOf(gvk, obj)
	c.mu.Lock()
	if f, ok := c.fanouts[key]; ok {
		f.removed = true
		delete(c.fanouts, key)
	}
	c.indexes = slices.DeleteFunc(c.indexes, func(ix fieldIndex) bool { return ix.key == key })
	for _, m := range c.namespaces {
		delete(m.informers, key)
	}
	c.mu.Unlock()
	for _, m := range c.members() {
		if err := m.cache.RemoveInformer(ctx, obj); err != nil {
			return fmt.Errorf("remove the %s informer in namespace %s: %w", gvk, m.ns, err)
		}
	}
	return nil
}

// IndexField adds the index to the cluster-wide cache, or to every served
// namespace and every namespace added later.
func (c *Cache) IndexField(ctx context.Context, obj client.Object, field string, extractValue client.IndexerFunc) error {
	gvk, namespaced, err := c.route(obj)
	if err != nil {
		return err
	}
	if !namespaced {
		return c.cluster.IndexField(ctx, obj, field, extractValue)
	}
	ix := fieldIndex{key: keyOf(gvk, obj), obj: obj.DeepCopyObject().(client.Object), field: field, fn: extractValue}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.namespaces {
		// The namespace's cache only registers the informer: no wait.
		if err := m.cache.IndexField(m.ctx, ix.obj, field, extractValue); err != nil {
			return fmt.Errorf("index %s of %s in namespace %s: %w", field, gvk, m.ns, err)
		}
	}
	c.indexes = append(c.indexes, ix)
	return nil
}

// fanout is the Informer of one namespaced kind over the served
// namespaces. Its handlers and indexers are kept to give to namespaces
// added later.
type fanout struct {
	c     *Cache
	key   kindKey
	proto client.Object
	done  lazyDone

	// guarded by c.mu
	regs     map[*registration]struct{}
	indexers []toolscache.Indexers
	removed  bool
}

var _ cache.Informer = (*fanout)(nil)

// attachLocked creates the kind's informer in a namespace's cache, with the
// fan-out's indexers and handlers.
func (f *fanout) attachLocked(m *member) error {
	inf, err := m.cache.GetInformer(m.ctx, f.proto, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("get the %s informer in namespace %s: %w", f.key.gvk, m.ns, err)
	}
	for _, ixs := range f.indexers {
		if err := inf.AddIndexers(ixs); err != nil {
			return fmt.Errorf("add indexers to %s in namespace %s: %w", f.key.gvk, m.ns, err)
		}
	}
	for r := range f.regs {
		if err := r.attachLocked(m, inf); err != nil {
			return err
		}
	}
	m.informers[f.key] = inf
	return nil
}

// detachLocked forgets a removed namespace: its informer stops with its
// cache, and the handlers' gates there are closed already.
func (f *fanout) detachLocked(ns string) {
	for r := range f.regs {
		delete(r.perNS, ns)
	}
}

// informers returns the kind's informer in each served namespace.
func (f *fanout) informers() []cache.Informer {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	out := make([]cache.Informer, 0, len(f.c.namespaces))
	for _, m := range f.c.namespaces {
		if inf, ok := m.informers[f.key]; ok {
			out = append(out, inf)
		}
	}
	return out
}

func (f *fanout) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return f.add(h, func(inf cache.Informer, h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
		return inf.AddEventHandler(h)
	})
}

func (f *fanout) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, period time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return f.add(h, func(inf cache.Informer, h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
		return inf.AddEventHandlerWithResyncPeriod(h, period)
	})
}

func (f *fanout) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return f.add(h, func(inf cache.Informer, h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
		return inf.AddEventHandlerWithOptions(h, o)
	})
}

// add attaches the handler in every served namespace, in the critical
// section that also installs namespaces, and keeps it for later ones.
func (f *fanout) add(h toolscache.ResourceEventHandler, addTo addFunc) (toolscache.ResourceEventHandlerRegistration, error) {
	r := &registration{f: f, handler: h, addTo: addTo, perNS: map[string]nsHandle{}}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if f.removed {
		return nil, ErrInformerRemoved
	}
	for _, m := range f.c.namespaces {
		if err := r.attachLocked(m, m.informers[f.key]); err != nil {
			r.removeAllLocked()
			return nil, err
		}
	}
	f.regs[r] = struct{}{}
	return r, nil
}

// RemoveEventHandler removes the handler from every namespace, and from
// those added later.
func (f *fanout) RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(*registration)
	if !ok || r.f != f {
		return fmt.Errorf("nscache: the registration %T was not returned by this informer", handle)
	}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	delete(f.regs, r)
	return r.removeAllLocked()
}

func (f *fanout) AddIndexers(indexers toolscache.Indexers) error {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	for _, m := range f.c.namespaces {
		if err := m.informers[f.key].AddIndexers(indexers); err != nil {
			return fmt.Errorf("add indexers to %s in namespace %s: %w", f.key.gvk, m.ns, err)
		}
	}
	f.indexers = append(f.indexers, indexers)
	return nil
}

// HasSynced reports whether the kind's informer has synced in every served
// namespace: vacuously true with none.
func (f *fanout) HasSynced() bool {
	for _, inf := range f.informers() {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

func (f *fanout) HasSyncedChecker() toolscache.DoneChecker { return f }

func (f *fanout) Name() string { return fmt.Sprintf("nscache informer of %s", f.key.gvk) }

func (f *fanout) Done() <-chan struct{} { return f.done.when(f.HasSynced, f.c.stopped) }

// IsStopped follows the cache's life, not a namespace's.
func (f *fanout) IsStopped() bool { return f.c.IsStopped() }

type addFunc func(cache.Informer, toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)

// nsHandle is a handler's registration in one namespace's informer.
type nsHandle struct {
	informer cache.Informer
	handle   toolscache.ResourceEventHandlerRegistration
}

// registration is a handler fanned out over the namespaces.
type registration struct {
	f       *fanout
	handler toolscache.ResourceEventHandler
	addTo   addFunc
	removed atomic.Bool
	done    lazyDone
	perNS   map[string]nsHandle // guarded by f.c.mu
}

var _ toolscache.ResourceEventHandlerRegistration = (*registration)(nil)

func (r *registration) attachLocked(m *member, inf cache.Informer) error {
	h, err := r.addTo(inf, &gate{ns: m.ctx, reg: r, next: r.handler})
	if err != nil {
		return fmt.Errorf("add a handler to %s in namespace %s: %w", r.f.key.gvk, m.ns, err)
	}
	r.perNS[m.ns] = nsHandle{informer: inf, handle: h}
	return nil
}

func (r *registration) removeAllLocked() error {
	r.removed.Store(true)
	var errs []error
	for ns, h := range r.perNS {
		if err := h.informer.RemoveEventHandler(h.handle); err != nil {
			errs = append(errs, fmt.Errorf("remove a handler of %s in namespace %s: %w", r.f.key.gvk, ns, err))
		}
		delete(r.perNS, ns)
	}
	return errors.Join(errs...)
}

// HasSynced reports whether the handler has had the initial state of every
// served namespace.
func (r *registration) HasSynced() bool {
	r.f.c.mu.Lock()
	handles := make([]toolscache.ResourceEventHandlerRegistration, 0, len(r.perNS))
	for _, h := range r.perNS {
		handles = append(handles, h.handle)
	}
	r.f.c.mu.Unlock()
	for _, h := range handles {
		if !h.HasSynced() {
			return false
		}
	}
	return true
}

func (r *registration) HasSyncedChecker() toolscache.DoneChecker { return r }

func (r *registration) Name() string { return fmt.Sprintf("nscache handler of %s", r.f.key.gvk) }

func (r *registration) Done() <-chan struct{} { return r.done.when(r.HasSynced, r.f.c.stopped) }

// gate drops the events of a namespace once it is removed, or of a handler
// once it is removed: the informer stops asynchronously, and a handler
// must not hear from a namespace after SetNamespaces dropped it.
type gate struct {
	ns   context.Context
	reg  *registration
	next toolscache.ResourceEventHandler
}

func (g *gate) open() bool { return g.ns.Err() == nil && !g.reg.removed.Load() }

func (g *gate) OnAdd(obj any, isInInitialList bool) {
	if g.open() {
		g.next.OnAdd(obj, isInInitialList)
	}
}

func (g *gate) OnUpdate(oldObj, newObj any) {
	if g.open() {
		g.next.OnUpdate(oldObj, newObj)
	}
}

func (g *gate) OnDelete(obj any) {
	if g.open() {
		g.next.OnDelete(obj)
	}
}

// lazyDone is a Done channel over a condition on a changing set of
// namespaces: made on first use, closed the first time the condition
// holds (polled), or left open when the cache stops first.
type lazyDone struct {
	once sync.Once
	ch   chan struct{}
}

func (d *lazyDone) when(cond func() bool, stopped <-chan struct{}) <-chan struct{} {
	d.once.Do(func() {
		d.ch = make(chan struct{})
		go func() {
			ticker := time.NewTicker(syncPoll)
			defer ticker.Stop()
			for !cond() {
				select {
				case <-stopped:
					return
				case <-ticker.C:
				}
			}
			close(d.ch)
		}()
	})
	return d.ch
}
