package controllers

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/bootstrap"
)

// setCondition sets one condition; its transition time changes only when
// its status does.
func setCondition(status *v1alpha1.OpenBaoClusterStatus, c *v1alpha1.OpenBaoCluster, now time.Time,
	condType string, value bool, reason, message string) {
	s := metav1.ConditionFalse
	if value {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: condType, Status: s, Reason: reason, Message: truncate(message),
		ObservedGeneration: c.Generation, LastTransitionTime: metav1.NewTime(now),
	})
}

// maxMessage keeps condition messages within what kubectl shows usefully
// and far below the API's 32 KiB limit.
const maxMessage = 1024

func truncate(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	return msg[:maxMessage-3] + "..."
}

// apiReason shortens an API server error for a condition message. Rendered
// objects hold no secret values, so their validation errors may be shown.
func apiReason(err error) string { return truncate(err.Error()) }

// degradedReasons are condition reasons that need a person: a retry alone
// will not clear them.
var degradedReasons = map[string]bool{
	bootstrap.ReasonPodCrashLooping: true, bootstrap.ReasonPodNotStarting: true,
	bootstrap.ReasonStaleRootTokenSecret: true, bootstrap.ReasonRootTokenLost: true, bootstrap.ReasonRetainedData: true,
	bootstrap.ReasonInitFailed: true, bootstrap.ReasonRootTokenSecretUnwritable: true,
	v1alpha1.ReasonStaticKeyInvalid: true, v1alpha1.ReasonInvalidExternalSecrets: true,
	v1alpha1.ReasonExternalSecretWithoutCA:      true,
	v1alpha1.ReasonInvalidSchedule:              true,
	bootstrap.ReasonRevokeRefusedNoRecoveryKeys: true, bootstrap.ReasonRecoveryKeysUnavailable: true,
}

// summarizeDegraded sets Degraded from the problems the steps recorded: the
// first names the reason, the others join the message. Without problems
// it is False once the children were applied; a pass that ended before
// leaves it as it was.
func summarizeDegraded(p *pass) {
	if len(p.problems) == 0 {
		if p.reconciled != "" {
			p.setCondition(v1alpha1.ConditionDegraded, false, v1alpha1.ReasonReconciled, p.reconciled)
		}
		return
	}
	msg := p.problems[0].message
	for _, other := range p.problems[1:] {
		msg += "; also " + other.reason + ": " + other.message
	}
	p.setCondition(v1alpha1.ConditionDegraded, true, p.problems[0].reason, msg)
}

// phase summarizes the conditions and status for humans and printer
// columns; restoring says an OpenBaoRestore holds the cluster.
func phase(c *v1alpha1.OpenBaoCluster, status *v1alpha1.OpenBaoClusterStatus, restoring bool) v1alpha1.ClusterPhase {
	switch {
	case c.Spec.Paused:
		return v1alpha1.PhasePaused
	case meta.IsStatusConditionTrue(status.Conditions, v1alpha1.ConditionDegraded) || anyDegradedReason(status):
		return v1alpha1.PhaseDegraded
	case meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionDegraded) == nil:
		return v1alpha1.PhasePending
	case restoring:
		return v1alpha1.PhaseRestoring
	case status.Upgrade != nil:
		return v1alpha1.PhaseUpgrading
	case status.Initialized && status.ReadyReplicas >= c.Spec.Replicas &&
		meta.IsStatusConditionTrue(status.Conditions, v1alpha1.ConditionAvailable):
		return v1alpha1.PhaseRunning
	default:
		return v1alpha1.PhaseInitializing
	}
}

// anyDegradedReason skips Ready, which repeats another condition's reason:
// read mid-pass, a Ready of the last pass would keep a cleared cause.
func anyDegradedReason(status *v1alpha1.OpenBaoClusterStatus) bool {
	for _, cond := range status.Conditions {
		if degradedReasons[cond.Reason] && cond.Type != v1alpha1.ConditionReady {
			return true
		}
	}
	return false
}

func controllerOptions(maxConcurrent int) controller.Options {
	if maxConcurrent < 1 {
		maxConcurrent = 1
	}
	return controller.Options{MaxConcurrentReconciles: maxConcurrent}
}
