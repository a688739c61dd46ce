package upgrade_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/openbao/operator/internal/upgrade"
)

// FuzzNoReleasePastAnUnverifiedOrActivePod feeds Decide arbitrary
// sequences of observations (pods rolled or not, ready or not, active or
// not; health, autopilot's verdicts, failure tolerance and Raft lag good
// or bad; the leader's view; time passing; a pass that loses its status
// write after its StatefulSet write, as when the operator is killed in
// between, so that the next observes the old status beside the partition
// the StatefulSet holds) and holds four invariants whenever a pass lowers
// the partition below the one the StatefulSet holds:
//   - every pod above the new partition is, in that very observation,
//     Ready on the new template, unsealed and caught up;
//   - the pod just released is not the active server, unless it is the
//     only one;
//   - never two voters down by our hand: every other server is Ready and
//     unsealed, every other voter healthy and caught up as autopilot
//     sees it, and autopilot tolerates a failure;
//   - never a release while another voter is not healthy as the leader
//     sees it: every pod above the new partition is a voter the leader
//     counts healthy, heard from since its container started, and reached
//     by the leader's replication (its log at the leader's index), and
//     every other voter is reached by that replication too.
//
// and one whenever a pass asks a server to step down (checkStepDown).
func FuzzNoReleasePastAnUnverifiedOrActivePod(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{255, 0, 255, 0, 7, 7, 7, 7, 1, 2, 4, 8, 16, 32, 64, 128})
	f.Add([]byte{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3})
	f.Fuzz(func(t *testing.T, script []byte) {
		o := cluster()
		o.LivePartition, o.LivePartitionKnown, o.LiveReplicas = o.Replicas, true, o.Replicas
		for i, b := range script {
			o.Now = t0.Add(time.Duration(i) * time.Duration(b%64+1) * time.Second)
			applyObservation(&o, b, script[(i+1)%len(script)], script[(i+2)%len(script)], script[(i+3)%len(script)])
			// The partition the StatefulSet holds; a pass may lower it
			// below that only by a release it checked.
			d := upgrade.Decide(o)
			if d.Partition < o.LivePartition {
				checkRelease(t, o, d)
			}
			if d.StepDown != "" {
				checkStepDown(t, o, d)
			}
			o.LivePartition = d.Partition
			// Bit 3 of b loses the pass's status write after its
			// StatefulSet write (the operator killed in between).
			if b&0x08 == 0 {
				o.Upgrade = d.Upgrade
			}
		}
	})
}

// applyObservation changes the world by four script bytes: which pods the
// StatefulSet controller rolled, readiness, leadership, health, lag,
// autopilot's verdicts, and the leader's view (its last contact, its
// replication reaching each server, when each container started).
func applyObservation(o *upgrade.Observed, b, c, e, f byte) {
	for i := range o.Pods {
		bit := byte(1) << i
		if b&bit != 0 && (o.Upgrade == nil || int32(i) >= o.Upgrade.CurrentPartition) {
			o.Pods[i].Revision = newRev
		}
		o.Pods[i].Ready = c&bit == 0
		name := o.Pods[i].Name
		o.Health[name] = upgrade.Health{Initialized: true, Sealed: c&(bit<<3) != 0}
		lag := uint64(b>>4) * 20
		o.Raft.Servers[name] = upgrade.Server{Voter: e&(bit<<5) == 0 || e&0x10 == 0, Healthy: e&bit == 0, LagKnown: c&0x40 == 0, Lag: lag,
			Received: f&bit == 0, ContactKnown: f&0x80 == 0, LastContact: time.Duration((f>>3)&7) * time.Second}
		o.Pods[i].Started = o.Now.Add(-time.Duration((f>>(5+i%2))&3) * 3 * time.Second)
	}
	o.Raft.FailureTolerance = int(e>>3) % 3 // 0, 1 or 2
	leader := int(c>>6) % 4                 // 3: nobody leads
	for i := range o.Pods {
		o.Pods[i].Active = i == leader
	}
}

func checkRelease(t *testing.T, o upgrade.Observed, d upgrade.Decision) {
	t.Helper()
	for _, p := range o.Pods {
		if int32(p.Ordinal) <= d.Partition {
			continue
		}
		h, s := o.Health[p.Name], o.Raft.Servers[p.Name]
		if !p.Ready || p.Revision != newRev || !h.Initialized || h.Sealed || !s.LagKnown || s.Lag > o.Settings.MaxRaftLag {
			t.Fatalf("partition lowered to %d past %s, which is not Ready, unsealed and caught up on the new template: %+v %+v %+v",
				d.Partition, p.Name, p, h, s)
		}
		heard := o.Now.Add(-s.LastContact)
		if !s.Voter || !s.Healthy || !s.ContactKnown || !heard.After(p.Started) || !s.Received {
			t.Fatalf("partition lowered to %d past %s, which the leader does not count as a healthy voter it heard from since "+
				"its start (%s) and replicates to: %+v", d.Partition, p.Name, p.Started, s)
		}
	}
	released := o.Pods[d.Partition]
	if released.Active && released.Revision != newRev && o.Replicas > 1 {
		t.Fatalf("partition lowered onto %s while it is the active server", released.Name)
	}
	checkPeers(t, o, released.Name)
}

