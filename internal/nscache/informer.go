package nscache

import (
	"context"
	"fmt"
	"sync"
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

// syncPoll is how often a wait for namespaces to sync (a read, an
// informer's Done channel) checks; toolscache.WaitForCacheSync polls at the
// same rate.
const syncPoll = 100 * time.Millisecond

// GetInformer returns, for a namespaced kind, the kind's informer over the
// served namespaces (and those added later); otherwise the cluster-wide
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
	inner, err := c.shared.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	s := c.spreadOf(keyOf(gvk, obj))
	if s == nil {
		return inner, nil // not made by newInformer: its error is in the log
	}
	inf := &informer{Informer: inner, s: s, stopped: c.stopped}
	if blockUntilSynced(opts) && c.isStarted() && !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, apierrors.NewTimeoutError(fmt.Sprintf("failed waiting for the %s informer to sync", gvk), 0)
	}
	return inf, nil
}

// GetInformerForKind is GetInformer for the scheme's type of gvk.
func (c *Cache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	obj, err := newTyped(c.opts.Scheme, gvk)
	if err != nil {
		return nil, err
	}
	return c.GetInformer(ctx, obj, opts...)
}

// newTyped is an empty object of the scheme's type of gvk.
func newTyped(scheme *runtime.Scheme, gvk schema.GroupVersionKind) (client.Object, error) {
	obj, err := scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("make an object of %s: %w", gvk, err)
	}
	cobj, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("the scheme's type %T of %s is not a client.Object", obj, gvk)
	}
	return cobj, nil
}

func blockUntilSynced(opts []cache.InformerGetOption) bool {
	var o cache.InformerGetOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o.BlockUntilSynced == nil || *o.BlockUntilSynced
}

// isStarted says whether Start has run: before, GetInformer only
// registers (as controller-runtime's does).
func (c *Cache) isStarted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

// RemoveInformer removes the kind's informer, in the cluster-wide cache or
// over the served namespaces (its feeds stop with it).
func (c *Cache) RemoveInformer(ctx context.Context, obj client.Object) error {
	gvk, namespaced, err := c.route(obj)
	if err != nil {
		return err
	}
	if !namespaced {
		return c.cluster.RemoveInformer(ctx, obj)
	}
	if err := c.shared.RemoveInformer(ctx, obj); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.spreads, keyOf(gvk, obj))
	c.mu.Unlock()
	return nil
}

// IndexField adds the index to the cache that serves the kind.
func (c *Cache) IndexField(ctx context.Context, obj client.Object, field string, extractValue client.IndexerFunc) error {
	_, namespaced, err := c.route(obj)
	if err != nil {
		return err
	}
	if !namespaced {
		return c.cluster.IndexField(ctx, obj, field, extractValue)
	}
	return c.shared.IndexField(ctx, obj, field, extractValue)
}

// informer is a namespaced kind's informer whose sync also waits for the
// namespaces added after its first list.
type informer struct {
	cache.Informer
	s       *spread
	stopped <-chan struct{}
	done    lazyDone
}

func (i *informer) HasSynced() bool { return i.Informer.HasSynced() && i.s.allSettled() }

func (i *informer) HasSyncedChecker() toolscache.DoneChecker { return i }

func (i *informer) Name() string { return fmt.Sprintf("nscache informer of %s", i.s.kind) }

func (i *informer) Done() <-chan struct{} { return i.done.when(i.HasSynced, i.stopped) }

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
