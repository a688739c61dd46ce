package upgrade_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/upgrade"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

const (
	oldRev = "bao-old"
	newRev = "bao-new"
)

// cluster builds an observation of a settled 3-server cluster whose
// template just changed: every pod old, ready, bao-0 active, Raft healthy.
func cluster(opts ...func(*upgrade.Observed)) upgrade.Observed {
	o := upgrade.Observed{
		Now: t0, Name: "bao", Replicas: 3, SpecVersion: "2.4.1", CurrentVersion: "2.4.0",
		SealType: v1alpha1.UnsealStatic, StatefulSetObserved: true, UpdateRevision: newRev,
		Settings: upgrade.SettingsFor(v1alpha1.UpgradeSpec{}),
		Raft:     &upgrade.Raft{Healthy: true, FailureTolerance: 1, Servers: map[string]upgrade.Server{}},
		Health:   map[string]upgrade.Health{},
	}
	for i := range 3 {
		name := fmt.Sprintf("bao-%d", i)
		o.Pods = append(o.Pods, upgrade.Pod{Name: name, Ordinal: i, Revision: oldRev, Ready: true, Active: i == 0})
		o.Raft.Servers[name] = upgrade.Server{Voter: true, LagKnown: true, Lag: 3}
		o.Health[name] = upgrade.Health{Initialized: true}
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func at(d time.Duration) func(*upgrade.Observed) {
	return func(o *upgrade.Observed) { o.Now = t0.Add(d) }
}

func pod(i int, f func(*upgrade.Pod)) func(*upgrade.Observed) {
	return func(o *upgrade.Observed) { f(&o.Pods[i]) }
}

func rolled(i int) func(*upgrade.Observed) {
	return pod(i, func(p *upgrade.Pod) { p.Revision = newRev })
}

func active(i int) func(*upgrade.Observed) {
	return func(o *upgrade.Observed) {
		for j := range o.Pods {
			o.Pods[j].Active = j == i
		}
	}
}

func inProgress(partition int32, step string, since time.Duration, done ...string) func(*upgrade.Observed) {
	return func(o *upgrade.Observed) {
		started := metav1.NewTime(t0.Add(since))
		o.Upgrade = &v1alpha1.UpgradeStatus{TargetVersion: "2.4.1", FromVersion: "2.4.0", TargetRevision: newRev,
			StartedAt: metav1.NewTime(t0.Add(-time.Hour)), CurrentPartition: partition, Step: step,
			StepStartedAt: &started, CompletedPods: done}
	}
}

// keep says a test expects the Upgrading condition left as it is.
const keep = "(left as it is)"

func reasonOf(c *upgrade.Condition) string {
	if c == nil {
		return ""
	}
	return c.Reason
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name      string
		obs       upgrade.Observed
		partition int32
		step      string // status.upgrade.step; "-" for no rollout
		stepDown  string
		problem   string
		upgrading string
	}{
		{name: "every pod on the current template: nothing to roll, partition locked at the replica count",
			obs: cluster(rolled(0), rolled(1), rolled(2)), partition: 3, step: "-", upgrading: v1alpha1.ReasonUpToDate},
		{name: "the outcome of the last rollout stays told",
			obs:       cluster(rolled(0), rolled(1), rolled(2), func(o *upgrade.Observed) { o.UpgradingReason = v1alpha1.ReasonUpgradeComplete }),
			partition: 3, step: "-", upgrading: keep},
		{name: "a StatefulSet status that lags its spec decides nothing",
			obs: cluster(func(o *upgrade.Observed) { o.StatefulSetObserved = false }), partition: 3, step: "-"},
		{name: "a changed template on a healthy cluster starts and releases the highest ordinal in the same pass",
			obs: cluster(), partition: 2, step: upgrade.StepPodReady, upgrading: v1alpha1.ReasonUpgradeInProgress},
		{name: "an older spec.version is blocked and moves no pod",
			obs:       cluster(func(o *upgrade.Observed) { o.SpecVersion, o.CurrentVersion = "2.4.0", "2.4.1" }),
			partition: 3, step: "-", problem: v1alpha1.ReasonDowngradeBlocked, upgrading: v1alpha1.ReasonDowngradeBlocked},
		{name: "a downgrade allowed by spec starts",
			obs: cluster(func(o *upgrade.Observed) {
				o.SpecVersion, o.CurrentVersion, o.Settings.AllowDowngrade = "2.4.0", "2.4.1", true
			}), partition: 2, step: upgrade.StepPodReady},
		{name: "a rebuild of the same release is not a downgrade",
			obs: cluster(func(o *upgrade.Observed) { o.SpecVersion, o.CurrentVersion = "2.4.0-0a1b", "2.4.0" }), partition: 2, step: upgrade.StepPodReady},
		{name: "a release that dropped the cluster's seal is refused before it starts",
			obs:       cluster(func(o *upgrade.Observed) { o.SpecVersion, o.SealType = "2.7.0", v1alpha1.UnsealAWSKMS }),
			partition: 3, step: "-", problem: v1alpha1.ReasonPreflightFailed},
		{name: "a pod that is not Ready holds the start",
			obs: cluster(pod(1, func(p *upgrade.Pod) { p.Ready = false })), partition: 3, step: "-", problem: v1alpha1.ReasonPreflightFailed},
		{name: "an unreadable Raft state holds the start",
			obs: cluster(func(o *upgrade.Observed) { o.Raft, o.RaftProblem = nil, "login refused" }), partition: 3, step: "-", problem: v1alpha1.ReasonPreflightFailed},
		{name: "an unhealthy autopilot holds the start",
			obs: cluster(func(o *upgrade.Observed) { o.Raft.Healthy = false }), partition: 3, step: "-", problem: v1alpha1.ReasonPreflightFailed},
		{name: "a voter beyond maxRaftLag holds the start",
			obs: cluster(func(o *upgrade.Observed) {
				o.Raft.Servers["bao-1"] = upgrade.Server{Voter: true, LagKnown: true, Lag: 101}
			}),
			partition: 3, step: "-", problem: v1alpha1.ReasonPreflightFailed},
		{name: "the pre-upgrade snapshot comes first",
			obs: cluster(func(o *upgrade.Observed) { o.Settings.PreUpgradeSnapshot = true }), partition: 3, step: "-", upgrading: v1alpha1.ReasonUpgradeInProgress},
		{name: "the pre-upgrade snapshot taken, the rollout starts",
			obs:       cluster(func(o *upgrade.Observed) { o.Settings.PreUpgradeSnapshot, o.SnapshotDone = true, true }),
			partition: 2, step: upgrade.StepPodReady},
		{name: "a released pod not Ready yet waits",
			obs: cluster(inProgress(2, upgrade.StepPodReady, -time.Minute)), partition: 2, step: upgrade.StepPodReady, upgrading: v1alpha1.ReasonUpgradeInProgress},
		{name: "a released pod not Ready after podReadyTimeout halts the rollout",
			obs:       cluster(inProgress(2, upgrade.StepPodReady, -6*time.Minute)),
			partition: 2, step: upgrade.StepPodReady, problem: v1alpha1.ReasonPodReadyTimeout, upgrading: v1alpha1.ReasonUpgradeHalted},
		{name: "a sealed released pod halts after healthCheckTimeout",
			obs: cluster(rolled(2), inProgress(2, upgrade.StepHealthCheck, -3*time.Minute), func(o *upgrade.Observed) {
				o.Health["bao-2"] = upgrade.Health{Initialized: true, Sealed: true}
			}), partition: 2, step: upgrade.StepHealthCheck, problem: v1alpha1.ReasonHealthCheckTimeout},
		{name: "a released pod that does not catch up halts after raftSyncTimeout",
			obs: cluster(rolled(2), inProgress(2, upgrade.StepRaftSync, -3*time.Minute), func(o *upgrade.Observed) {
				o.Raft.Servers["bao-2"] = upgrade.Server{Voter: true, LagKnown: true, Lag: 5000}
			}), partition: 2, step: upgrade.StepRaftSync, problem: v1alpha1.ReasonRaftSyncTimeout},
		{name: "a verified pod lets the next one roll in the same pass",
			obs: cluster(rolled(2), inProgress(2, upgrade.StepPodReady, -10*time.Second)), partition: 1, step: upgrade.StepPodReady},
		{name: "the next pod is the active server: it steps down first and the partition holds",
			obs:       cluster(rolled(2), active(1), inProgress(2, upgrade.StepPodReady, -10*time.Second)),
			partition: 2, step: upgrade.StepStepDown, stepDown: "bao-1"},
		{name: "still active within stepDownTimeout: wait",
			obs:       cluster(rolled(2), active(1), inProgress(2, upgrade.StepStepDown, -10*time.Second, "bao-2")),
			partition: 2, step: upgrade.StepStepDown},
		{name: "still active after stepDownTimeout: halt",
			obs:       cluster(rolled(2), active(1), inProgress(2, upgrade.StepStepDown, -31*time.Second, "bao-2")),
			partition: 2, step: upgrade.StepStepDown, problem: v1alpha1.ReasonStepDownTimeout},
		{name: "stepped down but no other server leads yet: wait",
			obs:       cluster(rolled(2), active(-1), inProgress(2, upgrade.StepStepDown, -5*time.Second, "bao-2")),
			partition: 2, step: upgrade.StepStepDown},
		{name: "another server leads: the stepped-down pod is released",
			obs:       cluster(rolled(2), active(2), inProgress(2, upgrade.StepStepDown, -5*time.Second, "bao-2")),
			partition: 1, step: upgrade.StepPodReady},
		{name: "the last pod verified completes the rollout and locks the partition again",
			obs:       cluster(rolled(0), rolled(1), rolled(2), active(2), inProgress(0, upgrade.StepRaftSync, -time.Second, "bao-2", "bao-1")),
			partition: 3, step: "-", upgrading: v1alpha1.ReasonUpgradeComplete},
		{name: "a pod rolled before that is no longer Ready holds the next release",
			obs:       cluster(rolled(2), pod(2, func(p *upgrade.Pod) { p.Ready = false }), inProgress(2, "", -10*time.Second, "bao-2")),
			partition: 2, step: "", upgrading: v1alpha1.ReasonUpgradeInProgress},
		{name: "a halted rollout holds while resumeRequest is unchanged",
			obs: cluster(inProgress(2, upgrade.StepPodReady, -time.Hour), func(o *upgrade.Observed) {
				o.Upgrade.Halted = v1alpha1.ReasonPodReadyTimeout
			}), partition: 2, step: upgrade.StepPodReady, problem: v1alpha1.ReasonPodReadyTimeout, upgrading: v1alpha1.ReasonUpgradeHalted},
		{name: "a new resumeRequest resumes a halted rollout with a fresh timeout",
			obs: cluster(inProgress(2, upgrade.StepPodReady, -time.Hour), func(o *upgrade.Observed) {
				o.Upgrade.Halted, o.Settings.ResumeRequest = v1alpha1.ReasonPodReadyTimeout, "2026-11-23"
			}), partition: 2, step: upgrade.StepPodReady, upgrading: v1alpha1.ReasonUpgradeInProgress},
		{name: "a template changed mid-way starts over from the highest ordinal",
			obs: cluster(rolled(2), inProgress(1, upgrade.StepPodReady, -10*time.Second, "bao-2"), func(o *upgrade.Observed) {
				o.UpdateRevision, o.SpecVersion = "bao-newer", "2.4.2"
			}), partition: 2, step: upgrade.StepPodReady},
		{name: "a single server has no one to step down to: its upgrade is a restart",
			obs: cluster(func(o *upgrade.Observed) {
				o.Replicas, o.Pods = 1, o.Pods[:1]
			}), partition: 0, step: upgrade.StepPodReady},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := upgrade.Decide(tc.obs)
			step := "-"
			if d.Upgrade != nil {
				step = d.Upgrade.Step
			}
			if d.Partition != tc.partition || step != tc.step || d.StepDown != tc.stepDown || reasonOf(d.Problem) != tc.problem {
				t.Errorf("partition %d, step %q, step-down %q, problem %q; want %d, %q, %q, %q",
					d.Partition, step, d.StepDown, reasonOf(d.Problem), tc.partition, tc.step, tc.stepDown, tc.problem)
			}
			if tc.upgrading == keep && d.Upgrading != nil {
				t.Errorf("Upgrading %+v, want it left as it is", d.Upgrading)
			} else if tc.upgrading != "" && tc.upgrading != keep && reasonOf(d.Upgrading) != tc.upgrading {
				t.Errorf("Upgrading %+v, want reason %s", d.Upgrading, tc.upgrading)
			}
			if d.Problem != nil && !strings.Contains(d.Problem.Message, " ") {
				t.Errorf("problem without a message: %+v", d.Problem)
			}
			if d.Upgrade != nil && d.Upgrade.CurrentPartition != d.Partition {
				t.Errorf("status partition %d, rendered %d", d.Upgrade.CurrentPartition, d.Partition)
			}
		})
	}
}

