package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
)

// serving is a three-server cluster that serves with nothing under way.
func serving(change func(*readyObserved)) readyObserved {
	o := readyObserved{Initialized: true, Desired: 3, Ready: 3, Available: true}
	if change != nil {
		change(&o)
	}
	return o
}

func TestDecideReady(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     readyObserved
		ready  bool
		reason string
	}{
		{"a cluster with every server ready, unsealed and an active one is Ready", serving(nil), true, v1alpha1.ReasonClusterReady},
		{"a paused cluster is not Ready, even when it serves", serving(func(o *readyObserved) { o.Paused = true }), false, v1alpha1.ReasonPausedBySpec},
		{"a degraded cluster is not Ready and says Degraded's reason", serving(func(o *readyObserved) { o.DegradedReason = v1alpha1.ReasonApplyFailed }), false, v1alpha1.ReasonApplyFailed},
		{"an uninitialized cluster is not Ready", serving(func(o *readyObserved) { o.Initialized = false }), false, v1alpha1.ReasonNotInitialized},
		{"a cluster in a rollout is not Ready", serving(func(o *readyObserved) { o.Upgrading = true }), false, v1alpha1.ReasonUpgradeInProgress},
		{"a cluster a restore holds is not Ready", serving(func(o *readyObserved) { o.Restoring = true }), false, v1alpha1.ReasonRestoreInProgress},
		{"a cluster with two of three servers ready is not Ready", serving(func(o *readyObserved) { o.Ready = 2 }), false, v1alpha1.ReasonServersNotReady},
		{"a cluster with a sealed server is not Ready", serving(func(o *readyObserved) { o.Sealed = 1 }), false, v1alpha1.ReasonServersSealed},
		{"a cluster without an active server is not Ready", serving(func(o *readyObserved) { o.Available = false }), false, v1alpha1.ReasonNoActiveServer},
		{"a degraded cluster in a rollout names Degraded first", serving(func(o *readyObserved) {
			o.Upgrading, o.DegradedReason = true, v1alpha1.ReasonUpgradeHalted
		}), false, v1alpha1.ReasonUpgradeHalted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideReady(tc.in)
			if d.Ready != tc.ready || d.Reason != tc.reason {
				t.Fatalf("decideReady = %v %s (%s), want %v %s", d.Ready, d.Reason, d.Message, tc.ready, tc.reason)
			}
		})
	}
}

