package controllers

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/openbao/operator/api/v1alpha1"
	decide "github.com/openbao/operator/internal/admission"
	"github.com/openbao/operator/internal/delegated"
)

// The webhook asks the API server whether the author of an object may use
// what it names (admission.AccessChecks).
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// referenceRules applies, at admission, the two rules on what a spec
// names: operator-managed Secrets are never credentials (the rule the
// controllers enforce too), and a spec names only what its author may use
// (a SubjectAccessReview for the request's user, which only the webhook
// knows). On an update only what is named anew is checked.
type referenceRules struct {
	// reader reads Secret labels and drill sources, uncached.
	reader client.Reader
	// reviews creates SubjectAccessReviews.
	reviews client.Client
}

// cluster checks a new cluster (old nil) or a change of old into c: what
// it names, and the rights its deletion policy hands over.
func (rr referenceRules) cluster(ctx context.Context, old, c *v1alpha1.OpenBaoCluster) (field.ErrorList, error) {
	refs := decide.ClusterReferences(c)
	if old != nil {
		refs = refs.NewSince(decide.ClusterReferences(old))
	}
	checks := append(decide.AccessChecks(refs, c.Namespace), decide.DeletionPolicyChecks(old, c, c.Namespace)...)
	if len(checks) == 0 {
		return nil, nil
	}
	o, err := observeManaged(ctx, rr.reader, rr.reader, c, refs.Objects)
	if err != nil {
		return nil, err
	}
	errs := decide.ManagedSecretRefs(refs.Objects, o)
	denied, err := rr.authorMay(ctx, checks)
	return append(errs, denied...), err
}

// authorMay asks one SubjectAccessReview per check for the user, groups,
// UID and extra of the admission request.
func (rr referenceRules) authorMay(ctx context.Context, checks []decide.Access) (field.ErrorList, error) {
	var errs field.ErrorList
	for _, a := range checks {
		allowed, user, err := rr.review(ctx, a.Attributes)
		if err != nil {
			return nil, err
		}
		if !allowed {
			errs = append(errs, decide.Denied(a, user))
		}
	}
	return errs, nil
}

// delegatedFields asks, for each kind the values outside the platform's
// allow-list land in, whether the author may create that kind in the
// namespace (one review per kind); each value of a kind they may not
// create is refused.
func (rr referenceRules) delegatedFields(ctx context.Context, namespace string, outside []delegated.Finding) (field.ErrorList, error) {
	may := map[delegated.Kind]bool{}
	user := requestUser(ctx)
	var errs field.ErrorList
	for _, f := range outside {
		allowed, asked := may[f.Kind]
		if !asked {
			var err error
			allowed, _, err = rr.review(ctx, authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: "create", Group: f.Kind.Group, Resource: f.Kind.Resource,
			})
			if err != nil {
				return nil, err
			}
			may[f.Kind] = allowed
		}
		if !allowed {
			errs = append(errs, f.Error(user))
		}
	}
	return errs, nil
}

// delegatedBase is what c's delegated fields are compared with, values
// equal there being admitted already: the stored cluster on an update; on
// the creation of a restore-drill copy (backup.DrillCopyFor: named and
// labelled so, controlled by its source by UID), its source, whose
// scheduling it copies. Whoever may create the copy may edit the source,
// and so already run those values under an image of their choice.
func (rr referenceRules) delegatedBase(ctx context.Context, old, c *v1alpha1.OpenBaoCluster) (*v1alpha1.OpenBaoCluster, error) {
	name := c.Labels[v1alpha1.LabelDrillOf]
	if old != nil || name == "" {
		return old, nil
	}
	source, err := readCluster(ctx, rr.reader, c.Namespace, name)
	if err != nil || source == nil || c.Name != source.DrillCopyName() || !metav1.IsControlledBy(c, source) {
		return nil, err
	}
	return source, nil
}

// requestUser is the admission request's user name, for messages.
func requestUser(ctx context.Context) string {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return ""
	}
	return req.UserInfo.Username
}

// review asks a SubjectAccessReview of attrs for the user, groups, UID and
// extra of the admission request, and returns the answer and the user.
func (rr referenceRules) review(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return false, "", fmt.Errorf("the admission request's user: %w", err)
	}
	u := req.UserInfo
	var extra map[string]authorizationv1.ExtraValue
	if len(u.Extra) > 0 {
		extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, Groups: u.Groups, UID: u.UID, Extra: extra, ResourceAttributes: &attrs,
	}}
	if err := rr.reviews.Create(ctx, sar); err != nil {
		return false, "", fmt.Errorf("ask whether %s may %s %s %s: %w", u.Username, attrs.Verb, attrs.Resource, attrs.Name, err)
	}
	return sar.Status.Allowed, u.Username, nil
}