// TestASettlingClusterIsPolledSoonerThanARefusedSpec: a cluster that is
// settling (autopilot not yet healthy after a restart) starts its rollout
// within seconds of settling; a refused spec waits for the user.
func TestASettlingClusterIsPolledSoonerThanARefusedSpec(t *testing.T) {
	settling := upgrade.Decide(cluster(func(o *upgrade.Observed) { o.Raft.Healthy = false }))
	refused := upgrade.Decide(cluster(func(o *upgrade.Observed) { o.SpecVersion, o.CurrentVersion = "2.4.0", "2.4.1" }))
	if reasonOf(settling.Problem) != v1alpha1.ReasonPreflightFailed || reasonOf(refused.Problem) != v1alpha1.ReasonDowngradeBlocked {
		t.Fatalf("problems %+v and %+v", settling.Problem, refused.Problem)
	}
	if settling.Requeue > 2*time.Second || refused.Requeue < settling.Requeue {
		t.Errorf("a settling cluster is looked at again after %s, a refused spec after %s", settling.Requeue, refused.Requeue)
	}
}

func TestAHaltSaysWhatToDo(t *testing.T) {
	d := upgrade.Decide(cluster(inProgress(2, upgrade.StepPodReady, -6*time.Minute)))
	if d.Problem == nil || !strings.Contains(d.Problem.Message, "resumeRequest") || !strings.Contains(d.Problem.Message, "bao-2") {
		t.Fatalf("problem %+v", d.Problem)
	}
	if len(d.Events) != 1 || !d.Events[0].Warning {
		t.Errorf("events %+v, want one warning", d.Events)
	}
}

