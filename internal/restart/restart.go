// Package restart decides what to do about spec.restartRequest: a
// person's request that every server restart once, through the same
// Raft-aware rollout as any change of the pod template.
package restart

import "github.com/openbao/operator/api/v1alpha1"

// Action is what the operator does about the request in this pass.
type Action int

const (
	// None: no request, or the current one is recorded and either still
	// rolling or complete.
	None Action = iota
	// Record: a new request. The pass records it in status.restart, and
	// the chart renders it into the pod template in the same pass, which
	// starts the rollout.
	Record
	// Complete: every server runs a template that carries the recorded
	// request; the pass stamps status.restart.completedTime.
	Complete
)

// Decide looks at the request, the cluster's generation and the status
// being built (after the rollout step). It is pure and idempotent: a
// request already recorded is never recorded again, so an operator
// restart in the middle of the rollout renders the same template and the
// rollout carries on where status.upgrade left it.
func Decide(request string, status *v1alpha1.OpenBaoClusterStatus) Action {
	r := status.Restart
	switch {
	case request != "" && (r == nil || r.Request != request):
		return Record
	case r != nil && r.CompletedTime == nil && status.Upgrade == nil && status.SettledGeneration >= r.Generation:
		return Complete
	default:
		return None
	}
}
