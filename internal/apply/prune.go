package apply

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Leftovers returns the objects in live that keep does not hold and that
// are the owner's (Ours: controlled by it and labelled as managed by this
// operator). It is the pure half of pruning: what it returns is deleted,
// so an object of someone else's never is.
func Leftovers(owner client.Object, live []metav1.PartialObjectMetadata, keep []*unstructured.Unstructured) []metav1.PartialObjectMetadata {
	kept := map[objectKey]bool{}
	for _, obj := range keep {
		kept[keyOf(obj)] = true
	}
	var out []metav1.PartialObjectMetadata
	for _, obj := range live {
		if kept[keyOf(&obj)] || !Ours(owner.GetUID(), &obj) {
			continue
		}
		out = append(out, obj)
	}
	return out
}

// Prune deletes the objects of the given kinds in the owner's namespace that
// carry selector's labels, are controlled by owner and are not in keep.
// Call it only after every object in keep was applied. Kinds the cluster
// does not serve are skipped: nothing of theirs can exist. When keep is the
// set this owner was last pruned against, nothing is listed: only the
// operator creates objects that its owner controls.
func (a *Applier) Prune(ctx context.Context, owner client.Object, kinds []schema.GroupVersionKind,
	selector client.MatchingLabels, keep []*unstructured.Unstructured) ([]string, error) {
	set := keySet(keep)
	a.mu.Lock()
	done := a.state(owner).pruned == set
	a.mu.Unlock()
	if done {
		return nil, nil
	}
	pruned, err := a.prune(ctx, owner, kinds, selector, keep)
	if err == nil {
		a.mu.Lock()
		a.state(owner).pruned = set
		a.mu.Unlock()
	}
	return pruned, err
}

func (a *Applier) prune(ctx context.Context, owner client.Object, kinds []schema.GroupVersionKind,
	selector client.MatchingLabels, keep []*unstructured.Unstructured) ([]string, error) {
	var pruned []string
	for _, gvk := range kinds {
		if a.knownNotServed(gvk) {
			continue
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := a.live.List(ctx, list, client.InNamespace(owner.GetNamespace()), selector)
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			a.markNotServed(gvk)
			continue
		}
		if err != nil {
			return pruned, fmt.Errorf("list %s for pruning: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			list.Items[i].SetGroupVersionKind(gvk)
		}
		for _, obj := range Leftovers(owner, list.Items, keep) {
			if err := a.deleteLeftover(ctx, owner, gvk, obj); err != nil {
				return pruned, err
			}
			pruned = append(pruned, gvk.Kind+"/"+obj.Name)
		}
	}
	return pruned, nil
}

func (a *Applier) deleteLeftover(ctx context.Context, owner client.Object, gvk schema.GroupVersionKind, obj metav1.PartialObjectMetadata) error {
	target := obj.DeepCopy()
	target.SetGroupVersionKind(gvk)
	uid := obj.UID
	err := a.client.Delete(ctx, target, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("prune %s %s/%s: %w", gvk.Kind, obj.Namespace, obj.Name, err)
	}
	a.mu.Lock()
	delete(a.state(owner).last, objectKey{gvk: gvk, namespace: obj.Namespace, name: obj.Name})
	a.mu.Unlock()
	return nil
}

// keySet names a set of objects in a stable order.
func keySet(objs []*unstructured.Unstructured) string {
	names := make([]string, 0, len(objs))
	for _, obj := range objs {
		k := keyOf(obj)
		names = append(names, k.gvk.String()+"|"+k.namespace+"|"+k.name)
	}
	sort.Strings(names)
	return strings.Join(names, "\n")
}

// notServedFor is how long a kind the cluster does not serve (an optional
// CRD) is skipped by pruning without asking discovery again: every owner's
// prune would otherwise look it up anew.
const notServedFor = time.Minute

func (a *Applier) knownNotServed(gvk schema.GroupVersionKind) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.notServed[gvk]
	return ok && time.Since(at) < notServedFor
}

func (a *Applier) markNotServed(gvk schema.GroupVersionKind) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.notServed[gvk] = time.Now()
}
