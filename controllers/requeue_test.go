package controllers

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
)

func TestResultPriorities(t *testing.T) {
	r := &OpenBaoClusterReconciler{ResyncPeriod: 10 * time.Minute}
	for _, tc := range []struct {
		name     string
		requeue  time.Duration
		stepErr  error
		after    time.Duration
		priority *int
	}{
		{"a poll a step asked for is due work at normal priority", 30 * time.Second, nil, 30 * time.Second, ptr.To(0)},
		{"a pass that asked for nothing waits for the resync at low priority", 0, nil, 10 * time.Minute, ptr.To(handler.LowPriority)},
		{"a wish beyond the resync is the resync", time.Hour, nil, 10 * time.Minute, ptr.To(handler.LowPriority)},
		{"a failed pass keeps the event's priority for its backoff", 30 * time.Second, fmt.Errorf("boom"), 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := r.result(&pass{requeue: tc.requeue}, tc.stepErr)
			if got.RequeueAfter != tc.after || !ptrEqual(got.Priority, tc.priority) {
				t.Fatalf("result = after %s, priority %v; want %s, %v", got.RequeueAfter, deref(got.Priority), tc.after, deref(tc.priority))
			}
		})
	}
}

// TestAPollIsNotStarvedByBusierClusters plays controller-runtime's
// priority queue as the controller drives it: a standby, last started by
// an event of the informer's initial list (low priority), asks for its
// poll 30 ms later while other clusters' events keep the workers busy. Its
// requeue is served in turn; with the event's low priority kept, it waited
// for as long as others had work.
func TestAPollIsNotStarvedByBusierClusters(t *testing.T) {
	q := priorityqueue.New[string]("starvation")
	defer q.ShutDown()
	r := &OpenBaoClusterReconciler{ResyncPeriod: 10 * time.Minute}
	res := r.result(&pass{requeue: 30 * time.Millisecond}, nil)
	priority := handler.LowPriority // the event that started the pass
	if res.Priority != nil {
		priority = *res.Priority
	}
	q.AddWithOpts(priorityqueue.AddOpts{After: res.RequeueAfter, Priority: ptr.To(priority)}, "standby")
	busy := 0
	q.AddWithOpts(priorityqueue.AddOpts{}, fmt.Sprint("busy-", busy))
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		key, _, _ := q.GetWithPriority()
		if key == "standby" {
			t.Logf("the standby's poll was served after %d passes of busier clusters", busy)
			return
		}
		busy++
		// Each pass of a busy cluster sees another event arrive first.
		q.AddWithOpts(priorityqueue.AddOpts{}, fmt.Sprint("busy-", busy))
		q.Done(key)
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the standby's poll was not served in 2s while %d passes of busier clusters were", busy)
}

func ptrEqual(a, b *int) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }

func deref(p *int) any {
	if p == nil {
		return "kept"
	}
	return *p
}