// FuzzEarlyStepDownLeavesTheLeadToARolledServer starts each pass in the
// middle of a rollout: bao-2 rolled and recorded, bao-1 released and
// verified (its step RaftSync or before), bao-0 not rolled; the script
// varies everything else (readiness, health, leadership, the leader's
// view of each server, when each container started, when a step-down was
// last asked) and keeps or drops each pass's status. Whenever a pass asks
// a step-down, checkStepDown holds; and a pass that kept the status of
// one that asked it never asks it again of the same server before that
// server's pod is released, nor of another while bao-1 is verified.
func FuzzEarlyStepDownLeavesTheLeadToARolledServer(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0})
	// Twice in a row: bao-0 active, bao-2 counted caught up, bao-1 not
	// reached by the leader's replication yet.
	f.Add([]byte{0, 0, 0, 0x42, 0, 0, 0, 0x42})
	f.Fuzz(func(t *testing.T, script []byte) {
		o := cluster(rolled(2), rolled(1), inProgress(1, upgrade.StepRaftSync, 0, "bao-2"))
		o.LivePartition, o.LivePartitionKnown, o.LiveReplicas = 1, true, 3
		asked := ""
		for i := 0; i+3 < len(script); i += 4 {
			b, c, e, g := script[i], script[i+1], script[i+2], script[i+3]
			o.Now = t0.Add(time.Duration(i+1) * time.Second)
			applyObservation(&o, 0, c, e, g)
			o.Pods[2].Revision, o.Pods[1].Revision, o.Pods[0].Revision = newRev, newRev, oldRev
			o.Pods[1].Started = t0.Add(-time.Duration(b&3) * time.Second)
			d := upgrade.Decide(o)
			if d.StepDown != "" {
				checkStepDown(t, o, d)
				if d.StepDown == asked && d.Partition == 1 {
					t.Fatalf("%s asked to step down twice while bao-1 is verified (pass %d)", asked, i/4)
				}
				asked = d.StepDown
			}
			// Bit 7 of b loses the status write; a pass that moved on
			// (released bao-0 or waits on its step-down) is not kept
			// either, so that each pass verifies bao-1. Without the status
			// of the pass that asked, asking again is right.
			if b&0x80 == 0 && d.Upgrade != nil && d.Partition == 1 && d.Upgrade.Step != upgrade.StepStepDown {
				o.Upgrade = d.Upgrade
			} else {
				asked = ""
			}
		}
	})
}

// checkStepDown holds, for a pass that asks the server of d.StepDown to
// step down: it is the active server and not rolled yet; every other
// server is Ready and unsealed; and another voter the leader counts
// healthy, reached by its replication and caught up can take over. A
// step-down asked while the pod released last is still verified (the
// partition held, the step RaftSync: the pod not counted yet) must leave
// the leadership to a rolled server, one that will not be rolled again,
// which the leader has also heard from since its start.
func checkStepDown(t *testing.T, o upgrade.Observed, d upgrade.Decision) {
	t.Helper()
	early := d.Upgrade != nil && d.Upgrade.Step == upgrade.StepRaftSync
	takeOver := false
	for _, p := range o.Pods {
		if p.Name == d.StepDown {
			if !p.Active || p.Revision == newRev {
				t.Fatalf("%s asked to step down, which is not the active server or is rolled already: %+v", p.Name, p)
			}
			continue
		}
		if h := o.Health[p.Name]; !p.Ready || !h.Initialized || h.Sealed {
			t.Fatalf("%s asked to step down while %s is not Ready and unsealed: %+v %+v", d.StepDown, p.Name, p, h)
		}
		s := o.Raft.Servers[p.Name]
		caughtUp := s.Voter && s.Healthy && s.Received && s.LagKnown && s.Lag <= o.Settings.MaxRaftLag
		heard := s.ContactKnown && o.Now.Add(-s.LastContact).After(p.Started)
		takeOver = takeOver || (caughtUp && (!early || (heard && p.Revision == newRev && int32(p.Ordinal) != d.Partition)))
	}
	if !takeOver {
		t.Fatalf("%s asked to step down (while a pod is verified: %t) with no caught-up voter to take over: pods %+v, servers %+v",
			d.StepDown, early, o.Pods, o.Raft.Servers)
	}
}

// checkPeers holds "never two voters down by our hand" for a release of
// the pod named released.
func checkPeers(t *testing.T, o upgrade.Observed, released string) {
	t.Helper()
	voters := 0
	for _, p := range o.Pods {
		s := o.Raft.Servers[p.Name]
		if s.Voter {
			voters++
		}
		if p.Name == released {
			continue
		}
		if h := o.Health[p.Name]; !p.Ready || !h.Initialized || h.Sealed {
			t.Fatalf("%s released while %s is not Ready and unsealed: %+v %+v", released, p.Name, p, h)
		}
		if s.Voter && (!s.Healthy || !s.LagKnown || s.Lag > o.Settings.MaxRaftLag || !s.Received) {
			t.Fatalf("%s released while the voter %s is unhealthy or behind: %+v", released, p.Name, s)
		}
	}
	if voters < 3 || o.Raft.FailureTolerance < 1 {
		t.Fatalf("%s released with %d voters and a failure tolerance of %d", released, voters, o.Raft.FailureTolerance)
	}
}

