package restore

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/openbao/operator/api/v1alpha1"
)

// ReasonBootstrapMisconfigured (condition RestoredFromBackup): the
// restore of spec.bootstrap.fromBackup waits for a spec BootstrapRefused
// accepts.
const ReasonBootstrapMisconfigured = "BootstrapMisconfigured"

// BootstrapRefused is the rule spec.bootstrap.fromBackup's identity
// fields are held to; the admission webhook and the fromBackup step (which
// restores nothing while it fails) both call it. The snapshot's operator
// identity is bound to its source: to sourceCluster in sourceNamespace.
//
//   - A source other than this cluster, by name or by namespace, needs
//     tokenSecretRef to bind the identity to this cluster after the
//     restore, or keepSourceIdentity. The CRD checks the name alone (its
//     rules cannot read the namespace).
//   - keepSourceIdentity logs in with the source's ServiceAccounts, bound
//     in the snapshot to the source's namespace: from another namespace
//     the operator would have to mint tokens there, which it never does
//     for a cluster in this one, so it is refused.
func BootstrapRefused(c *v1alpha1.OpenBaoCluster) field.ErrorList {
	fb := c.FromBackup()
	if fb == nil {
		return nil
	}
	p := field.NewPath("spec", "bootstrap", "fromBackup")
	srcNS := fb.SourceNamespaceName(c.Namespace)
	switch {
	case fb.KeepSourceIdentity && srcNS != c.Namespace:
		return field.ErrorList{field.Invalid(p.Child("keepSourceIdentity"), true, fmt.Sprintf(
			"the snapshot's identity is bound to ServiceAccounts of namespace %s (sourceNamespace), and the operator logs in "+
				"only with ServiceAccounts of this cluster's namespace %s: set tokenSecretRef instead, to bind the identity "+
				"to this cluster", srcNS, c.Namespace))}
	case fb.KeepSourceIdentity || fb.TokenSecretRef != nil:
		return nil
	case srcNS != c.Namespace || fb.SourceClusterName(c.Name) != c.Name:
		return field.ErrorList{field.Required(p.Child("tokenSecretRef"), fmt.Sprintf(
			"the snapshot's operator identity is bound to its source, cluster %s of namespace %s, not to this cluster: "+
				"name a Secret with a token of the source that may write auth/openbao-operator (such as its root token), "+
				"so the operator binds the identity to this cluster after the restore, or set keepSourceIdentity: true "+
				"(a source in this namespace only)", fb.SourceClusterName(c.Name), srcNS))}
	}
	return nil
}
