package admission

import (
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/openbao/operator/api/v1alpha1"
)

// RuleAuthorRights is the name the author-rights rule goes by in refusals.
const RuleAuthorRights = "a spec names only what its author may use"

// Access is one question for a SubjectAccessReview of the author of an
// object: may they do Attributes, which the reference at Path hands over?
type Access struct {
	Path       *field.Path
	Name       string
	Attributes authorizationv1.ResourceAttributes
}

// AccessChecks are the questions the webhook asks about the author of an
// object in namespace that names refs; each must be allowed.
//
// A Secret or ConfigMap is used for the object with the operator's
// rights: mounted into its pods or Jobs, copied into its Secrets, sent to
// its servers. The author must be allowed to get it, so that nothing
// reaches their image, their store or their cluster that they could not
// have read and copied themselves.
//
// A named cluster's keys, identity and data are used for the object: a
// bootstrap from another cluster's backup restores its data and copies
// its seal key, and keepSourceIdentity logs in with its service accounts
// (its upgrade and backup roles); a backup runs its executor with its
// store credentials and prunes its older snapshots; a restore overwrites
// its data. The author must be allowed to update that OpenBaoCluster: who
// may update it may already set its image and so reach the same keys and
// data, while get (which the view role grants) would hand a reader the
// power to act as the cluster.
func AccessChecks(refs References, namespace string) []Access {
	var out []Access
	for _, r := range refs.Objects {
		resource := "secrets"
		if r.Kind == KindConfigMap {
			resource = "configmaps"
		}
		out = append(out, Access{Path: r.Path, Name: r.Name, Attributes: authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: "get", Resource: resource, Name: r.Name,
		}})
	}
	for _, c := range refs.Clusters {
		out = append(out, Access{Path: c.Path, Name: c.Name, Attributes: authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: "update", Group: v1alpha1.GroupVersion.Group, Resource: "openbaoclusters", Name: c.Name,
		}})
	}
	return out
}

// Denied is the refusal of a check the authorizer did not allow, naming
// the field, what the author may not do, and the rule.
func Denied(a Access, user string) *field.Error {
	res := a.Attributes.Resource
	if a.Attributes.Group != "" {
		res += "." + a.Attributes.Group
	}
	if a.Name == "" {
		// A deletion policy: it names no object, it hands over a right.
		return field.Forbidden(a.Path, fmt.Sprintf("rule %q: %s may not %s %s in namespace %s, which the operator would do "+
			"with its own rights when the cluster is deleted under this policy; keep deletionPolicy Retain, or get that right",
			RuleAuthorRights, user, a.Attributes.Verb, res, a.Attributes.Namespace))
	}
	return field.Forbidden(a.Path, fmt.Sprintf("rule %q: %s may not %s %s %s in namespace %s, and the operator would use it "+
		"for this object with its own rights; name only what you may %s yourself",
		RuleAuthorRights, user, a.Attributes.Verb, res, a.Name, a.Attributes.Namespace, a.Attributes.Verb))
}
