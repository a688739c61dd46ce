package controllers

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/stepdown"
)

// reconcileStepDownRequest carries out spec.stepDownRequest once per value
// (kubectl openbao step-down): the operator asks the active server to step
// down with its own OpenBao identity, leaves an audit line (in stepDown)
// and records the handled value in status.stepDown. A failed call returns
// the error, so the pass is retried with backoff and the request stays
// pending.
func (r *OpenBaoClusterReconciler) reconcileStepDownRequest(ctx context.Context, p *pass) error {
	request := p.cluster.Spec.StepDownRequest
	switch stepdown.Decide(request, p.status, r.canUseUpgradeToken(p)) {
	case stepdown.None, stepdown.Wait:
		return nil
	case stepdown.NoActiveServer:
		p.status.StepDown = &v1alpha1.StepDownStatus{Request: request, Time: metav1.NewTime(p.now), Result: v1alpha1.StepDownNoActiveServer}
		ctrl.LoggerFrom(ctx).Info("step-down request found no active server", "audit", true,
			"event_type", "openbao.raft.step_down_request", "request", request)
		p.record("Warning", v1alpha1.StepDownNoActiveServer, "StepDown",
			"spec.stepDownRequest found no active server to step down; none was asked")
		return nil
	}
	leader := p.status.ActiveLeader
	if err := r.stepDown(ctx, p, leader, "spec.stepDownRequest "+request); err != nil {
		return err
	}
	p.status.StepDown = &v1alpha1.StepDownStatus{Request: request, Time: metav1.NewTime(p.now), Server: leader, Result: v1alpha1.StepDownRequested}
	p.record("Normal", v1alpha1.StepDownRequested, "StepDown",
		fmt.Sprintf("asked %s to step down as spec.stepDownRequest requested", leader))
	return nil
}
