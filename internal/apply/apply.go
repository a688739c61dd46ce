// Package apply makes a rendered set of objects real: server-side apply with
// one field manager and owner references, only where each name is free or
// already the owner's (Claim), then pruning of what is no longer rendered.
// An object whose desired state and whose fields owned by the operator are
// unchanged since the last apply is not sent again, so a reconcile with
// nothing to do writes nothing.
package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Applier applies and prunes the children of owners. It remembers, per
// owner and object, what it last applied, so it must be shared across
// reconciles; Forget releases an owner that is gone.
type Applier struct {
	client       client.Client
	cache        client.Reader
	cached       map[schema.GroupVersionKind]func() client.Object
	live         client.Reader
	fieldManager string

	mu     sync.Mutex
	owners map[types.NamespacedName]*ownerState
	// notServed records when pruning found a kind the cluster does not
	// serve.
	notServed map[schema.GroupVersionKind]time.Time
}

// ownerState is what the Applier remembers of one owner.
type ownerState struct {
	uid  types.UID
	last map[objectKey]appliedState
	// pruned is the rendered set that was last pruned against: until the
	// set changes there is nothing new to prune.
	pruned string
}

type objectKey struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

// appliedState is what the operator sent and what the API server recorded
// as the operator's fields afterwards.
type appliedState struct {
	desiredHash string
	ownedFields string
}

// Options configure an Applier.
type Options struct {
	// Client applies and deletes.
	Client client.Client
	// Cache reads back, after an apply, the objects of the kinds Cached
	// names (an empty typed object of each): an idle reconcile then costs
	// no request. It must hold every object of those kinds the Applier
	// applies.
	Cache  client.Reader
	Cached map[schema.GroupVersionKind]func() client.Object
	// Live reads the metadata of other kinds, and of any kind at a name
	// the cache does not hold as the owner's (the cache holds only
	// labelled objects, so a stranger's object is not in it), and lists
	// leftovers for pruning, uncached: it must never start informers.
	Live         client.Reader
	FieldManager string
}

// New returns an Applier.
func New(o Options) *Applier {
	return &Applier{
		client: o.Client, cache: o.Cache, cached: o.Cached, live: o.Live, fieldManager: o.FieldManager,
		owners: map[types.NamespacedName]*ownerState{}, notServed: map[schema.GroupVersionKind]time.Time{},
	}
}

// Forget releases what the Applier remembers of an owner that is gone.
func (a *Applier) Forget(owner types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.owners, owner)
}

// Remembers says whether the Applier holds state for the owner.
func (a *Applier) Remembers(owner types.NamespacedName) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.owners[owner] != nil
}

// state returns the owner's state, made afresh for a new UID; call it with
// a.mu held.
func (a *Applier) state(owner client.Object) *ownerState {
	name := client.ObjectKeyFromObject(owner)
	st := a.owners[name]
	if st == nil || st.uid != owner.GetUID() {
		st = &ownerState{uid: owner.GetUID(), last: map[objectKey]appliedState{}}
		a.owners[name] = st
	}
	return st
}

// Result counts what an Apply call did.
type Result struct {
	Applied   []string // kind/name of objects sent to the API server
	Unchanged int      // objects skipped because nothing changed
}

// MissingKindError reports a rendered kind that the cluster does not serve,
// such as a TLSRoute without the Gateway API CRDs.
type MissingKindError struct {
	GVK schema.GroupVersionKind
	Err error
}

func (e *MissingKindError) Error() string {
	return fmt.Sprintf("%s (%s) is not served by this cluster; install its CRD or disable the feature that renders it",
		e.GVK.Kind, e.GVK.GroupVersion())
}
func (e *MissingKindError) Unwrap() error { return e.Err }

// Apply applies objs in order, each owned by owner. It first reads what
// stands at each object's name and applies nothing when any is taken by an
// object that is not the owner's (a *TakenError naming them all, see
// Claim). Else it stops at the first failure and returns what was applied
// so far.
func (a *Applier) Apply(ctx context.Context, owner client.Object, objs []*unstructured.Unstructured) (Result, error) {
	ownerRef, err := controllerRef(owner, a.client)
	if err != nil {
		return Result{}, err
	}
	existing, err := a.claimAll(ctx, owner, objs)
	if err != nil {
		return Result{}, err
	}
	var res Result
	for i, obj := range objs {
		obj.SetOwnerReferences([]metav1.OwnerReference{ownerRef})
		applied, err := a.applyOne(ctx, owner, obj, existing[i])
		if err != nil {
			return res, err
		}
		if applied {
			res.Applied = append(res.Applied, obj.GetKind()+"/"+obj.GetName())
		} else {
			res.Unchanged++
		}
	}
	return res, nil
}

