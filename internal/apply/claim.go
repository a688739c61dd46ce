package apply

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/openbao/operator/api/v1alpha1"
)

// A child is applied with ForceOwnership and the cluster as its
// controller, so applying it over an object someone else made takes that
// object over: its spec becomes the chart's, and deleting the cluster
// deletes it. A cluster named after the namespace's NetworkPolicy
// "deny-all" would replace it. Claim decides, before anything is applied,
// whether a rendered object's place is free or already the cluster's.

// Refusal names a rendered object whose place is taken by an object that
// is not the cluster's, and why it is not.
type Refusal struct {
	Kind string
	Name string
	Why  string
}

func (r Refusal) String() string { return r.Kind + " " + r.Name + " " + r.Why }

// Claim decides whether the object kind/name, rendered for the owner with
// UID owner, may be applied where existing stands (nil: nothing of that
// kind and name exists). It may when the name is free, or when existing
// is ours: controlled by the owner (its controller reference carries the
// owner's UID) and labelled as managed by this operator. Otherwise it
// returns the refusal. It is pure.
func Claim(owner types.UID, kind, name string, existing metav1.Object) *Refusal {
	if existing == nil {
		return nil
	}
	why := notOursBecause(owner, existing)
	if why == "" {
		return nil
	}
	return &Refusal{Kind: kind, Name: name, Why: why}
}

// Ours says whether obj is controlled by the owner with that UID and
// labelled as managed by this operator: the only objects the operator
// applies over or prunes.
func Ours(owner types.UID, obj metav1.Object) bool { return notOursBecause(owner, obj) == "" }

func notOursBecause(owner types.UID, obj metav1.Object) string {
	ref := metav1.GetControllerOfNoCopy(obj)
	switch {
	case owner == "":
		return "exists, and the cluster has no UID yet to compare its controller with"
	case ref == nil:
		return "exists and was not made for this cluster (it has no controller)"
	case ref.UID != owner:
		return fmt.Sprintf("exists and is controlled by %s %s, not by this cluster", ref.Kind, ref.Name)
	case obj.GetLabels()[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue:
		return fmt.Sprintf("exists and names this cluster as controller but lacks the label %s=%s the operator puts on its children",
			v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue)
	}
	return ""
}

// TakenError reports the rendered objects whose names are taken; nothing
// of the rendered set was applied.
type TakenError struct {
	Refusals []Refusal
}

func (e *TakenError) Error() string {
	names := make([]string, 0, len(e.Refusals))
	for _, r := range e.Refusals {
		names = append(names, r.String())
	}
	return strings.Join(names, "; ") +
		". The operator applies none of this cluster's objects while one of their names is taken: " +
		"delete or rename the object in the way if it is not needed, or recreate this cluster under another name"
}
