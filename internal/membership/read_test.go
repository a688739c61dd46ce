package membership_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/openbao/operator/internal/membership"
)

// withReadReplicas adds n healthy non-voters bao-read-0.. to servers.
func withReadReplicas(servers map[string]membership.Server, n int) map[string]membership.Server {
	out := map[string]membership.Server{}
	for id, s := range servers {
		out[id] = s
	}
	for i := range n {
		out[fmt.Sprintf("bao-read-%d", i)] = membership.Server{Healthy: true}
	}
	return out
}

func TestDecideRead(t *testing.T) {
	tests := []struct {
		name       string
		obs        membership.ReadObserved
		render     bool
		replicas   int32
		removePeer string
		blocked    bool
	}{
		{"no read replicas asked for and none running renders nothing",
			membership.ReadObserved{Name: "bao-read"}, false, 0, "", false},
		{"read replicas asked for are rendered at once, without asking Raft",
			membership.ReadObserved{Wanted: true, Spec: 2, Name: "bao-read"}, true, 2, "", false},
		{"zero read replicas asked for still renders the Service",
			membership.ReadObserved{Wanted: true, Name: "bao-read"}, true, 0, "", false},
		{"a scale-down removes the highest read replica from Raft in the pass that lowers the count",
			membership.ReadObserved{Wanted: true, Spec: 1, Current: 2, Name: "bao-read", Servers: withReadReplicas(servers(3), 2)},
			true, 1, "bao-read-1", false},
		{"a scale-down with Raft unreadable holds the count",
			membership.ReadObserved{Wanted: true, Spec: 1, Current: 2, Name: "bao-read", Problem: "no token"}, true, 2, "", true},
		{"a departing read replica already out of Raft lets its pod go",
			membership.ReadObserved{Wanted: true, Spec: 1, Current: 2, Name: "bao-read", Servers: withReadReplicas(servers(3), 1)},
			true, 1, "", false},
		{"a departing read replica that Raft calls a voter is never removed",
			membership.ReadObserved{Wanted: true, Spec: 0, Current: 1, Name: "bao-read",
				Servers: map[string]membership.Server{"bao-0": {Voter: true, Healthy: true}, "bao-read-0": {Voter: true, Healthy: true}}},
			true, 1, "", true},
		{"removing spec.readReplicas drains them before the objects go",
			membership.ReadObserved{Current: 1, Name: "bao-read", Servers: withReadReplicas(servers(3), 1)}, true, 0, "bao-read-0", false},
		{"a scale-down needs no healthy voter quorum: a non-voter costs none",
			membership.ReadObserved{Wanted: true, Current: 1, Name: "bao-read", Servers: withReadReplicas(servers(1, "bao-1", "bao-2"), 1)},
			true, 0, "bao-read-0", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := membership.DecideRead(tc.obs)
			if d.Render != tc.render || d.Replicas != tc.replicas || d.RemovePeer != tc.removePeer || d.Blocked != tc.blocked {
				t.Fatalf("DecideRead = %+v, want render %v replicas %d removePeer %q blocked %v",
					d, tc.render, tc.replicas, tc.removePeer, tc.blocked)
			}
		})
	}
}

// TestReadScaleDownTakesEachReplicaOutOfRaftBeforeItsPod walks the removal
// of spec.readReplicas with three running: each pass removes one peer and
// only then one pod, the voters stay, and the objects go last.
func TestReadScaleDownTakesEachReplicaOutOfRaftBeforeItsPod(t *testing.T) {
	o := membership.ReadObserved{Current: 3, Name: "bao-read", Servers: withReadReplicas(servers(3), 3)}
	for pass := 0; pass < 10; pass++ {
		d := membership.DecideRead(o)
		if d.RemovePeer != "" {
			delete(o.Servers, d.RemovePeer)
		}
		for i := d.Replicas; i < o.Current; i++ {
			if _, member := o.Servers[fmt.Sprintf("bao-read-%d", i)]; member {
				t.Fatalf("pass %d: the pod of bao-read-%d goes while it is a Raft peer", pass, i)
			}
		}
		o.Current = d.Replicas
		if !d.Render {
			break
		}
	}
	if d := membership.DecideRead(o); d.Render || o.Current != 0 || len(o.Servers) != 3 {
		t.Fatalf("ended with %d read pods, render %v and peers %v; want none, no objects and the 3 voters", o.Current, d.Render, o.Servers)
	}
}

