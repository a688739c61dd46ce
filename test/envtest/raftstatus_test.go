package envtest_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/podstate"
)

func (ro *rollout) latest() *v1alpha1.OpenBaoCluster {
	ro.t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(ro.c), c); err != nil {
		ro.t.Fatal(err)
	}
	return c
}

// TestRaftStatusIsReadOncePerResyncPeriodNotEveryPass: a settled cluster's
// passes read no autopilot state until about a resync period after the
// last read; then one pass reads it. A read that tells what status.raft
// already says (only the Raft indexes moved) writes nothing, and counts as
// the last read; a read that tells something new (another leader) is
// published.
func TestRaftStatusIsReadOncePerResyncPeriodNotEveryPass(t *testing.T) {
	ro := newRollout(t, "raft-status", 3)
	r := ro.r.(*controllers.OpenBaoClusterReconciler)
	start := time.Now()
	clock := clocktesting.NewFakePassiveClock(start)
	r.Clock = clock
	// Every server Ready, as the StatefulSet controller would report it: a
	// server down is read again every 10 s, whatever the copy says.
	sts := ro.statefulSet()
	sts.Status.ReadyReplicas = 3
	if err := k8s.Status().Update(context.Background(), sts); err != nil {
		t.Fatal(err)
	}
	ro.pass()
	first := ro.latest()
	if first.Status.Raft == nil || len(first.Status.Raft.Servers) != 3 || first.Status.ReadyReplicas != 3 {
		t.Fatalf("status.raft after the cluster's first passes: %+v, %d ready", first.Status.Raft, first.Status.ReadyReplicas)
	}
	reads := ro.bao.CallCount("AutopilotState")
	for range 3 {
		ro.pass()
	}
	if got := ro.bao.CallCount("AutopilotState"); got != reads {
		t.Fatalf("passes within the resync period read the autopilot state %d more times, want 0", got-reads)
	}

	// A period later the indexes moved, nothing else did.
	for id, s := range ro.bao.AutopilotStateAnswer.Servers {
		s.LastIndex += 500
		ro.bao.AutopilotStateAnswer.Servers[id] = s
	}
	clock.SetTime(start.Add(r.ResyncPeriod))
	ro.pass()
	if got := ro.bao.CallCount("AutopilotState"); got != reads+1 {
		t.Fatalf("the pass a resync period later read the autopilot state %d times, want 1", got-reads)
	}
	if now := ro.latest(); now.ResourceVersion != first.ResourceVersion {
		t.Fatalf("a read that changed nothing but the Raft indexes wrote the cluster: resourceVersion %s -> %s, status.raft %+v",
			first.ResourceVersion, now.ResourceVersion, now.Status.Raft)
	}
	// That read counts: the passes after it read nothing until a period later.
	clock.SetTime(start.Add(r.ResyncPeriod + r.ResyncPeriod/2))
	ro.pass()
	if got := ro.bao.CallCount("AutopilotState"); got != reads+1 {
		t.Fatalf("a pass half a period after the last read read the autopilot state again (%d reads)", got-reads)
	}

	ro.bao.AutopilotStateAnswer.Leader = "bao-1"
	clock.SetTime(start.Add(2 * r.ResyncPeriod))
	ro.pass()
	raft := ro.latest().Status.Raft
	if raft.Leader != "bao-1" || !raft.Healthy || raft.FailureTolerance != 1 || len(raft.Servers) != 3 {
		t.Fatalf("status.raft after the leader changed: %+v", raft)
	}
	if s := raft.Servers[1]; s.ID != "bao-1" || !s.Voter || s.LastIndex != 598 {
		t.Errorf("bao-1 in status.raft: %+v (want voter, last index 598)", s)
	}
	if !raft.ObservedAt.After(first.Status.Raft.ObservedAt.Time) {
		t.Errorf("observedAt did not move: %v then %v", first.Status.Raft.ObservedAt, raft.ObservedAt)
	}
}

// TestAStepDownRequestIsCarriedOutOncePerValue: spec.stepDownRequest makes
// the operator ask the active server to step down once; the same value
// again does nothing, a new value asks again.
func TestAStepDownRequestIsCarriedOutOncePerValue(t *testing.T) {
	ro := newRollout(t, "step-down-request", 3)
	request := func(v string) {
		t.Helper()
		c := ro.latest()
		c.Spec.StepDownRequest = v
		if err := k8s.Update(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	if got := ro.bao.CallCount("StepDown"); got != 0 {
		t.Fatalf("%d step-downs before any request", got)
	}
	request("2026-01-01T00:00:00Z")
	ro.pass()
	ro.pass()
	if got := ro.bao.CallCount("StepDown"); got != 1 {
		t.Fatalf("one request led to %d step-downs, want 1", got)
	}
	sd := ro.latest().Status.StepDown
	if sd == nil || sd.Request != "2026-01-01T00:00:00Z" || sd.Server != "bao-0" || sd.Result != v1alpha1.StepDownRequested {
		t.Fatalf("status.stepDown: %+v", sd)
	}
	assertEvents(t, ro.rec, v1alpha1.StepDownRequested)
	request("2026-01-01T00:05:00Z")
	ro.pass()
	if got := ro.bao.CallCount("StepDown"); got != 2 {
		t.Fatalf("a second request led to %d step-downs in all, want 2", got)
	}
}

// TestSealedServersAreExported: a pod whose service-registration label says
// sealed is counted in openbao_cluster_sealed_replicas after the next pass.
func TestSealedServersAreExported(t *testing.T) {
	ro := newRollout(t, "sealed-metric", 3)
	if got := scrape(t, "openbao_cluster_sealed_replicas", "sealed-metric", "bao"); got[""] != 0 {
		t.Fatalf("sealed before any server is: %v", got)
	}
	pod := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "sealed-metric", Name: "bao-2"}, pod); err != nil {
		t.Fatal(err)
	}
	pod.Labels[podstate.LabelSealed] = "true"
	if err := k8s.Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	ro.pass()
	if got := scrape(t, "openbao_cluster_sealed_replicas", "sealed-metric", "bao"); got[""] != 1 {
		t.Fatalf("openbao_cluster_sealed_replicas: %v, want 1", got)
	}
}
