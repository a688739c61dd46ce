package upgrade_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/day2"
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
		o.Raft.Servers[name] = upgrade.Server{Voter: true, Healthy: true, LagKnown: true, Lag: 3, Received: true, ContactKnown: true, LastContact: time.Second}
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

func started(i int, ago time.Duration) func(*upgrade.Observed) {
	return pod(i, func(p *upgrade.Pod) { p.Started = t0.Add(ago) })
}

// steppedDownAt records a step-down asked at t0+at; after inProgress.
func steppedDownAt(at time.Duration) func(*upgrade.Observed) {
	return func(o *upgrade.Observed) {
		t := metav1.NewTime(t0.Add(at))
		o.Upgrade.LastStepDownTime = &t
	}
}

func notReady(i int) func(*upgrade.Observed) {
	return pod(i, func(p *upgrade.Pod) { p.Ready = false })
}

func server(name string, f func(*upgrade.Server)) func(*upgrade.Observed) {
	return func(o *upgrade.Observed) {
		s := o.Raft.Servers[name]
		f(&s)
		o.Raft.Servers[name] = s
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
		{name: "an unhealthy read replica does not hold the start: a non-voter costs no quorum",
			obs: cluster(func(o *upgrade.Observed) {
				o.Raft.Healthy = false
				o.Raft.Servers["bao-read-0"] = upgrade.Server{LagKnown: true, Lag: 500}
			}), partition: 2, step: upgrade.StepPodReady},
		{name: "an unhealthy voter beside a read replica holds the start",
			obs: cluster(func(o *upgrade.Observed) {
				o.Raft.Healthy = false
				o.Raft.Servers["bao-read-0"] = upgrade.Server{LagKnown: true}
				o.Raft.Servers["bao-1"] = upgrade.Server{Voter: true, LagKnown: true, Lag: 3}
			}), partition: 3, step: "-", problem: v1alpha1.ReasonPreflightFailed},
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
		{name: "the next pod is the active server and a rolled server is counted caught up: it steps down while the pod before it catches up",
			obs: cluster(rolled(2), rolled(1), active(0), inProgress(1, upgrade.StepRaftSync, -5*time.Second, "bao-2"), started(1, -3*time.Second),
				server("bao-1", func(s *upgrade.Server) { s.Received = false })),
			partition: 1, step: upgrade.StepRaftSync, stepDown: "bao-0"},
		{name: "a step-down asked while the pod before catches up is not asked again",
			obs: cluster(rolled(2), rolled(1), active(0), inProgress(1, upgrade.StepRaftSync, -5*time.Second, "bao-2"), started(1, -3*time.Second),
				server("bao-1", func(s *upgrade.Server) { s.Received = false }), steppedDownAt(-time.Second)),
			partition: 1, step: upgrade.StepRaftSync},
		{name: "the active server is next but no rolled server is counted to lead: it steps down only at its release",
			obs: cluster(rolled(2), active(1), inProgress(2, upgrade.StepRaftSync, -5*time.Second), started(2, -3*time.Second),
				server("bao-2", func(s *upgrade.Server) { s.Received = false })),
			partition: 2, step: upgrade.StepRaftSync},
		{name: "the pod before not Ready yet: no step-down",
			obs:       cluster(rolled(2), rolled(1), active(0), notReady(1), inProgress(1, upgrade.StepPodReady, -5*time.Second, "bao-2"), started(1, -3*time.Second)),
			partition: 1, step: upgrade.StepPodReady},
		{name: "stepped down early, its label still says active: the release waits for another active instead of asking again",
			obs: cluster(rolled(2), rolled(1), active(0), inProgress(1, upgrade.StepRaftSync, -5*time.Second, "bao-2"), started(1, -3*time.Second),
				steppedDownAt(-time.Second)),
			partition: 1, step: upgrade.StepStepDown},
		{name: "stepped down early more than 10 s ago and active again: it is asked again",
			obs: cluster(rolled(2), rolled(1), active(0), inProgress(1, upgrade.StepRaftSync, -15*time.Second, "bao-2"), started(1, -13*time.Second),
				steppedDownAt(-11*time.Second)),
			partition: 1, step: upgrade.StepStepDown, stepDown: "bao-0"},
		{name: "stepped down early and a rolled server leads: released without asking again",
			obs: cluster(rolled(2), rolled(1), active(2), inProgress(1, upgrade.StepRaftSync, -5*time.Second, "bao-2"), started(1, -3*time.Second),
				steppedDownAt(-time.Second)),
			partition: 0, step: upgrade.StepPodReady},
		{name: "the last pod verified completes the rollout and locks the partition again",
			obs:       cluster(rolled(0), rolled(1), rolled(2), active(2), inProgress(0, upgrade.StepRaftSync, -time.Second, "bao-2", "bao-1")),
			partition: 3, step: "-", upgrading: v1alpha1.ReasonUpgradeComplete},
		{name: "a pod rolled before that is no longer Ready holds the next release",
			obs:       cluster(rolled(2), pod(2, func(p *upgrade.Pod) { p.Ready = false }), inProgress(2, "", -10*time.Second, "bao-2")),
			partition: 2, step: "", upgrading: v1alpha1.ReasonUpgradeInProgress},
		{name: "an unrolled pod not Ready keeps the partition",
			obs:       cluster(rolled(2), notReady(0), inProgress(2, "", -10*time.Second, "bao-2")),
			partition: 2, step: "", upgrading: v1alpha1.ReasonUpgradeInProgress},
		{name: "an unrolled pod that crashes while the pod above it is verified keeps the partition",
			obs:       cluster(rolled(2), notReady(0), inProgress(2, upgrade.StepRaftSync, -10*time.Second)),
			partition: 2, step: "", upgrading: v1alpha1.ReasonUpgradeInProgress},
		{name: "an unrolled pod not Ready after podReadyTimeout halts the rollout",
			obs:       cluster(rolled(2), notReady(0), inProgress(2, "", -6*time.Minute, "bao-2")),
			partition: 2, step: "", problem: v1alpha1.ReasonPeerNotReadyTimeout, upgrading: v1alpha1.ReasonUpgradeHalted},
		{name: "an unrolled pod not Ready does not make the active server step down",
			obs:       cluster(rolled(2), active(1), notReady(0), inProgress(2, "", -10*time.Second, "bao-2")),
			partition: 2, step: ""},
		{name: "an unrolled server that is sealed keeps the partition",
			obs: cluster(rolled(2), inProgress(2, "", -10*time.Second, "bao-2"), func(o *upgrade.Observed) {
				o.Health["bao-0"] = upgrade.Health{Initialized: true, Sealed: true}
			}), partition: 2, step: ""},
		{name: "a voter autopilot reports unhealthy keeps the partition",
			obs:       cluster(rolled(2), inProgress(2, "", -10*time.Second, "bao-2"), server("bao-0", func(s *upgrade.Server) { s.Healthy = false })),
			partition: 2, step: ""},
		{name: "a voter that trails the leader keeps the partition",
			obs:       cluster(rolled(2), inProgress(2, "", -10*time.Second, "bao-2"), server("bao-0", func(s *upgrade.Server) { s.Lag = 5000 })),
			partition: 2, step: ""},
		{name: "a failure tolerance of zero keeps the partition",
			obs:       cluster(rolled(2), inProgress(2, "", -10*time.Second, "bao-2"), func(o *upgrade.Observed) { o.Raft.FailureTolerance = 0 }),
			partition: 2, step: ""},
		{name: "two voters for three servers keep the partition",
			obs:       cluster(rolled(2), inProgress(2, "", -10*time.Second, "bao-2"), server("bao-0", func(s *upgrade.Server) { s.Voter = false })),
			partition: 2, step: ""},
		{name: "an unreadable Raft state keeps the partition",
			obs: cluster(rolled(2), inProgress(2, "", -10*time.Second, "bao-2"), func(o *upgrade.Observed) {
				o.Raft, o.RaftProblem = nil, "sys/leader timed out"
			}), partition: 2, step: ""},
		{name: "the pod about to be released may itself be down: the others hold quorum",
			obs:       cluster(rolled(2), notReady(1), inProgress(2, "", -10*time.Second, "bao-2")),
			partition: 1, step: upgrade.StepPodReady},
		{name: "a newer spec.version mid-rollout releases no further pod until the StatefulSet reports the new template",
			obs: cluster(rolled(2), rolled(1), inProgress(1, upgrade.StepPodReady, -10*time.Second, "bao-2"), func(o *upgrade.Observed) {
				o.SpecVersion = "2.4.2"
			}), partition: 1, step: upgrade.StepPodReady, upgrading: v1alpha1.ReasonUpgradeInProgress},
		{name: "an older spec.version mid-rollout holds every pod in the pass that renders its template",
			obs: cluster(rolled(2), rolled(1), inProgress(1, upgrade.StepPodReady, -10*time.Second, "bao-2"), func(o *upgrade.Observed) {
				o.SpecVersion, o.CurrentVersion, o.HighestVersion = "2.4.0", "", "2.4.1"
			}), partition: 3, step: "", upgrading: v1alpha1.ReasonUpgradeInProgress},
		{name: "a rebuild of the target release mid-rollout does not hold the pods",
			obs: cluster(rolled(2), inProgress(2, upgrade.StepPodReady, -10*time.Second), func(o *upgrade.Observed) {
				o.SpecVersion = "2.4.1-0a1b"
			}), partition: 1, step: upgrade.StepPodReady},
		{name: "a target changed mid-rollout to a release older than one a server ran is blocked",
			obs: cluster(rolled(2), inProgress(1, upgrade.StepPodReady, -10*time.Second, "bao-2"), func(o *upgrade.Observed) {
				o.UpdateRevision, o.SpecVersion, o.CurrentVersion, o.HighestVersion = "bao-older", "2.4.0", "", "2.4.1"
			}), partition: 3, step: "-", problem: v1alpha1.ReasonDowngradeBlocked, upgrading: v1alpha1.ReasonDowngradeBlocked},
		{name: "a target changed mid-rollout to an older release is allowed by allowDowngrade",
			obs: cluster(rolled(2), inProgress(1, upgrade.StepPodReady, -10*time.Second, "bao-2"), func(o *upgrade.Observed) {
				o.UpdateRevision, o.SpecVersion, o.CurrentVersion, o.HighestVersion = "bao-older", "2.4.0", "", "2.4.1"
				o.Settings.AllowDowngrade = true
			}), partition: 2, step: upgrade.StepPodReady},
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
	d := upgrade.Decide(cluster(func(o *upgrade.Observed) {
		o.Lock = day2.Decide(day2.RolloutOp(), []day2.Op{{Ref: day2.Ref{Kind: day2.Restore, Name: "r1"}}})
	}))
	if d.Started || d.Upgrade != nil || d.Upgrading == nil || d.Upgrading.Reason != v1alpha1.ReasonRestoreInProgress ||
		d.Partition != 3 || d.Requeue == 0 || d.Problem != nil {
		t.Fatalf("a rollout beside a restore: %+v", d)
	}
	if d := upgrade.Decide(cluster()); !d.Started {
		t.Fatalf("without the restore the rollout starts: %+v", d)
	}
}

// crashLooping is what the kubelet reports of an OpenBao container that
// refuses its configuration at start.
var crashLooping = upgrade.Container{Waiting: "CrashLoopBackOff", Restarts: 4, LastReason: "Error", LastExitCode: 1,
	LastMessage: "==> OpenBao server configuration:\nError initializing core: cannot have DefaultLeaseTTL larger than MaxLeaseTTL\n"}

func TestAHaltNamesTheRolledPodsOwnState(t *testing.T) {
	crashing := pod(2, func(p *upgrade.Pod) { p.Revision, p.Ready, p.Container = newRev, false, crashLooping })
	d := upgrade.Decide(cluster(crashing, inProgress(2, upgrade.StepPodReady, -6*time.Minute)))
	if d.Problem == nil || d.Problem.Reason != v1alpha1.ReasonPodReadyTimeout {
		t.Fatalf("problem %+v", d.Problem)
	}
	for _, want := range []string{"bao-2", "CrashLoopBackOff", "restarted 4 times", "exit code 1 (Error)", "cannot have DefaultLeaseTTL larger than MaxLeaseTTL"} {
		if !strings.Contains(d.Problem.Message, want) {
			t.Errorf("the halt does not say %q: %s", want, d.Problem.Message)
		}
	}
	if strings.Contains(d.Problem.Message, "OpenBao server configuration") {
		t.Errorf("the halt repeats more than the termination message's last line: %s", d.Problem.Message)
	}
	// Later passes hold the halt, and keep naming its cause.
	held := cluster(crashing, inProgress(2, upgrade.StepPodReady, -time.Hour), func(o *upgrade.Observed) { o.Upgrade.Halted = d.Upgrade.Halted })
	h := upgrade.Decide(held)
	if h.Problem == nil || !strings.Contains(h.Problem.Message, "CrashLoopBackOff") || !strings.Contains(h.Problem.Message, "DefaultLeaseTTL") {
		t.Errorf("a held halt does not name its cause: %+v", h.Problem)
	}
}

func TestAHaltOnAnotherServerNamesIt(t *testing.T) {
	down := pod(0, func(p *upgrade.Pod) { p.Ready, p.Container = false, crashLooping })
	d := upgrade.Decide(cluster(rolled(2), down, inProgress(2, "", -6*time.Minute, "bao-2")))
	if d.Problem == nil || d.Problem.Reason != v1alpha1.ReasonPeerNotReadyTimeout || d.Partition != 2 {
		t.Fatalf("partition %d, problem %+v", d.Partition, d.Problem)
	}
	for _, want := range []string{"bao-1 is not released", "bao-0 is not Ready", "CrashLoopBackOff", "resumeRequest"} {
		if !strings.Contains(d.Problem.Message, want) {
			t.Errorf("the halt does not say %q: %s", want, d.Problem.Message)
		}
	}
}

func TestALongTerminationMessageIsCut(t *testing.T) {
	long := upgrade.Container{Waiting: "CrashLoopBackOff", LastExitCode: 1, LastMessage: strings.Repeat("é", 400)}
	d := upgrade.Decide(cluster(pod(2, func(p *upgrade.Pod) { p.Revision, p.Ready, p.Container = newRev, false, long }),
		inProgress(2, upgrade.StepPodReady, -6*time.Minute)))
	if d.Problem == nil || len(d.Problem.Message) > 1000 || !strings.Contains(d.Problem.Message, "…") {
		t.Fatalf("problem %+v", d.Problem)
	}
}

// run plays passes of Decide against a StatefulSet controller as it
// runs a Parallel StatefulSet: it replaces the highest pod at or above the
// rendered partition that is not on the revision of the template
// rendered in the same pass, one per pass, and reports that revision one
// pass later; and a leader that moves when asked to step down. change
// alters the world before a pass and returns the revision of a template
// it changed, or "". run returns the last decision, how often each pod
// was replaced, and the world as it ended.
func run(t *testing.T, o upgrade.Observed, passes int, change func(o *upgrade.Observed) string) (upgrade.Decision, map[string]int, upgrade.Observed) {
	t.Helper()
	released := map[string]int{}
	template := o.UpdateRevision
	var d upgrade.Decision
	for pass := 0; pass < passes; pass++ {
		o.Now = t0.Add(time.Duration(pass) * 5 * time.Second)
		o.UpdateRevision = template
		if rev := change(&o); rev != "" {
			template = rev
		}
		d = upgrade.Decide(o)
		if d.StepDown != "" { // the highest other server takes over
			for i := len(o.Pods) - 1; i >= 0; i-- {
				if o.Pods[i].Name != d.StepDown {
					active(i)(&o)
					break
				}
			}
		}
		o.Upgrade = d.Upgrade
		for i := len(o.Pods) - 1; i >= int(d.Partition); i-- {
			if o.Pods[i].Revision != template {
				o.Pods[i].Revision = template
				released[o.Pods[i].Name]++
				break
			}
		}
		if d.Completed {
			return d, released, o
		}
	}
	return d, released, o
}

// midway changes spec.version once bao-2 runs the rollout's target and
// bao-1 is released: currentVersion is then empty and highestVersion is
// the target's.
func midway(version, revision string) func(o *upgrade.Observed) string {
	return func(o *upgrade.Observed) string {
		if o.Upgrade == nil || o.SpecVersion != "2.4.1" || len(o.Upgrade.CompletedPods) != 1 {
			return ""
		}
		o.SpecVersion, o.CurrentVersion, o.HighestVersion = version, "", "2.4.1"
		return revision
	}
}

func TestATargetChangedMidRolloutRollsThePodsOnTheIntermediateTemplateAgain(t *testing.T) {
	const newer = "bao-newer"
	d, released, o := run(t, cluster(), 60, midway("2.4.2", newer))
	if !d.Completed || d.Upgrade != nil || d.Partition != 3 {
		t.Fatalf("not complete: %+v", d)
	}
	for _, p := range o.Pods {
		if p.Revision != newer {
			t.Errorf("%s ended on %s", p.Name, p.Revision)
		}
	}
	if released["bao-2"] != 2 || released["bao-1"] != 2 || released["bao-0"] != 1 {
		t.Errorf("released %v, want bao-2 and bao-1 twice (2.4.1, then 2.4.2), bao-0 once", released)
	}
}

func TestATargetLoweredMidRolloutMovesNoPodBack(t *testing.T) {
	d, _, o := run(t, cluster(), 30, midway("2.4.0", "bao-older"))
	if reasonOf(d.Problem) != v1alpha1.ReasonDowngradeBlocked || d.Partition != 3 || d.Upgrade != nil {
		t.Fatalf("partition %d, problem %+v, upgrade %+v", d.Partition, d.Problem, d.Upgrade)
	}
	for _, p := range o.Pods[1:] {
		if p.Revision != newRev {
			t.Errorf("%s, which ran 2.4.1, is on %s", p.Name, p.Revision)
		}
	}
}

// TestABrokenTargetIsRolledForwardByANewerRelease: 2.4.1 crash-loops on
// the first rolled pod; the user sets 2.4.2 instead of waiting for a halt.
// The StatefulSet replaces that pod onto 2.4.2 (the partition stays where
// it was), and the rollout starts over and completes: holding every pod
// instead would leave the broken pod on 2.4.1 and the preflight waiting
// for it forever.
func TestABrokenTargetIsRolledForwardByANewerRelease(t *testing.T) {
	const fixed = "bao-fixed"
	d, _, o := run(t, cluster(), 60, func(o *upgrade.Observed) string {
		for i := range o.Pods {
			o.Pods[i].Ready = o.Pods[i].Revision != newRev // 2.4.1 does not start
		}
		if o.SpecVersion == "2.4.1" && o.Upgrade != nil && o.Now.Sub(t0) >= 20*time.Second {
			o.SpecVersion, o.CurrentVersion, o.HighestVersion = "2.4.2", "", "2.4.1"
			return fixed
		}
		return ""
	})
	if !d.Completed {
		t.Fatalf("not complete: partition %d, upgrade %+v, Upgrading %+v", d.Partition, d.Upgrade, d.Upgrading)
	}
	for _, p := range o.Pods {
		if p.Revision != fixed {
			t.Errorf("%s ended on %s", p.Name, p.Revision)
		}
	}
}

func TestSharedVersionRule(t *testing.T) {
	for _, tc := range []struct {
		current, highest, want string
	}{
		{"2.4.0", "", "2.4.0"}, {"", "2.4.1", "2.4.1"}, {"2.4.0", "2.4.1", "2.4.1"}, {"2.4.1", "2.4.0", "2.4.1"},
		{"2.4.0", "2.4.0-abc", "2.4.0"}, {"", "", ""}, {"garbage", "2.4.1", "2.4.1"},
	} {
		if got := upgrade.Reference(tc.current, tc.highest); got != tc.want {
			t.Errorf("Reference(%q, %q) = %q, want %q", tc.current, tc.highest, got, tc.want)
		}
	}
	reason, msg := upgrade.VersionRefused("", "2.4.1", "2.4.0", false, v1alpha1.UnsealStatic)
	if reason != v1alpha1.ReasonDowngradeBlocked || !strings.Contains(msg, "status.highestVersion") || !strings.Contains(msg, "back to 2.4.1") {
		t.Errorf("a downgrade below the highest version a server ran: %q %q", reason, msg)
	}
	if reason, _ := upgrade.VersionRefused("", "2.4.1", "2.4.0", true, v1alpha1.UnsealStatic); reason != "" {
		t.Errorf("allowDowngrade: refused with %s", reason)
	}
	if reason, _ := upgrade.VersionRefused("", "2.4.1", "2.4.2", false, v1alpha1.UnsealStatic); reason != "" {
		t.Errorf("a newer target mid-rollout: refused with %s", reason)
	}
}

func TestHighestVersion(t *testing.T) {
	for _, tc := range []struct {
		name, prev, current string
		settled             bool
		reported            []string
		want                string
	}{
		{"mid-rollout it rises with what a server reports", "2.4.0", "", false, []string{"2.4.0", "2.4.1", ""}, "2.4.1"},
		{"mid-rollout it never falls", "2.4.1", "", false, []string{"2.4.0", "2.4.0", ""}, "2.4.1"},
		{"a pod not Ready outside a rollout keeps it", "2.4.1", "", true, []string{"2.4.1", ""}, "2.4.1"},
		{"settled it is the common version, after an allowed downgrade too", "2.4.1", "2.4.0", true, []string{"2.4.0"}, "2.4.0"},
		{"first seen", "", "2.4.0", false, nil, "2.4.0"},
		{"nothing reported", "", "", false, []string{"", "x"}, ""},
	} {
		if got := upgrade.HighestVersion(tc.prev, tc.current, tc.settled, tc.reported); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestARestartedServerCountsOnlyOnceTheLeaderReachesIt: a restarted
// server has applied what its own disk held, so its applied index shows
// it caught up at once, while the leader's Raft library still backs off
// from it and autopilot's verdict dates from before the restart. The next
// pod is released only once the leader itself counts the server a healthy
// voter, has heard from it since its container started, and its log has
// reached the leader's.
func TestARestartedServerCountsOnlyOnceTheLeaderReachesIt(t *testing.T) {
	restarted := func(f func(*upgrade.Server)) upgrade.Observed {
		return cluster(rolled(2), inProgress(2, upgrade.StepRaftSync, -5*time.Second),
			pod(2, func(p *upgrade.Pod) { p.Started = t0.Add(-8 * time.Second) }),
			server("bao-2", func(s *upgrade.Server) {
				s.Lag, s.LastContact, s.Index, s.LeaderIndex = 0, 2*time.Second, 900, 900
				f(s)
			}))
	}
	tests := []struct {
		name      string
		obs       upgrade.Observed
		partition int32
		waitsOn   string
	}{
		{name: "its own index caught up, but the leader's log moved on without reaching it: it waits",
			obs: restarted(func(s *upgrade.Server) { s.Received, s.Index, s.LeaderIndex = false, 700, 1714 }), partition: 2,
			waitsOn: "the leader's replication has not reached bao-2 yet: its Raft log ends at 700, the leader's at 1714"},
		{name: "the leader last heard from it before its container started: it waits",
			obs: restarted(func(s *upgrade.Server) { s.LastContact = 9 * time.Second }), partition: 2,
			waitsOn: "the leader has not heard from bao-2 since its server started 8s ago"},
		{name: "the leader gives no last contact for it: it waits",
			obs: restarted(func(s *upgrade.Server) { s.ContactKnown = false }), partition: 2,
			waitsOn: "the leader has not heard from bao-2"},
		{name: "autopilot on the leader still reports it unhealthy: it waits",
			obs: restarted(func(s *upgrade.Server) { s.Healthy = false }), partition: 2, waitsOn: "autopilot on the leader reports bao-2 unhealthy"},
		{name: "the leader does not count it as a voter: it waits",
			obs: restarted(func(s *upgrade.Server) { s.Voter = false }), partition: 2, waitsOn: "does not count bao-2 as a voter"},
		{name: "a healthy voter the leader heard from since its start and replicates to: the next pod goes",
			obs: restarted(func(*upgrade.Server) {}), partition: 1},
		{name: "another voter the leader's replication does not reach keeps the partition",
			obs: cluster(rolled(2), inProgress(2, "", -10*time.Second, "bao-2"),
				server("bao-0", func(s *upgrade.Server) { s.Received, s.Index, s.LeaderIndex = false, 10, 400 })), partition: 2,
			waitsOn: "the leader's replication does not reach the voter bao-0: its Raft log ends at 10, the leader's at 400"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := upgrade.Decide(tc.obs)
			if d.Partition != tc.partition {
				t.Fatalf("partition %d, want %d (%+v)", d.Partition, tc.partition, d.Upgrading)
			}
			if tc.waitsOn == "" {
				return
			}
			if d.Upgrading == nil || !strings.Contains(d.Upgrading.Message, tc.waitsOn) || !strings.Contains(d.Upgrading.Message, "leader's view:") {
				t.Fatalf("Upgrading %+v, want it to say %q and show the leader's view", d.Upgrading, tc.waitsOn)
			}
		})
	}
}

// TestAReleaseWhoseStatusWriteWasLostIsAdoptedNotRolledBack: a pass that
// verified bao-2 and lowered the partition onto bao-1 lost its status
// write (the operator was killed after the StatefulSet write). Rendering
// the recorded partition again would raise it, and the StatefulSet
// controller would recreate bao-1 on the old template, to replace it once
// more at the next release: the pod replaced twice by one rollout.
func TestAReleaseWhoseStatusWriteWasLostIsAdoptedNotRolledBack(t *testing.T) {
	live := func(p int32) func(*upgrade.Observed) {
		return func(o *upgrade.Observed) { o.LivePartition, o.LivePartitionKnown = p, true }
	}
	// bao-2 not yet verified in this observation: the rollout stays on it
	// unless it adopts the release.
	unverified := server("bao-2", func(s *upgrade.Server) { s.Received = false })
	tests := []struct {
		name      string
		obs       upgrade.Observed
		partition int32
		step      string
		completed []string
	}{
		{name: "the StatefulSet below the recorded partition: the rollout goes on from it, its pod to verify",
			obs:       cluster(rolled(2), notReady(1), unverified, inProgress(2, upgrade.StepRaftSync, -5*time.Second), live(1)),
			partition: 1, step: upgrade.StepPodReady, completed: []string{"bao-2"}},
		{name: "the StatefulSet at the recorded partition: nothing to adopt",
			obs:       cluster(rolled(2), notReady(1), unverified, inProgress(2, upgrade.StepRaftSync, -5*time.Second), live(2)),
			partition: 2, step: upgrade.StepRaftSync},
		{name: "a StatefulSet on another revision than the rollout's target is not adopted",
			obs: cluster(rolled(2), notReady(1), unverified, inProgress(2, upgrade.StepRaftSync, -5*time.Second), live(1),
				func(o *upgrade.Observed) { o.StatefulSetObserved = false }),
			partition: 2, step: upgrade.StepRaftSync},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := upgrade.Decide(tc.obs)
			if d.Partition != tc.partition || d.Upgrade == nil || d.Upgrade.Step != tc.step {
				t.Fatalf("partition %d, upgrade %+v; want partition %d, step %q", d.Partition, d.Upgrade, tc.partition, tc.step)
			}
			if fmt.Sprint(d.Upgrade.CompletedPods) != fmt.Sprint(tc.completed) {
				t.Fatalf("completed %v, want %v", d.Upgrade.CompletedPods, tc.completed)
			}
		})
	}
}