// FuzzReadDecisionRemovesOnlyNonVotersAndNoPodStillInRaft: whatever the
// membership, a read decision removes at most one peer, never a voter and
// never one but the highest read replica; lowers the count by at most one
// and only past a server out of Raft or removed in the same pass; raises it
// only to the spec; and stops rendering only with nothing running.
func FuzzReadDecisionRemovesOnlyNonVotersAndNoPodStillInRaft(f *testing.F) {
	f.Add(true, int32(1), int32(3), uint8(3), uint8(3), uint8(0), false)
	f.Add(false, int32(0), int32(2), uint8(3), uint8(1), uint8(1), true)
	f.Fuzz(func(t *testing.T, wanted bool, spec, current int32, voters, reads, readVoters uint8, unreadable bool) {
		o := membership.ReadObserved{Wanted: wanted, Spec: abs(spec) % 11, Current: abs(current) % 11, Name: "bao-read"}
		if !unreadable {
			o.Servers = withReadReplicas(servers(int(voters%8)), int(reads%11))
			for i := range int(readVoters % 11) {
				o.Servers[fmt.Sprintf("bao-read-%d", i)] = membership.Server{Voter: true, Healthy: true}
			}
		}
		d := membership.DecideRead(o)
		departing := fmt.Sprintf("bao-read-%d", o.Current-1)
		if d.RemovePeer != "" {
			s, member := o.Servers[d.RemovePeer]
			if !member || s.Voter || d.RemovePeer != departing || !strings.HasPrefix(d.RemovePeer, "bao-read-") {
				t.Fatalf("removes %s (member %v, %+v); only the departing non-voter %s may go: %+v", d.RemovePeer, member, s, departing, o)
			}
		}
		switch {
		case d.Replicas < o.Current-1:
			t.Fatalf("drops %d read pods in one pass: %+v", o.Current-d.Replicas, o)
		case d.Replicas == o.Current-1:
			if _, member := o.Servers[departing]; o.Servers == nil || member && d.RemovePeer != departing {
				t.Fatalf("%s's pod goes while it is a Raft peer: %+v -> %+v", departing, o, d)
			}
		case d.Replicas > o.Current && (!o.Wanted || d.Replicas != o.Spec):
			t.Fatalf("scales up to %d, not the spec's %d: %+v", d.Replicas, o.Spec, o)
		}
		if !d.Render && (o.Wanted || o.Current > 0) {
			t.Fatalf("stops rendering with %d read pods running or spec.readReplicas set: %+v", o.Current, o)
		}
	})
}

// FuzzNonVotersDoNotChangeAVoterDecision extends Decide's quorum rule to
// non-voters: adding read replicas (healthy or not) to the Raft membership
// changes nothing a voter scale-up or scale-down decides, since they are
// neither counted in nor required for a quorum.
func FuzzNonVotersDoNotChangeAVoterDecision(f *testing.F) {
	f.Add(int32(3), int32(5), uint8(5), uint8(2), uint8(1), uint8(1), false)
	f.Add(int32(3), int32(4), uint8(2), uint8(3), uint8(3), uint8(0), true)
	f.Fuzz(func(t *testing.T, spec, current int32, healthy, unhealthy, reads, sickReads uint8, activeLast bool) {
		voters := servers(int(healthy % 8))
		for i := range int(unhealthy % 4) {
			voters[fmt.Sprintf("bao-%d", int(healthy%8)+i)] = membership.Server{Voter: true}
		}
		o := membership.Observed{Spec: abs(spec) % 12, Current: abs(current) % 12, Name: "bao", Servers: voters}
		if activeLast && o.Current > 0 {
			o.ActivePod = fmt.Sprintf("bao-%d", o.Current-1)
		}
		with := o
		with.Servers = withReadReplicas(voters, int(reads%11))
		for i := range int(sickReads % 11) {
			with.Servers[fmt.Sprintf("bao-read-%d", i)] = membership.Server{}
		}
		a, b := membership.Decide(o), membership.Decide(with)
		if a.Replicas != b.Replicas || a.RemovePeer != b.RemovePeer || a.StepDown != b.StepDown || a.Blocked != b.Blocked || a.Message != b.Message {
			t.Fatalf("non-voters changed the decision:\nwithout %+v\nwith    %+v\nfor %+v", a, b, with)
		}
	})
}

func abs(v int32) int32 {
	if v < 0 {
		return -(v + 1)
	}
	return v
}