// claimAll reads the object at each rendered name (nil where there is
// none) and refuses the set when any of them is not the owner's. The reads
// are independent and, for a new cluster, each goes to the API server (the
// cache holds none of its children yet): up to claimReads run at once, as
// one after another they were half of a new cluster's first pass
// (bench-scale).
func (a *Applier) claimAll(ctx context.Context, owner client.Object, objs []*unstructured.Unstructured) ([]metav1.Object, error) {
	existing := make([]metav1.Object, len(objs))
	errs := make([]error, len(objs))
	sem := make(chan struct{}, claimReads)
	var wg sync.WaitGroup
	for i, obj := range objs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			existing[i], errs[i] = a.readExisting(ctx, owner, keyOf(obj))
		})
	}
	wg.Wait()
	var refusals []Refusal
	for i, obj := range objs {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if existing[i] == nil {
			continue
		}
		key := keyOf(obj)
		if r := Claim(owner.GetUID(), key.gvk.Kind, key.name, existing[i]); r != nil {
			refusals = append(refusals, *r)
		}
	}
	if len(refusals) > 0 {
		return nil, &TakenError{Refusals: refusals}
	}
	return existing, nil
}

// claimReads bounds the reads of one claim that run at once.
const claimReads = 4

// readExisting returns the object of that kind and name, or nil when there
// is none. The cache holds only objects with the cluster label, so what
// it does not hold, or holds but not as the owner's, is read again from
// the API server: a stranger's object must not pass for a free name, and
// a stale cache must not refuse a child the operator just made.
func (a *Applier) readExisting(ctx context.Context, owner client.Object, key objectKey) (metav1.Object, error) {
	name := types.NamespacedName{Namespace: key.namespace, Name: key.name}
	if newObject, ok := a.cached[key.gvk]; ok {
		obj := newObject()
		err := a.cache.Get(ctx, name, obj)
		if err == nil && Ours(owner.GetUID(), obj) {
			return obj, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read %s %s/%s: %w", key.gvk.Kind, key.namespace, key.name, err)
		}
	}
	md := &metav1.PartialObjectMetadata{}
	md.SetGroupVersionKind(key.gvk)
	err := a.live.Get(ctx, name, md)
	switch {
	case err == nil:
		return md, nil
	case apierrors.IsNotFound(err), isNoMatch(err):
		// Nothing of a kind the cluster does not serve exists; its apply
		// reports the missing kind, in order.
		return nil, nil
	}
	return nil, fmt.Errorf("read %s %s/%s: %w", key.gvk.Kind, key.namespace, key.name, err)
}

func (a *Applier) applyOne(ctx context.Context, owner client.Object, obj *unstructured.Unstructured, existing metav1.Object) (bool, error) {
	key := keyOf(obj)
	desired, err := hashObject(obj)
	if err != nil {
		return false, err
	}
	if a.unchanged(owner, key, desired, existing) {
		return false, nil
	}
	sent := obj.DeepCopy()
	err = a.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(sent),
		client.FieldOwner(a.fieldManager), client.ForceOwnership)
	if isNoMatch(err) {
		return false, &MissingKindError{GVK: key.gvk, Err: err}
	}
	if err != nil {
		return false, fmt.Errorf("apply %s %s/%s: %w", key.gvk.Kind, key.namespace, key.name, err)
	}
	a.mu.Lock()
	a.state(owner).last[key] = appliedState{desiredHash: desired, ownedFields: a.ownedFields(sent)}
	a.mu.Unlock()
	return true, nil
}

// unchanged reports whether the object was applied with the same desired
// state and nobody has since taken or changed a field the operator owns:
// any such write changes the operator's managedFields entry. existing is
// the object as read before the apply (nil: there is none). A cache that
// lags the last apply costs one needless apply, never a missed one.
func (a *Applier) unchanged(owner client.Object, key objectKey, desired string, existing metav1.Object) bool {
	a.mu.Lock()
	last, ok := a.state(owner).last[key]
	a.mu.Unlock()
	if !ok || last.desiredHash != desired || existing == nil {
		return false
	}
	return a.ownedFields(existing) == last.ownedFields
}

// isNoMatch says the cluster does not serve the kind (a missing CRD).
func isNoMatch(err error) bool { return err != nil && meta.IsNoMatchError(err) }

func keyOf(obj client.Object) objectKey {
	return objectKey{gvk: obj.GetObjectKind().GroupVersionKind(), namespace: obj.GetNamespace(), name: obj.GetName()}
}

func hashObject(obj *unstructured.Unstructured) (string, error) {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return "", fmt.Errorf("encode %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

func controllerRef(owner client.Object, c client.Client) (metav1.OwnerReference, error) {
	gvk, err := c.GroupVersionKindFor(owner)
	if err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("kind of owner %s: %w", owner.GetName(), err)
	}
	isController, blockDeletion := true, true
	return metav1.OwnerReference{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
		Name: owner.GetName(), UID: owner.GetUID(),
		Controller: &isController, BlockOwnerDeletion: &blockDeletion,
	}, nil
}