// FuzzReadReplicasChangeNoRolloutDecision: read replicas are Raft
// non-voters outside the voters' StatefulSet. Added to any observation of
// the script above, sick or lagging, and with autopilot's cluster verdict
// turned unhealthy by them, they change nothing a rollout decides: no
// partition, step-down, step or problem reason. They are neither required
// for nor counted in the voters' quorum.
func FuzzReadReplicasChangeNoRolloutDecision(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{255, 0, 255, 0, 7, 7, 7, 7, 1, 2, 4, 8, 16, 32, 64, 128})
	f.Fuzz(func(t *testing.T, script []byte) {
		o := cluster()
		for i, b := range script {
			o.Now = t0.Add(time.Duration(i) * time.Duration(b%64+1) * time.Second)
			applyObservation(&o, b, script[(i+1)%len(script)], script[(i+2)%len(script)], script[(i+3)%len(script)])
			// Autopilot's verdict, as it gives it: every server healthy.
			o.Raft.Healthy = true
			for _, s := range o.Raft.Servers {
				o.Raft.Healthy = o.Raft.Healthy && s.Healthy
			}
			with := o
			with.Raft = &upgrade.Raft{Healthy: o.Raft.Healthy, FailureTolerance: o.Raft.FailureTolerance, Servers: map[string]upgrade.Server{}}
			for id, s := range o.Raft.Servers {
				with.Raft.Servers[id] = s
			}
			for r := range 2 {
				sick := b&(1<<(6+r)) != 0
				with.Raft.Servers[fmt.Sprintf("bao-read-%d", r)] = upgrade.Server{Healthy: !sick, LagKnown: !sick, Lag: uint64(b)}
				if sick {
					with.Raft.Healthy = false
				}
			}
			a, d := upgrade.Decide(o), upgrade.Decide(with)
			if a.Partition != d.Partition || a.StepDown != d.StepDown || stepOf(a) != stepOf(d) || reasonOf(a.Problem) != reasonOf(d.Problem) {
				t.Fatalf("read replicas changed the rollout:\nwithout: partition %d step-down %q step %q problem %+v\nwith:    partition %d step-down %q step %q problem %+v",
					a.Partition, a.StepDown, stepOf(a), a.Problem, d.Partition, d.StepDown, stepOf(d), d.Problem)
			}
			o.Upgrade = a.Upgrade
		}
	})
}

func stepOf(d upgrade.Decision) string {
	if d.Upgrade == nil {
		return "-"
	}
	return string(d.Upgrade.Step)
}

// FuzzNoVoterReleasedWhileReadReplicasBehind: with two read replicas whose
// StatefulSet progress, pods, health and lag the script also varies, a
// pass that lowers the partition (releases a voter) does so only when
// ReadBehind, in that very observation, says the read replicas are all
// rolled, Ready, unsealed, healthy and caught up; and no timeout, halt or
// resume ever releases one otherwise.
func FuzzNoVoterReleasedWhileReadReplicasBehind(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{255, 0, 255, 0, 7, 7, 7, 7, 1, 2, 4, 8, 16, 32, 64, 128})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, script []byte) {
		o := cluster()
		for i, b := range script {
			c, e := script[(i+1)%len(script)], script[(i+2)%len(script)]
			o.Now = t0.Add(time.Duration(i) * time.Duration(b%64+1) * 10 * time.Second)
			applyObservation(&o, b, c, e, script[(i+3)%len(script)])
			o.Read = &upgrade.ReadReplicas{Replicas: 2, Observed: e&0x40 == 0, Rolled: e&0x80 == 0, Pods: map[string]upgrade.ReadPod{}}
			for r := range 2 {
				name := fmt.Sprintf("bao-read-%d", r)
				bits := (b ^ c) >> (2 * r)
				if bits&0x3 != 0x3 {
					o.Read.Pods[name] = upgrade.ReadPod{Ready: bits&1 == 0 || b&0x80 == 0, Unsealed: bits&2 == 0 || c&0x20 == 0}
				}
				o.Raft.Servers[name] = upgrade.Server{Healthy: e&(0x10<<r) == 0 || b&1 == 0, LagKnown: true, Lag: uint64(c&0x7) * 40}
			}
			if i%5 == 4 {
				o.Settings.ResumeRequest = fmt.Sprint(i)
			}
			before := o.Replicas
			if o.Upgrade != nil {
				before = o.Upgrade.CurrentPartition
			}
			d := upgrade.Decide(o)
			if behind := upgrade.ReadBehind(o.Read, o.Raft, o.Settings.MaxRaftLag); d.Partition < before && behind != "" {
				t.Fatalf("partition lowered from %d to %d while the read replicas are behind: %s", before, d.Partition, behind)
			}
			o.Upgrade = d.Upgrade
		}
	})
}
