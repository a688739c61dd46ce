package bootstrap_test

import (
	"testing"
	"time"

	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/podstate"
)

// FuzzDecide holds the invariants of Decide over arbitrary snapshots:
// no hot loop, no second init, no init in self-init mode, no init over an
// existing root-token Secret, no adoption a label alone asserts, no wipe
// of a cluster that may hold data or was reset before, and every outcome
// has a reason. The wipe invariant: no reset unless the recorded sys/init
// outcome is unknown (initializationStarted still set), pod-0's claim is
// known not to predate the cluster, and no restore of a cluster formed
// from a backup can have begun.
func FuzzDecide(f *testing.F) {
	f.Add(true, true, "false", false, false, false, false, false, "", int32(0), 0, int64(0), false, false, false, false, true, int64(10), true)
	f.Add(true, true, "", true, true, false, false, false, "CrashLoopBackOff", int32(5), 2, int64(3), false, false, false, false, true, int64(0), true)
	f.Add(true, true, "true", false, false, true, true, false, "", int32(0), 0, int64(0), false, false, false, false, false, int64(0), true)
	f.Add(true, true, "true", true, true, false, false, false, "", int32(0), 0, int64(0), true, false, false, false, true, int64(5), true)
	f.Add(true, true, "false", true, true, false, false, false, "", int32(0), 0, int64(0), true, false, false, false, true, int64(-3600), true)
	f.Add(true, true, "false", true, true, false, false, false, "", int32(0), 0, int64(0), true, false, false, true, true, int64(5), true)
	f.Add(false, false, "", false, false, false, false, false, "", int32(0), 0, int64(0), false, true, true, false, false, int64(0), true)
	f.Add(true, true, "true", true, true, false, false, false, "", int32(0), 0, int64(0), true, false, false, true, true, int64(5), false)
	f.Fuzz(func(t *testing.T, hasPod, running bool, initLabel string, hasHealth, healthInit, selfInit, secret, statusInit bool,
		waiting string, restarts int32, failures int, sinceFailure int64, initStarted, resetDone, resetPending bool,
		fromBackup, hasClaim bool, claimAfterCluster int64, restoreRecorded bool) {
		obs := bootstrap.Observed{
			Initialized: statusInit, SelfInit: selfInit, RootTokenSecretExists: secret,
			InitFailures: failures, Now: now, LastInitFailure: now.Add(-time.Duration(sinceFailure)),
			InitStarted: initStarted, ResetDone: resetDone, ResetPending: resetDone && resetPending,
			FromBackup: fromBackup, FromBackupRecorded: restoreRecorded, ClusterCreated: now.Add(-time.Hour),
		}
		if hasClaim {
			obs.Pod0Claim = &bootstrap.Claim{Created: obs.ClusterCreated.Add(time.Duration(claimAfterCluster) * time.Second)}
		}
		if hasPod {
			p := pod0(func(p *podstate.Pod) { p.Running, p.WaitingReason, p.RestartCount = running, waiting, restarts })
			if initLabel != "" {
				p.Labels[podstate.LabelInitialized] = initLabel
			}
			obs.Pod0 = p
		}
		if hasHealth {
			obs.Health = &openbao.Health{Initialized: healthInit}
		}
		d := bootstrap.Decide(obs)
		if d.Reason == "" && d.Action != bootstrap.ActionInitialize {
			t.Errorf("%s without a reason", d.Action)
		}
		if (d.Action == bootstrap.ActionWait || d.Action == bootstrap.ActionDegraded) && d.RequeueAfter <= 0 {
			t.Errorf("%s (%s) without a requeue interval", d.Action, d.Reason)
		}
		// sys/init only after sys/health said "not initialized": no label
		// stands in for it.
		if d.Action == bootstrap.ActionInitialize {
			switch {
			case statusInit, selfInit, secret:
				t.Errorf("initialize with status %v, self-init %v, Secret %v", statusInit, selfInit, secret)
			case obs.Health == nil || obs.Health.Initialized:
				t.Errorf("initialize a cluster sys/health did not call uninitialized: %+v", obs)
			case !obs.Pod0.Started():
				t.Error("initialize a pod whose container has not started")
			}
		}
		// A wipe only of a cluster no credential opened, and only once: a
		// new reset needs this operator's own cut-off sys/init confirmed by
		// sys/health; one under way is finished.
		if d.Action == bootstrap.ActionReset {
			switch {
			case statusInit:
				t.Errorf("reset of a cluster whose status is initialized: %+v", obs)
			case obs.ResetPending: // one under way is finished
			case secret, selfInit:
				t.Errorf("reset with Secret %v, self-init %v", secret, selfInit)
			case resetDone || !initStarted || obs.Health == nil || !obs.Health.Initialized:
				t.Errorf("reset without a first, confirmed, cut-off sys/init: %+v", obs)
			case fromBackup && restoreRecorded || obs.Pod0Claim == nil || obs.Pod0Claim.Created.Before(obs.ClusterCreated):
				t.Errorf("reset of data that may predate this cluster's own init (from backup %v, its restore recorded %v, claim %+v): %+v",
					fromBackup, restoreRecorded, obs.Pod0Claim, obs)
			}
		}
		// Adoption only on proof: sys/health said initialized.
		if (d.Action == bootstrap.ActionAdopt || d.Action == bootstrap.ActionMarkInitialized) && (obs.Health == nil || !obs.Health.Initialized) {
			t.Errorf("%s without sys/health confirming initialization: %+v", d.Action, obs)
		}
	})
}
