package apply_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/apply"
)

// standing builds the metadata of an object already at a child's name.
func standing(labels map[string]string, refs ...metav1.OwnerReference) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: "bao", Namespace: "ns", Labels: labels, OwnerReferences: refs}
}

var managed = map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelCluster: "bao"}

func TestClaim(t *testing.T) {
	ours, theirs := ref("owner-uid", true), ref("other-uid", true)
	cases := map[string]struct {
		existing *metav1.ObjectMeta
		refused  string // a part of the reason; empty: applied
	}{
		"a free name is applied":                   {},
		"the cluster's own child is applied again": {existing: standing(managed, ours)},
		"an object of the namespace's own, with no owner, is refused": {
			existing: standing(nil), refused: "has no controller"},
		"an object labelled as ours but with no controller is refused": {
			existing: standing(managed), refused: "has no controller"},
		"another cluster's child is refused, naming that cluster": {
			existing: standing(managed, theirs), refused: "controlled by OpenBaoCluster bao, not by this cluster"},
		"an object the cluster only co-owns is refused": {
			existing: standing(managed, ref("owner-uid", false)), refused: "has no controller"},
		"an object controlled by a Deployment that also lists the cluster as owner is refused": {
			existing: standing(managed, ref("owner-uid", false), metav1.OwnerReference{
				APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "web-uid", Controller: ptrTo(true)}),
			refused: "controlled by Deployment web"},
		"an object naming the cluster as controller without the operator's label is refused": {
			existing: standing(map[string]string{v1alpha1.LabelCluster: "bao"}, ours), refused: "lacks the label"},
		"an object with the managed-by label of another tool is refused": {
			existing: standing(map[string]string{v1alpha1.LabelManagedBy: "Helm"}, ours), refused: "lacks the label"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var existing metav1.Object
			if tc.existing != nil {
				existing = tc.existing
			}
			got := apply.Claim("owner-uid", "NetworkPolicy", "deny-all", existing)
			switch {
			case tc.refused == "" && got != nil:
				t.Fatalf("refused: %s", got)
			case tc.refused != "" && got == nil:
				t.Fatal("applied, want refused")
			case got != nil && (!strings.Contains(got.Why, tc.refused) || got.Kind != "NetworkPolicy" || got.Name != "deny-all"):
				t.Fatalf("refusal %q, want NetworkPolicy deny-all and %q", got, tc.refused)
			}
		})
	}
}

func TestClaimRefusesEverythingForAnOwnerWithoutUID(t *testing.T) {
	if apply.Claim("", "Service", "bao", standing(managed, ref("", true))) == nil {
		t.Fatal("an owner without a UID claimed an object whose controller has no UID either")
	}
}

func TestTakenErrorNamesEveryObjectAndWhatToDo(t *testing.T) {
	err := &apply.TakenError{Refusals: []apply.Refusal{
		{Kind: "NetworkPolicy", Name: "deny-all", Why: "exists and was not made for this cluster (it has no controller)"},
		{Kind: "Service", Name: "deny-all", Why: "exists and is controlled by Deployment web, not by this cluster"},
	}}
	for _, want := range []string{"NetworkPolicy deny-all exists", "Service deny-all exists", "delete or rename the object", "another name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err.Error(), want)
		}
	}
}

// FuzzClaim holds the invariant: the operator never applies over, nor
// prunes, an object whose controller is not this cluster, nor one without
// the operator's label.
func FuzzClaim(f *testing.F) {
	f.Add(true, "owner-uid", true, "owner-uid", true, v1alpha1.ManagedByValue, "")
	f.Add(true, "owner-uid", false, "", false, v1alpha1.ManagedByValue, "")
	f.Add(true, "other-uid", true, "owner-uid", false, v1alpha1.ManagedByValue, "owner-uid")
	f.Add(true, "", true, "", true, "", "")
	f.Add(false, "", false, "", false, "", "")
	f.Fuzz(func(t *testing.T, exists bool, uid1 string, ctrl1 bool, uid2 string, ctrl2 bool, managedBy, ownerUID string) {
		owner := types.UID(ownerUID)
		var existing metav1.Object
		if exists {
			refs := []metav1.OwnerReference{
				{Kind: "OpenBaoCluster", Name: "a", UID: types.UID(uid1), Controller: ptrTo(ctrl1)},
				{Kind: "Deployment", Name: "b", UID: types.UID(uid2), Controller: ptrTo(ctrl2)},
			}
			existing = standing(map[string]string{v1alpha1.LabelManagedBy: managedBy}, refs...)
		}
		if exists {
			cluster := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "ns", UID: owner}}
			listed := metav1.PartialObjectMetadata{ObjectMeta: *existing.(*metav1.ObjectMeta)}
			listed.SetGroupVersionKind(configMapGVK)
			if left := apply.Leftovers(cluster, []metav1.PartialObjectMetadata{listed}, nil); len(left) > 0 && !apply.Ours(owner, existing) {
				t.Fatal("pruning would delete an object that is not the cluster's")
			}
		}
		r := apply.Claim(owner, "Service", "bao", existing)
		if r != nil && (r.Why == "" || r.Kind != "Service" || r.Name != "bao") {
			t.Fatalf("a refusal that does not say what and why: %+v", r)
		}
		if r != nil || existing == nil {
			return
		}
		ctrl := metav1.GetControllerOfNoCopy(existing)
		if owner == "" || ctrl == nil || ctrl.UID != owner {
			t.Fatalf("applied over an object controlled by %+v, not by %q", ctrl, owner)
		}
		if existing.GetLabels()[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
			t.Fatal("applied over an object without the operator's label")
		}
		if !apply.Ours(owner, existing) {
			t.Fatal("Claim and Ours disagree")
		}
	})
}

func ptrTo[T any](v T) *T { return &v }
