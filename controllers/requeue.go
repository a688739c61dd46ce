package controllers

import (
	"time"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/handler"
)

// Priorities of requeues. controller-runtime's queue serves ready items
// strictly by priority, and a requeue keeps the priority of the event that
// started the pass unless the result names one. Events from an informer's
// initial list come at handler.LowPriority, so after a restart every
// object starts low; an object driven only by time (a standby's poll, a
// verification's deadline) then kept that priority through its requeues,
// and waited while event-driven work of other clusters came first, for as
// long as there was such work. A requeue a step asked for is work due at
// that time: normal priority. The periodic resync is a check that may
// wait: low.
const dueWork = 0

// dueAfter is the result of a pass that asked to look again after d (none
// when d is not positive).
func dueAfter(d time.Duration) ctrl.Result {
	if d <= 0 {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: d, Priority: ptr.To(dueWork)}
}

// resyncAfter is the result of a pass that asked for nothing but the
// periodic resync.
func resyncAfter(d time.Duration) ctrl.Result {
	return ctrl.Result{RequeueAfter: d, Priority: ptr.To(handler.LowPriority)}
}
