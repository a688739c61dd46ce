package nscache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// Get reads from the kind's informer once it holds what it listed in the
// object's namespace.
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk, namespaced, err := c.route(obj)
	if err != nil {
		return err
	}
	if !namespaced {
		return c.cluster.Get(ctx, key, obj, opts...)
	}
	if err := c.ready(ctx, keyOf(gvk, obj), obj, key.Namespace); err != nil {
		return err
	}
	err = c.shared.Get(ctx, key, obj, opts...)
	if !c.serves(key.Namespace) {
		// Gone while read: what the informer held there is on its way out.
		return &NotServedError{Namespace: key.Namespace, GVK: gvk}
	}
	return err
}

// ready makes the kind's informer (waiting for its first list, as
// controller-runtime's reads do) and waits until it holds what it listed
// in ns.
func (c *Cache) ready(ctx context.Context, key kindKey, proto client.Object, ns string) error {
	if !c.serves(ns) {
		return &NotServedError{Namespace: ns, GVK: key.gvk}
	}
	if !c.isStarted() {
		return nil // the read answers ErrCacheNotStarted, as controller-runtime's does
	}
	if _, err := c.shared.GetInformer(ctx, proto); err != nil {
		return err
	}
	return c.waitNamespace(ctx, key, ns)
}

// List reads one namespace, or with no namespace every served namespace,
// in the order of their names, honoring the selectors and Limit (which
// truncates: there is no continuation).
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
	proto, err := c.itemOf(gvk, list)
	if err != nil {
		return err
	}
	key := keyOf(gvk, proto)
	if listOpts.Namespace != "" {
		if err := c.ready(ctx, key, proto, listOpts.Namespace); err != nil {
			return err
		}
		err := c.shared.List(ctx, list, &listOpts)
		if !c.serves(listOpts.Namespace) {
			return &NotServedError{Namespace: listOpts.Namespace, GVK: gvk}
		}
		return err
	}
	return c.listAll(ctx, key, proto, list, listOpts)
}

// listAll is List over every served namespace. A namespace removed while
// it runs is left out, as it would be a moment later.
func (c *Cache) listAll(ctx context.Context, key kindKey, proto client.Object, list client.ObjectList, listOpts client.ListOptions) error {
	for _, ns := range c.Namespaces() {
		var notServed *NotServedError
		if err := c.ready(ctx, key, proto, ns); err != nil && !errors.As(err, &notServed) {
			return err
		}
	}
	limit := listOpts.Limit
	listOpts.Limit = 0
	if err := c.shared.List(ctx, list, &listOpts); err != nil {
		return err
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return fmt.Errorf("extract the items of %s: %w", key.gvk, err)
	}
	items = slices.DeleteFunc(items, func(o runtime.Object) bool {
		m, err := apimeta.Accessor(o)
		return err != nil || !c.serves(m.GetNamespace())
	})
	slices.SortStableFunc(items, func(a, b runtime.Object) int {
		return strings.Compare(namespaceOf(a), namespaceOf(b))
	})
	if limit > 0 && int64(len(items)) > limit {
		items = items[:limit]
	}
	if err := apimeta.SetList(list, items); err != nil {
		return fmt.Errorf("set the items of %s: %w", key.gvk, err)
	}
	return nil
}

func namespaceOf(obj runtime.Object) string {
	if m, err := apimeta.Accessor(obj); err == nil {
		return m.GetNamespace()
	}
	return ""
}

// itemOf is an empty object of a list's kind, in the list's form.
func (c *Cache) itemOf(gvk schema.GroupVersionKind, list client.ObjectList) (client.Object, error) {
	switch list.(type) {
	case runtime.Unstructured:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u, nil
	case *metav1.PartialObjectMetadataList:
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		return m, nil
	}
	return newTyped(c.opts.Scheme, gvk)
}
