package upgrade_test

import (
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/upgrade"
)

// rolledReads are two read replicas on the new template, Ready, unsealed,
// healthy and caught up.
func rolledReads(change func(*upgrade.ReadReplicas, map[string]upgrade.Server)) func(*upgrade.Observed) {
	return func(o *upgrade.Observed) {
		r := &upgrade.ReadReplicas{Replicas: 2, Observed: true, Rolled: true, Pods: map[string]upgrade.ReadPod{
			"bao-read-0": {Ready: true, Unsealed: true}, "bao-read-1": {Ready: true, Unsealed: true}}}
		for _, id := range []string{"bao-read-0", "bao-read-1"} {
			o.Raft.Servers[id] = upgrade.Server{Healthy: true, LagKnown: true, Lag: 2}
		}
		if change != nil {
			change(r, o.Raft.Servers)
		}
		o.Read = r
	}
}

// TestTheReadReplicasRollBeforeTheVoters: a rollout starts by waiting for
// the read replicas (step ReadReplicas): no voter is released until every
// read replica runs the new template and passes the checks a released
// voter passes (Ready, unsealed, healthy, caught up), and the wait says
// which one is behind. Once spec.upgrade.podReadyTimeout has passed since
// the rollout began, it halts as a voter's PodReady step does, still
// without touching a voter.
func TestTheReadReplicasRollBeforeTheVoters(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*upgrade.ReadReplicas, map[string]upgrade.Server)
		held   string
	}{
		{"every read replica rolled and caught up: the voters start", nil, ""},
		{"the StatefulSet controller has not seen the new template", func(r *upgrade.ReadReplicas, _ map[string]upgrade.Server) { r.Observed = false }, "not rolled all 2"},
		{"a read replica still on the old template", func(r *upgrade.ReadReplicas, _ map[string]upgrade.Server) { r.Rolled = false }, "not rolled all 2"},
		{"a read replica without a pod", func(r *upgrade.ReadReplicas, _ map[string]upgrade.Server) { delete(r.Pods, "bao-read-1") }, "1 of 2"},
		{"a read replica crash-looping on the new release", func(r *upgrade.ReadReplicas, _ map[string]upgrade.Server) {
			r.Pods["bao-read-1"] = upgrade.ReadPod{}
		}, "bao-read-1 is not Ready"},
		{"a sealed read replica", func(r *upgrade.ReadReplicas, _ map[string]upgrade.Server) {
			r.Pods["bao-read-0"] = upgrade.ReadPod{Ready: true}
		}, "bao-read-0 is not Ready and unsealed"},
		{"a read replica autopilot calls unhealthy", func(_ *upgrade.ReadReplicas, s map[string]upgrade.Server) {
			s["bao-read-0"] = upgrade.Server{LagKnown: true}
		}, "bao-read-0 healthy"},
		{"a read replica behind the leader", func(_ *upgrade.ReadReplicas, s map[string]upgrade.Server) {
			s["bao-read-1"] = upgrade.Server{Healthy: true, LagKnown: true, Lag: 5000}
		}, "bao-read-1 trails the leader"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := upgrade.Decide(cluster(rolledReads(tc.change)))
			if tc.held == "" {
				if d.Partition != 2 || d.Problem != nil || stepOf(d) != upgrade.StepPodReady {
					t.Fatalf("partition %d step %q problem %+v; want bao-2 released", d.Partition, stepOf(d), d.Problem)
				}
				return
			}
			if d.Partition != 3 || d.Problem != nil || stepOf(d) != upgrade.StepReadReplicas || !d.Started ||
				d.Upgrading == nil || !strings.Contains(d.Upgrading.Message, tc.held) || !strings.Contains(d.Upgrading.Message, "read replicas roll first") {
				t.Fatalf("partition %d step %q problem %+v upgrading %+v; want the rollout started, every voter held, naming %q",
					d.Partition, stepOf(d), d.Problem, d.Upgrading, tc.held)
			}
			o := cluster(rolledReads(tc.change), at(upgrade.DefaultPodReadyTimeout))
			o.Upgrade = d.Upgrade
			h := upgrade.Decide(o)
			if h.Partition != 3 || h.Upgrade == nil || h.Upgrade.Halted != v1alpha1.ReasonPodReadyTimeout ||
				reasonOf(h.Problem) != v1alpha1.ReasonPodReadyTimeout || !strings.Contains(h.Problem.Message, tc.held) ||
				reasonOf(h.Upgrading) != v1alpha1.ReasonUpgradeHalted {
				t.Fatalf("after podReadyTimeout: partition %d status %+v problem %+v upgrading %+v; want halted on PodReadyTimeout, naming %q",
					h.Partition, h.Upgrade, h.Problem, h.Upgrading, tc.held)
			}
		})
	}
}

