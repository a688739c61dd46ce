package apply_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/apply"
)

// TestTrimManagedFieldsKeepsTheOperatorsApplyEntryAlone: of a cached
// object's managedFields the transform keeps the operator's apply entry
// (what the Applier compares), and drops the others: the kubelet's status
// entry, another manager's apply entry, the operator's own updates and its
// entry for a subresource. An object without such an entry keeps none, so
// an update sent from the cache carries none and the API server keeps the
// stored ones.
func TestTrimManagedFieldsKeepsTheOperatorsApplyEntryAlone(t *testing.T) {
	fields := func(s string) *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(s)} }
	own := metav1.ManagedFieldsEntry{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: fields(`{"f:data":{}}`)}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bao-0", ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: fields(`{"f:status":{}}`)},
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: fields(`{"f:metadata":{}}`)},
		{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields(`{"f:metadata":{}}`)},
		{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, Subresource: "status", FieldsV1: fields(`{"f:status":{}}`)},
		own,
	}}}
	trim := apply.TrimManagedFields(v1alpha1.FieldManager)
	out, err := trim(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod).ManagedFields
	if len(got) != 1 || got[0].Manager != own.Manager || got[0].Subresource != "" || string(got[0].FieldsV1.Raw) != string(own.FieldsV1.Raw) {
		t.Errorf("kept %+v, want the operator's apply entry alone", got)
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bao-unseal-key", ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields(`{"f:data":{}}`)},
	}}}
	if out, _ := trim(secret); len(out.(*corev1.Secret).ManagedFields) != 0 {
		t.Errorf("a Secret the operator created (an update entry) keeps %+v, want none", out.(*corev1.Secret).ManagedFields)
	}

	tombstone := toolscache.DeletedFinalStateUnknown{Key: "ns/bao-0", Obj: pod}
	if out, err := trim(tombstone); err != nil || out.(toolscache.DeletedFinalStateUnknown).Key != "ns/bao-0" {
		t.Errorf("a tombstone: %v, %v; want it passed through", out, err)
	}
}
