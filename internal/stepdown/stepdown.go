// Package stepdown decides what to do about spec.stepDownRequest: a
// person's request that the active server give up leadership once.
package stepdown

import "github.com/openbao/operator/api/v1alpha1"

// Action is what the operator does about the request in this pass.
type Action int

const (
	// None: no request, or the current one was handled.
	None Action = iota
	// Wait: a request is pending but the cluster is not ready for it (not
	// initialized, a rollout runs, which steps down on its own terms).
	Wait
	// StepDown: ask the active server to step down.
	StepDown
	// NoActiveServer: record the request as handled without a server to
	// ask; an election is already under way or quorum is lost.
	NoActiveServer
)

// Decide looks at the request, the status being built and whether the
// operator can reach OpenBao with a token allowed to step down (its own
// identity, or the one spec.upgrade names).
func Decide(request string, status *v1alpha1.OpenBaoClusterStatus, canStepDown bool) Action {
	switch {
	case request == "" || (status.StepDown != nil && status.StepDown.Request == request):
		return None
	case !status.Initialized || status.Upgrade != nil || !canStepDown:
		return Wait
	case status.ActiveLeader == "":
		return NoActiveServer
	default:
		return StepDown
	}
}