func TestARolloutRunsToTheEndOnAHealthyCluster(t *testing.T) {
	o := cluster()
	leader := 0
	stepDowns := 0
	for pass := 0; pass < 40; pass++ {
		o.Now = t0.Add(time.Duration(pass) * 5 * time.Second)
		d := upgrade.Decide(o)
		if d.StepDown != "" {
			stepDowns++
			leader = (leader + 2) % 3 // another server takes over
		}
		o.Upgrade = d.Upgrade
		// The StatefulSet controller rolls every pod at or above the partition.
		for i := range o.Pods {
			o.Pods[i].Revision = map[bool]string{true: newRev, false: oldRev}[int32(i) >= d.Partition || o.Pods[i].Revision == newRev]
			o.Pods[i].Active = i == leader
		}
		if d.Completed {
			if stepDowns != 1 {
				t.Errorf("%d step-downs, want 1 (bao-0 leads)", stepDowns)
			}
			if len(d.Events) == 0 || d.Partition != 3 {
				t.Errorf("completion: partition %d, events %+v", d.Partition, d.Events)
			}
			return
		}
	}
	t.Fatalf("not complete after 40 passes: %+v", o.Upgrade)
}

func TestSettingsDefaults(t *testing.T) {
	s := upgrade.SettingsFor(v1alpha1.UpgradeSpec{})
	if s.StepDownTimeout != 30*time.Second || s.PodReadyTimeout != 5*time.Minute || s.HealthCheckTimeout != 2*time.Minute ||
		s.RaftSyncTimeout != 2*time.Minute || s.MaxRaftLag != 100 {
		t.Errorf("defaults %+v", s)
	}
	lag := int64(7)
	s = upgrade.SettingsFor(v1alpha1.UpgradeSpec{StepDownTimeout: &metav1.Duration{Duration: time.Minute}, MaxRaftLag: &lag})
	if s.StepDownTimeout != time.Minute || s.MaxRaftLag != 7 {
		t.Errorf("overrides %+v", s)
	}
}

