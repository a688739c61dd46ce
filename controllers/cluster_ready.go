package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
)

// readyObserved is what a pass saw that Ready is decided from.
type readyObserved struct {
	Paused      bool
	Initialized bool
	// DegradedReason is Degraded's reason when it is True, or the reason
	// of another condition that needs a person; empty for neither.
	DegradedReason, DegradedMessage string
	// Upgrading: a rollout is in progress (status.upgrade or Upgrading).
	Upgrading bool
	// Restoring: an OpenBaoRestore holds the cluster.
	Restoring      bool
	Desired, Ready int32
	Sealed         int
	Available      bool
}

// readyDecision is the Ready condition to set.
type readyDecision struct {
	Ready           bool
	Reason, Message string
}

// decideReady says whether the cluster serves as its spec asks with
// nothing under way; when not, the reason is the first thing in the way,
// in the order a person would fix them.
func decideReady(o readyObserved) readyDecision {
	no := func(reason, msg string) readyDecision { return readyDecision{Reason: reason, Message: msg} }
	switch {
	case o.Paused:
		return no(v1alpha1.ReasonPausedBySpec, "spec.paused holds: the operator does not look at the cluster")
	case o.DegradedReason != "":
		return no(o.DegradedReason, o.DegradedMessage)
	case !o.Initialized:
		return no(v1alpha1.ReasonNotInitialized, "the cluster is not initialized yet")
	case o.Upgrading:
		return no(v1alpha1.ReasonUpgradeInProgress, "a rollout is in progress")
	case o.Restoring:
		return no(v1alpha1.ReasonRestoreInProgress, "an OpenBaoRestore is replacing the cluster's data")
	case o.Ready < o.Desired:
		return no(v1alpha1.ReasonServersNotReady, fmt.Sprintf("%d of %d servers are Ready", o.Ready, o.Desired))
	case o.Sealed > 0:
		return no(v1alpha1.ReasonServersSealed, fmt.Sprintf("%d servers are sealed", o.Sealed))
	case !o.Available:
		return no(v1alpha1.ReasonNoActiveServer, "no server is active and ready")
	}
	return readyDecision{Ready: true, Reason: v1alpha1.ReasonClusterReady,
		Message: fmt.Sprintf("%d of %d servers are Ready and unsealed, and an active server answers", o.Ready, o.Desired)}
}

// observeReady gathers decideReady's input from the status a pass built.
func observeReady(c *v1alpha1.OpenBaoCluster, status *v1alpha1.OpenBaoClusterStatus, sealed int, restoring bool) readyObserved {
	o := readyObserved{
		Paused: c.Spec.Paused, Initialized: status.Initialized, Restoring: restoring,
		Upgrading: status.Upgrade != nil || meta.IsStatusConditionTrue(status.Conditions, v1alpha1.ConditionUpgrading),
		Desired:   c.Spec.Replicas, Ready: status.ReadyReplicas, Sealed: sealed,
		Available: meta.IsStatusConditionTrue(status.Conditions, v1alpha1.ConditionAvailable),
	}
	if d := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionDegraded); d != nil && d.Status == metav1.ConditionTrue {
		o.DegradedReason, o.DegradedMessage = d.Reason, d.Message
		return o
	}
	for _, cond := range status.Conditions {
		if degradedReasons[cond.Reason] && cond.Type != v1alpha1.ConditionReady {
			o.DegradedReason, o.DegradedMessage = cond.Reason, cond.Message
			return o
		}
	}
	return o
}

// summarizeReady sets Ready and the printer column's readyText, after the
// last step and Degraded.
func summarizeReady(p *pass) {
	d := decideReady(observeReady(p.cluster, p.status, sealedServers(p), p.restoring))
	p.setCondition(v1alpha1.ConditionReady, d.Ready, d.Reason, d.Message)
	p.status.ReadyText = fmt.Sprintf("%d/%d", p.status.ReadyReplicas, p.cluster.Spec.Replicas)
}

// oneShotConditions sets Ready and Stalled of a backup or restore from its
// phase: Ready once Succeeded; Stalled once Failed, so that kstatus reads
// a failed one as Failed instead of waiting on it.
func oneShotConditions(conds *[]metav1.Condition, generation int64, now metav1.Time, succeeded, failed bool,
	phase, reason, message string) {
	if reason == "" {
		reason = phase
	}
	if reason == "" {
		reason = "Pending"
	}
	value := metav1.ConditionFalse
	if succeeded {
		value = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: v1alpha1.ConditionReady, Status: value, Reason: reason,
		Message: truncate(message), ObservedGeneration: generation, LastTransitionTime: now})
	if failed {
		meta.SetStatusCondition(conds, metav1.Condition{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue,
			Reason: reason, Message: truncate(message), ObservedGeneration: generation, LastTransitionTime: now})
	}
}

// humanBytes writes n in binary units with one decimal: "1.2 GiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
