package admission

import (
	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/openbao/operator/api/v1alpha1"
)

// DeletionPolicyChecks are the questions the webhook asks about the author
// of a cluster (old nil) or of a change of old into c, for its deletion
// policy. DeletePVCs has the operator delete the Raft volumes when the
// cluster is deleted, and DeleteAll also the seal key and root token
// Secrets: both with the operator's rights, on behalf of whoever set the
// policy. So whoever sets it, or widens it, must be allowed to delete
// PersistentVolumeClaims (and, for DeleteAll, Secrets) in the namespace
// themselves. Without this, an author holding only the editor role would
// delete volumes and Secrets through the operator that they could not
// delete by hand. Keeping or narrowing the policy asks nothing.
func DeletionPolicyChecks(old, c *v1alpha1.OpenBaoCluster, namespace string) []Access {
	path := specPath.Child("deletionPolicy")
	var before v1alpha1.DeletionPolicy
	if old != nil {
		before = old.Spec.DeletionPolicy
	}
	var out []Access
	ask := func(resource string) {
		out = append(out, Access{Path: path, Attributes: authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: "delete", Resource: resource}})
	}
	if c.Spec.DeletionPolicy.DeletesVolumes() && (old == nil || !before.DeletesVolumes()) {
		ask("persistentvolumeclaims")
	}
	if c.Spec.DeletionPolicy == v1alpha1.DeletionPolicyDeleteAll && (old == nil || before != v1alpha1.DeletionPolicyDeleteAll) {
		ask("secrets")
	}
	return out
}
