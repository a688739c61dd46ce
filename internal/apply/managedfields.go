package apply

import (
	"crypto/sha256"
	"encoding/hex"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// The operator reads one entry of its cached objects' managedFields: its
// own apply entry, which tells the Applier whether anyone changed a field
// it owns since its last apply. Every other entry (the kubelet's on each
// pod, the controllers', kubectl's) costs memory in the cache for nothing:
// at a thousand clusters they were its largest single holder.

// TrimManagedFields is the cache's transform: of each object's
// managedFields it keeps the apply entry of fieldManager alone.
//
// A cached object is never written back whole with such a trimmed list:
// an update (PUT) that carries managedFields replaces the object's with
// them, which would drop the others' entries. That holds because the
// operator updates only objects it does not apply (Secrets, tenants), whose
// list the transform leaves empty, and an update with none keeps the
// stored ones; merge patches carry no managedFields, and status updates
// ignore them.
func TrimManagedFields(fieldManager string) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		o, ok := obj.(metav1.Object)
		if !ok {
			return obj, nil
		}
		var kept []metav1.ManagedFieldsEntry
		if mf, found := ownApplyEntry(o, fieldManager); found {
			kept = []metav1.ManagedFieldsEntry{mf}
		}
		o.SetManagedFields(kept)
		return obj, nil
	}
}

func ownApplyEntry(obj metav1.Object, fieldManager string) (metav1.ManagedFieldsEntry, bool) {
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager == fieldManager && mf.Operation == metav1.ManagedFieldsOperationApply && mf.Subresource == "" && mf.FieldsV1 != nil {
			return mf, true
		}
	}
	return metav1.ManagedFieldsEntry{}, false
}

// ownedFields identifies the operator's apply entry in the object's
// managedFields by a digest of its field set ("" without one): the Applier
// keeps one per object it applied, and compares it with the cached
// object's.
func (a *Applier) ownedFields(obj metav1.Object) string {
	mf, ok := ownApplyEntry(obj, a.fieldManager)
	if !ok {
		return ""
	}
	sum := sha256.Sum256(mf.FieldsV1.Raw)
	return hex.EncodeToString(sum[:])
}
