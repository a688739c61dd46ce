package controllers

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/openbao/operator/api/v1alpha1"
	decide "github.com/openbao/operator/internal/admission"
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
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("the admission request's user: %w", err)
	}
	u := req.UserInfo
	var extra map[string]authorizationv1.ExtraValue
	if len(u.Extra) > 0 {
		extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	var errs field.ErrorList
	for _, a := range checks {
		attrs := a.Attributes
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, Groups: u.Groups, UID: u.UID, Extra: extra, ResourceAttributes: &attrs,
		}}
		if err := rr.reviews.Create(ctx, sar); err != nil {
			return nil, fmt.Errorf("ask whether %s may %s %s %s: %w", u.Username, attrs.Verb, attrs.Resource, attrs.Name, err)
		}
		if !sar.Status.Allowed {
			errs = append(errs, decide.Denied(a, u.Username))
		}
	}
	return errs, nil
}
