package controllers

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/restart"
)

// reconcileRestartRequest carries out spec.restartRequest once per value
// (kubectl openbao restart). Recording the request in status.restart is
// all it does: the chart renders status.restart.request into the pod
// template (openbao.org/restart-request) in this same pass, and the
// rollout step rolls the changed template like any other, one server at
// a time, the active one last. The spec changed, so the rollout is the
// spec's (upgrade.CauseOf) and takes no rollout slot. It runs after the
// rollout step, which has just updated status.settledGeneration, and
// before the children step, which renders the template.
func (r *OpenBaoClusterReconciler) reconcileRestartRequest(ctx context.Context, p *pass) error {
	c := p.cluster
	switch restart.Decide(c.Spec.RestartRequest, p.status) {
	case restart.Record:
		request := c.Spec.RestartRequest
		p.status.Restart = &v1alpha1.RestartStatus{Request: request, Time: metav1.NewTime(p.now), Generation: c.Generation}
		ctrl.LoggerFrom(ctx).Info("restarting every server as spec.restartRequest asked", "audit", true,
			"event_type", "openbao.cluster.restart_requested", "request", request, "generation", c.Generation)
		p.record("Normal", v1alpha1.EventRestartRequested, "Restart", fmt.Sprintf(
			"spec.restartRequest %s: the pod template carries it, and every server restarts through the rollout", request))
	case restart.Complete:
		at := metav1.NewTime(p.now)
		p.status.Restart.CompletedTime = &at
		p.record("Normal", v1alpha1.EventRestartCompleted, "Restart", fmt.Sprintf(
			"every server runs the pod template of spec.restartRequest %s", p.status.Restart.Request))
	}
	return nil
}
