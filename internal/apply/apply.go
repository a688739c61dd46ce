// Package apply makes a rendered set of objects real: server-side apply with
// one field manager and owner references, then pruning of what is no longer
// rendered. An object whose desired state and whose fields owned by the
// operator are unchanged since the last apply is not sent again, so a
// reconcile with nothing to do writes nothing.
package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Applier applies and prunes the children of owners. It remembers, per
// object, what it last applied, so it must be shared across reconciles.
type Applier struct {
	client       client.Client
	reader       client.Reader // uncached: reads metadata of a few objects, never starts informers
	fieldManager string

	mu   sync.Mutex
	last map[objectKey]appliedState
	// pruned is, per owner, the rendered set that was last pruned against:
	// until the set changes there is nothing new to prune.
	pruned map[types.UID]string
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

// New returns an Applier that writes through c as fieldManager and reads
// object metadata through reader.
func New(c client.Client, reader client.Reader, fieldManager string) *Applier {
	return &Applier{
		client: c, reader: reader, fieldManager: fieldManager,
		last: map[objectKey]appliedState{}, pruned: map[types.UID]string{},
	}
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

// Apply applies objs in order, each owned by owner. It stops at the first
// failure and returns what was applied so far.
func (a *Applier) Apply(ctx context.Context, owner client.Object, objs []*unstructured.Unstructured) (Result, error) {
	ownerRef, err := controllerRef(owner, a.client)
	if err != nil {
		return Result{}, err
	}
	var res Result
	for _, obj := range objs {
		obj.SetOwnerReferences([]metav1.OwnerReference{ownerRef})
		applied, err := a.applyOne(ctx, obj)
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

func (a *Applier) applyOne(ctx context.Context, obj *unstructured.Unstructured) (bool, error) {
	key := keyOf(obj)
	desired, err := hashObject(obj)
	if err != nil {
		return false, err
	}
	unchanged, err := a.unchanged(ctx, key, desired)
	if err != nil {
		return false, err
	}
	if unchanged {
		return false, nil
	}
	sent := obj.DeepCopy()
	err = a.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(sent),
		client.FieldOwner(a.fieldManager), client.ForceOwnership)
	if meta.IsNoMatchError(err) {
		return false, &MissingKindError{GVK: key.gvk, Err: err}
	}
	if err != nil {
		return false, fmt.Errorf("apply %s %s/%s: %w", key.gvk.Kind, key.namespace, key.name, err)
	}
	a.remember(key, appliedState{desiredHash: desired, ownedFields: a.ownedFields(sent)})
	return true, nil
}

// unchanged reports whether the object was applied with the same desired
// state and nobody has since taken or changed a field the operator owns:
// any such write changes the operator's managedFields entry.
func (a *Applier) unchanged(ctx context.Context, key objectKey, desired string) (bool, error) {
	a.mu.Lock()
	last, ok := a.last[key]
	a.mu.Unlock()
	if !ok || last.desiredHash != desired {
		return false, nil
	}
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(key.gvk)
	err := a.reader.Get(ctx, types.NamespacedName{Namespace: key.namespace, Name: key.name}, live)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s %s/%s: %w", key.gvk.Kind, key.namespace, key.name, err)
	}
	return a.ownedFields(live) == last.ownedFields, nil
}

// ownedFields is the operator's apply entry in the object's managedFields.
func (a *Applier) ownedFields(obj metav1.Object) string {
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager == a.fieldManager && mf.Operation == metav1.ManagedFieldsOperationApply && mf.Subresource == "" && mf.FieldsV1 != nil {
			return string(mf.FieldsV1.Raw)
		}
	}
	return ""
}

func (a *Applier) remember(key objectKey, state appliedState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last[key] = state
}

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