// TestAHaltOnTheReadReplicasResumesLikeAVoterStep: a rollout halted on the
// read replicas stays halted (and says what still holds it) until
// resumeRequest changes; a resume with a read replica still behind waits
// a new podReadyTimeout and releases no voter; one with the read replicas
// fixed releases the highest voter in the same pass.
func TestAHaltOnTheReadReplicasResumesLikeAVoterStep(t *testing.T) {
	sick := func(r *upgrade.ReadReplicas, _ map[string]upgrade.Server) { r.Pods["bao-read-1"] = upgrade.ReadPod{} }
	halted := func(o *upgrade.Observed) {
		inProgress(3, upgrade.StepReadReplicas, -time.Hour)(o)
		o.Upgrade.Halted, o.Upgrade.ResumeRequest = v1alpha1.ReasonPodReadyTimeout, "first"
		o.Settings.ResumeRequest = "first"
	}
	d := upgrade.Decide(cluster(rolledReads(sick), halted))
	if d.Partition != 3 || reasonOf(d.Problem) != v1alpha1.ReasonPodReadyTimeout || !strings.Contains(d.Problem.Message, "Now: the read replicas roll first") {
		t.Fatalf("halted: partition %d problem %+v; want held, saying the read replicas still hold it", d.Partition, d.Problem)
	}
	resumed := func(o *upgrade.Observed) { o.Settings.ResumeRequest = "second" }
	d = upgrade.Decide(cluster(rolledReads(sick), halted, resumed))
	if d.Partition != 3 || d.Upgrade.Halted != "" || d.Problem != nil || !d.Upgrade.StepStartedAt.Time.Equal(t0) {
		t.Fatalf("resumed with a read replica down: partition %d status %+v problem %+v; want a new wait, no voter released",
			d.Partition, d.Upgrade, d.Problem)
	}
	d = upgrade.Decide(cluster(rolledReads(nil), halted, resumed))
	if d.Partition != 2 || stepOf(d) != upgrade.StepPodReady {
		t.Fatalf("resumed with the read replicas fixed: partition %d step %q; want bao-2 released", d.Partition, stepOf(d))
	}
}

// TestAReadReplicaLostMidRolloutHoldsTheNextVoter: after the read step, a
// read replica that stops being Ready holds the release of the next voter,
// under the same timeout, and then halts.
func TestAReadReplicaLostMidRolloutHoldsTheNextVoter(t *testing.T) {
	sick := func(r *upgrade.ReadReplicas, _ map[string]upgrade.Server) { r.Pods["bao-read-0"] = upgrade.ReadPod{} }
	d := upgrade.Decide(cluster(rolledReads(sick), rolled(2), inProgress(2, "", 0, "bao-2")))
	if d.Partition != 2 || d.Problem != nil || !strings.Contains(d.Upgrading.Message, "bao-read-0 is not Ready") {
		t.Fatalf("partition %d problem %+v upgrading %+v; want bao-1 held, naming bao-read-0", d.Partition, d.Problem, d.Upgrading)
	}
	d = upgrade.Decide(cluster(rolledReads(sick), rolled(2), inProgress(2, "", 0, "bao-2"), at(upgrade.DefaultPodReadyTimeout)))
	if d.Partition != 2 || reasonOf(d.Problem) != v1alpha1.ReasonPodReadyTimeout {
		t.Fatalf("after podReadyTimeout: partition %d problem %+v; want halted on PodReadyTimeout", d.Partition, d.Problem)
	}
}

func TestNoReadReplicasHoldNothing(t *testing.T) {
	if got := upgrade.ReadBehind(nil, nil, 0); got != "" {
		t.Errorf("without read replicas: %q", got)
	}
	if got := upgrade.ReadBehind(&upgrade.ReadReplicas{}, nil, 0); got != "" {
		t.Errorf("with zero read replicas: %q", got)
	}
}