func TestVersions(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		down     bool
	}{
		{"2.4.0", "2.4.1", false}, {"2.4.1", "2.4.0", true}, {"2.5.0", "2.4.9", true},
		{"2.4.0", "2.4.0-abcdef", false}, {"", "2.4.0", false}, {"2.10.0", "2.9.0", true},
	} {
		if got := upgrade.IsDowngrade(tc.from, tc.to); got != tc.down {
			t.Errorf("IsDowngrade(%q, %q) = %v", tc.from, tc.to, got)
		}
	}
	if msg := upgrade.Incompatible("2.7.0", v1alpha1.UnsealGCPCKMS); !strings.Contains(msg, "gcpckms") {
		t.Errorf("2.7.0 with gcpckms: %q", msg)
	}
	if msg := upgrade.Incompatible("2.7.0", v1alpha1.UnsealStatic); msg != "" {
		t.Errorf("2.7.0 with the static seal: %q", msg)
	}
	if msg := upgrade.Incompatible("2.3.1", v1alpha1.UnsealStatic); msg == "" {
		t.Error("2.3.1 has no static seal")
	}
}

func TestARestoreUnderWayHoldsADueRollout(t *testing.T) {
	d := upgrade.Decide(cluster(func(o *upgrade.Observed) { o.Restores = []string{"r1"} }))
	if d.Started || d.Upgrade != nil || d.Upgrading == nil || d.Upgrading.Reason != v1alpha1.ReasonRestoreInProgress ||
		d.Partition != 3 || d.Requeue == 0 || d.Problem != nil {
		t.Fatalf("a rollout beside a restore: %+v", d)
	}
	if d := upgrade.Decide(cluster()); !d.Started {
		t.Fatalf("without the restore the rollout starts: %+v", d)
	}
}