func TestPhase(t *testing.T) {
	serving := func(change func(*v1alpha1.OpenBaoCluster, *v1alpha1.OpenBaoClusterStatus)) (*v1alpha1.OpenBaoCluster, *v1alpha1.OpenBaoClusterStatus) {
		c := &v1alpha1.OpenBaoCluster{Spec: v1alpha1.OpenBaoClusterSpec{Replicas: 3}}
		s := &v1alpha1.OpenBaoClusterStatus{Initialized: true, ReadyReplicas: 3, Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonReconciled},
			{Type: v1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonActiveServerReady},
		}}
		if change != nil {
			change(c, s)
		}
		return c, s
	}
	for _, tc := range []struct {
		name      string
		change    func(*v1alpha1.OpenBaoCluster, *v1alpha1.OpenBaoClusterStatus)
		restoring bool
		want      v1alpha1.ClusterPhase
	}{
		{"a serving cluster is Running", nil, false, v1alpha1.PhaseRunning},
		{"a cluster a restore holds is Restoring", nil, true, v1alpha1.PhaseRestoring},
		{"a degraded cluster under a restore is Degraded", func(_ *v1alpha1.OpenBaoCluster, s *v1alpha1.OpenBaoClusterStatus) {
			s.Conditions[0].Status = metav1.ConditionTrue
		}, true, v1alpha1.PhaseDegraded},
		{"a paused cluster under a restore is Paused", func(c *v1alpha1.OpenBaoCluster, _ *v1alpha1.OpenBaoClusterStatus) {
			c.Spec.Paused = true
		}, true, v1alpha1.PhasePaused},
		{"a cluster in a rollout is Upgrading", func(_ *v1alpha1.OpenBaoCluster, s *v1alpha1.OpenBaoClusterStatus) {
			s.Upgrade = &v1alpha1.UpgradeStatus{}
		}, false, v1alpha1.PhaseUpgrading},
		{"a cluster with a server not ready is Initializing", func(_ *v1alpha1.OpenBaoCluster, s *v1alpha1.OpenBaoClusterStatus) {
			s.ReadyReplicas = 2
		}, false, v1alpha1.PhaseInitializing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := serving(tc.change)
			if got := phase(c, s, tc.restoring); got != tc.want {
				t.Fatalf("phase = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestObserveReadyTakesAReasonThatNeedsAPersonFromAnyCondition(t *testing.T) {
	c := &v1alpha1.OpenBaoCluster{Spec: v1alpha1.OpenBaoClusterSpec{Replicas: 3}}
	status := &v1alpha1.OpenBaoClusterStatus{Initialized: true, ReadyReplicas: 3, Conditions: []metav1.Condition{
		{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonReconciled},
		{Type: v1alpha1.ConditionSealReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonStaticKeyInvalid},
		{Type: v1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonActiveServerReady},
	}}
	if d := decideReady(observeReady(c, status, 0, false)); d.Ready || d.Reason != v1alpha1.ReasonStaticKeyInvalid {
		t.Fatalf("got %v %s, want not Ready for StaticKeyInvalid", d.Ready, d.Reason)
	}
}

func TestOneShotConditions(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name              string
		succeeded, failed bool
		phase, reason     string
		ready, stalled    metav1.ConditionStatus
		wantReason        string
	}{
		{"a succeeded backup is Ready and not Stalled", true, false, "Succeeded", "SnapshotStored", metav1.ConditionTrue, "", "SnapshotStored"},
		{"a failed backup is not Ready and is Stalled with the failure's reason", false, true, "Failed", "SnapshotCorrupt", metav1.ConditionFalse, metav1.ConditionTrue, "SnapshotCorrupt"},
		{"a running backup without a reason is not Ready and says its phase", false, false, "Running", "", metav1.ConditionFalse, "", "Running"},
		{"a backup without a phase is Pending", false, false, "", "", metav1.ConditionFalse, "", "Pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conds []metav1.Condition
			oneShotConditions(&conds, 1, now, tc.succeeded, tc.failed, tc.phase, tc.reason, "m")
			r := meta.FindStatusCondition(conds, v1alpha1.ConditionReady)
			if r == nil || r.Status != tc.ready || r.Reason != tc.wantReason || r.ObservedGeneration != 1 {
				t.Fatalf("Ready = %+v, want %s %s", r, tc.ready, tc.wantReason)
			}
			s := meta.FindStatusCondition(conds, v1alpha1.ConditionStalled)
			if (s == nil) != (tc.stalled == "") || (s != nil && s.Status != tc.stalled) {
				t.Fatalf("Stalled = %+v, want %q", s, tc.stalled)
			}
		})
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB",
		1288490189: "1.2 GiB", 5 << 40: "5.0 TiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestAReadyThatRepeatsAClearedCauseDoesNotKeepTheClusterDegraded: Ready
// copies a reason that needs a person; once the owning condition cleared,
// the copy alone must not make the phase Degraded (the backup schedule
// reads the phase mid-pass, before Ready is decided again).
func TestAReadyThatRepeatsAClearedCauseDoesNotKeepTheClusterDegraded(t *testing.T) {
	c := &v1alpha1.OpenBaoCluster{Spec: v1alpha1.OpenBaoClusterSpec{Replicas: 1}}
	status := &v1alpha1.OpenBaoClusterStatus{Initialized: true, ReadyReplicas: 1, Conditions: []metav1.Condition{
		{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonReconciled},
		{Type: v1alpha1.ConditionSealReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonStaticKeyReady},
		{Type: v1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonActiveServerReady},
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonStaticKeyInvalid},
	}}
	if got := phase(c, status, false); got != v1alpha1.PhaseRunning {
		t.Fatalf("phase = %s, want Running", got)
	}
	if d := decideReady(observeReady(c, status, 0, false)); !d.Ready {
		t.Fatalf("Ready stays False on its own stale reason: %+v", d)
	}
}
