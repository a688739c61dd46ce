package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/openbao/operator/api/v1alpha1"
)

// reconcileDelegatedFields holds, when the operator runs without its
// webhook, every cluster to the platform's allow-list of the fields the
// operator copies into its Pods, Services and Ingresses (delegated.Outside,
// the webhook's rule too): nothing is applied for a cluster that sets one
// outside it, and the servers that run stay as they are. With the webhook
// the step does nothing: the webhook let through only what the allow-list
// holds or the author may create themselves, and the controller cannot
// know the author.
func (r *OpenBaoClusterReconciler) reconcileDelegatedFields(_ context.Context, p *pass) error {
	if r.HeldFields == nil {
		return nil
	}
	var errs field.ErrorList
	for _, f := range r.HeldFields.Outside(p.cluster) {
		errs = append(errs, f.Error(""))
	}
	if len(errs) == 0 {
		return nil
	}
	return p.hold(v1alpha1.ReasonFieldNotAllowed, "FieldPolicy", errs.ToAggregate().Error())
}