// TestARolloutStartWhoseStatusWriteWasLostIsAdopted: the pass that started
// the rollout released bao-2 and lost its status write. The preflight
// alone would find bao-2 not Ready and hold, rendering the partition at 3
// again, so that bao-2 came back on the old template and was replaced
// twice. A refused version is still held, every pod with it.
func TestARolloutStartWhoseStatusWriteWasLostIsAdopted(t *testing.T) {
	lost := func(o *upgrade.Observed) { o.LivePartition, o.LivePartitionKnown, o.LiveReplicas = 2, true, 3 }
	tests := []struct {
		name      string
		obs       upgrade.Observed
		partition int32
		step      string
	}{
		{name: "the released pod is verified, not held back",
			obs: cluster(notReady(2), lost), partition: 2, step: upgrade.StepPodReady},
		{name: "a StatefulSet at its replica count has no lost start",
			obs:       cluster(notReady(2), func(o *upgrade.Observed) { o.LivePartition, o.LivePartitionKnown, o.LiveReplicas = 3, true, 3 }),
			partition: 3, step: "-"},
		{name: "a refused version is held, every pod with it",
			obs: cluster(notReady(2), lost, func(o *upgrade.Observed) { o.SpecVersion = "2.3.0" }), partition: 3, step: "-"},
		{name: "a StatefulSet about to scale up with the template is no lost start",
			obs: cluster(notReady(2), lost, func(o *upgrade.Observed) { o.LivePartition, o.Replicas = 3, 4 }), partition: 4, step: "-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := upgrade.Decide(tc.obs)
			if d.Partition != tc.partition || stepOf(d) != tc.step {
				t.Fatalf("partition %d, step %q; want %d, %q (%+v)", d.Partition, stepOf(d), tc.partition, tc.step, d.Upgrading)
			}
		})
	}
}
