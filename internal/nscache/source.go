package nscache

import (
	"context"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// kindSource is the source of one kind in one form (typed, unstructured or
// metadata-only), read through the cache's HTTP client with the selectors
// the cache's options give the kind.
type kindSource struct {
	c client.WithWatch
	// opening bounds the requests this cache has in flight to open a list
	// or a watch. Hundreds of namespaces start their watches at once; above
	// the API server's streams per HTTP/2 connection each waiting request
	// dials a connection of its own (most closed again at once: 4x the
	// memory of the watches themselves as a peak, at 200 namespaces).
	opening chan struct{}
	gvk     schema.GroupVersionKind
	form    objectForm
	label   labels.Selector
	field   fields.Selector
	// typedList and typedObject are the scheme's types of the kind (typed
	// form only).
	typedList   runtime.Object
	typedObject client.Object
}

// newSource returns the source of a kind in a form.
func newSource(c client.WithWatch, opening chan struct{}, opts cache.Options, key kindKey) (*kindSource, error) {
	src := &kindSource{c: c, opening: opening, gvk: key.gvk, form: key.form,
		label: opts.DefaultLabelSelector, field: opts.DefaultFieldSelector}
	if key.form == typed {
		listGVK := key.gvk.GroupVersion().WithKind(key.gvk.Kind + "List")
		l, err := opts.Scheme.New(listGVK)
		if err != nil {
			return nil, fmt.Errorf("make a %s: %w", listGVK, err)
		}
		obj, err := newTyped(opts.Scheme, key.gvk)
		if err != nil {
			return nil, err
		}
		src.typedList, src.typedObject = l, obj
	}
	for obj, by := range opts.ByObject {
		gvk, err := apiutil.GVKForObject(obj, opts.Scheme)
		if err != nil || gvk != key.gvk {
			continue
		}
		if by.Label != nil {
			src.label = by.Label
		}
		if by.Field != nil {
			src.field = by.Field
		}
	}
	return src, nil
}

func (k *kindSource) listOptions(ns string) *client.ListOptions {
	return &client.ListOptions{Namespace: ns, LabelSelector: k.label, FieldSelector: k.field}
}

func (k *kindSource) list(ctx context.Context, ns string) ([]runtime.Object, string, error) {
	list := k.newList().(client.ObjectList)
	if err := k.open(ctx, func() error { return k.c.List(ctx, list, k.listOptions(ns)) }); err != nil {
		return nil, "", fmt.Errorf("list %s in namespace %s: %w", k.gvk.Kind, ns, err)
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, "", fmt.Errorf("extract the items of %s in namespace %s: %w", k.gvk.Kind, ns, err)
	}
	for _, it := range items {
		// Lists do not carry their items' kind; the reflector checks an
		// unstructured object's against the informer's.
		if u, ok := it.(*unstructured.Unstructured); ok {
			u.SetGroupVersionKind(k.gvk)
		}
	}
	return items, list.GetResourceVersion(), nil
}

func (k *kindSource) watch(ctx context.Context, ns, resourceVersion string) (watch.Interface, error) {
	opts := k.listOptions(ns)
	opts.Raw = &metav1.ListOptions{ResourceVersion: resourceVersion, AllowWatchBookmarks: true}
	var w watch.Interface
	err := k.open(ctx, func() (err error) {
		w, err = k.c.Watch(ctx, k.newList().(client.ObjectList), opts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("watch %s in namespace %s: %w", k.gvk.Kind, ns, err)
	}
	return w, nil
}

// open runs a request that lists or opens a watch once fewer than
// cap(k.opening) others are under way.
func (k *kindSource) open(ctx context.Context, request func() error) error {
	select {
	case k.opening <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-k.opening }()
	return request()
}

func (k *kindSource) newList() runtime.Object {
	listGVK := k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List")
	switch k.form {
	case unstructuredForm:
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(listGVK)
		return l
	case metadataForm:
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(listGVK)
		return l
	}
	return k.typedList.DeepCopyObject()
}

func (k *kindSource) stub(ns, name string) runtime.Object {
	var obj client.Object
	switch k.form {
	case unstructuredForm:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(k.gvk)
		obj = u
	case metadataForm:
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(k.gvk)
		obj = m
	default:
		obj = k.typedObject.DeepCopyObject().(client.Object)
	}
	obj.SetNamespace(ns)
	obj.SetName(name)
	return obj
}
