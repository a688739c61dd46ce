package nscache

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// NotServedError is returned by Get and List for a namespaced kind in a
// namespace the cache does not serve: the operator has no rights there, so
// the answer is neither an empty result nor a request to the API server.
type NotServedError struct {
	Namespace string
	GVK       schema.GroupVersionKind
}

func (e *NotServedError) Error() string {
	return fmt.Sprintf("namespace %q is not served by the cache for %s", e.Namespace, e.GVK)
}

// ErrContinueNotSupported is returned by List given a Continue token: the
// union over namespaces cannot be resumed.
var ErrContinueNotSupported = errors.New("nscache: the continue list option is not supported")

// route returns the kind of obj (an object or a list) and whether it is
// served per namespace; otherwise the cluster-wide cache serves it.
func (c *Cache) route(obj runtime.Object) (schema.GroupVersionKind, bool, error) {
	gvk, err := apiutil.GVKForObject(obj, c.opts.Scheme)
	if err != nil {
		return gvk, false, err
	}
	if _, isList := obj.(client.ObjectList); isList {
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	}
	if c.clusterWide(gvk) {
		return gvk, false, nil
	}
	namespaced, err := apiutil.IsGVKNamespaced(gvk, c.opts.Mapper)
	if err != nil {
		return gvk, false, fmt.Errorf("resolve the scope of %s: %w", gvk, err)
	}
	return gvk, namespaced, nil
}

// Get reads from the cache of the object's namespace.
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk, namespaced, err := c.route(obj)
	if err != nil {
		return err
	}
	if !namespaced {
		return c.cluster.Get(ctx, key, obj, opts...)
	}
	m := c.member(key.Namespace)
	if m == nil {
		return &NotServedError{Namespace: key.Namespace, GVK: gvk}
	}
	return m.read(ctx, gvk, func(ctx context.Context) error {
		return m.cache.Get(ctx, key, obj, opts...)
	})
}

// read runs fn on the namespace's cache; a namespace removed meanwhile
// answers NotServedError, whatever its stopped cache returned.
func (m *member) read(ctx context.Context, gvk schema.GroupVersionKind, fn func(context.Context) error) error {
	ctx, done := m.bind(ctx)
	defer done()
	err := fn(ctx)
	var notStarted *cache.ErrCacheNotStarted
	if errors.As(err, &notStarted) && m.isLaunched() {
		// Served a moment ago: its Start is on its way. Wait for it, as a
		// read waits for a new informer to sync.
		m.cache.WaitForCacheSync(ctx)
		err = fn(ctx)
	}
	if m.ctx.Err() != nil {
		return &NotServedError{Namespace: m.ns, GVK: gvk}
	}
	return err
}

// List reads one namespace's cache, or with no namespace the union of the
// served namespaces in the order of their names, honoring the selectors
// and Limit (which truncates: there is no continuation).
func (c *Cache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	listOpts := client.ListOptions{}
	listOpts.ApplyOptions(opts)
	if listOpts.Continue != "" {
		return ErrContinueNotSupported
	}
	gvk, namespaced, err := c.route(list)
	if err != nil {
		return err
	}
	if !namespaced {
		return c.cluster.List(ctx, list, opts...)
	}
	if listOpts.Namespace != "" {
		m := c.member(listOpts.Namespace)
		if m == nil {
			return &NotServedError{Namespace: listOpts.Namespace, GVK: gvk}
		}
		return m.read(ctx, gvk, func(ctx context.Context) error {
			return m.cache.List(ctx, list, &listOpts)
		})
	}
	return c.listAll(ctx, gvk, list, listOpts)
}

// listAll is List over every served namespace. A namespace removed while
// it runs is left out, as it would be a moment later.
func (c *Cache) listAll(ctx context.Context, gvk schema.GroupVersionKind, list client.ObjectList, listOpts client.ListOptions) error {
	var items []runtime.Object
	var resourceVersion string
	for _, m := range c.members() {
		part := list.DeepCopyObject().(client.ObjectList)
		err := m.read(ctx, gvk, func(ctx context.Context) error {
			return m.cache.List(ctx, part, &listOpts)
		})
		var notServed *NotServedError
		if errors.As(err, &notServed) {
			continue
		}
		if err != nil {
			return err
		}
		got, err := apimeta.ExtractList(part)
		if err != nil {
			return fmt.Errorf("extract the items of %s in %s: %w", gvk, m.ns, err)
		}
		items = append(items, got...)
		resourceVersion = part.GetResourceVersion()
		if listOpts.Limit > 0 {
			listOpts.Limit -= int64(len(got))
			if listOpts.Limit <= 0 {
				break
			}
		}
	}
	if err := apimeta.SetList(list, items); err != nil {
		return fmt.Errorf("set the items of %s: %w", gvk, err)
	}
	list.SetResourceVersion(resourceVersion)
	return nil
}

func (m *member) isLaunched() bool {
	select {
	case <-m.launched:
		return true
	default:
		return false
	}
}
