package membership_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/membership"
)

func servers(n int, unhealthy ...string) map[string]membership.Server {
	out := map[string]membership.Server{}
	for i := range n {
		out[fmt.Sprintf("bao-%d", i)] = membership.Server{Voter: true, Healthy: true}
	}
	for _, id := range unhealthy {
		out[id] = membership.Server{Voter: true}
	}
	return out
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name     string
		obs      membership.Observed
		replicas int32
		remove   string
		stepDown string
		blocked  bool
	}{
		{"no StatefulSet yet renders the spec", membership.Observed{Spec: 3}, 3, "", "", false},
		{"a scale-up is rendered at once", membership.Observed{Spec: 5, Current: 3, Servers: servers(3)}, 5, "", "", false},
		{"a change during a rollout waits", membership.Observed{Spec: 5, Current: 3, RolloutRunning: true}, 3, "", "", false},
		{"a scale-down removes the highest peer first and drops its pod in the same pass",
			membership.Observed{Spec: 3, Current: 5, Name: "bao", Servers: servers(5), ActivePod: "bao-0"}, 4, "bao-4", "", false},
		{"a departing leader steps down first",
			membership.Observed{Spec: 3, Current: 5, Name: "bao", Servers: servers(5), ActivePod: "bao-4"}, 5, "", "bao-4", false},
		{"a peer already removed lets its pod go",
			membership.Observed{Spec: 3, Current: 4, Name: "bao", Servers: servers(3), ActivePod: "bao-0"}, 3, "", "", false},
		{"no Raft state: hold and say why",
			membership.Observed{Spec: 3, Current: 5, Name: "bao", Problem: "login refused"}, 5, "", "", true},
		{"removing a peer while the others lack quorum waits",
			membership.Observed{Spec: 3, Current: 5, Name: "bao", Servers: servers(5, "bao-1", "bao-2"), ActivePod: "bao-0"}, 5, "", "", true},
		{"an unhealthy departing peer may go when the rest keep quorum",
			membership.Observed{Spec: 3, Current: 5, Name: "bao", Servers: servers(5, "bao-4"), ActivePod: "bao-0"}, 4, "bao-4", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := membership.Decide(tc.obs)
			if d.Replicas != tc.replicas || d.RemovePeer != tc.remove || d.StepDown != tc.stepDown || d.Blocked != tc.blocked {
				t.Errorf("got %+v; want replicas %d, remove %q, step-down %q, blocked %v", d, tc.replicas, tc.remove, tc.stepDown, tc.blocked)
			}
		})
	}
}

// TestScaleDownNeverLosesQuorum walks 7 → 3 with every server healthy and
// checks that each removal leaves a quorum of the configuration it shrinks.
func TestScaleDownNeverLosesQuorum(t *testing.T) {
	o := membership.Observed{Spec: 3, Current: 7, Name: "bao", Servers: servers(7), ActivePod: "bao-6"}
	for pass := 0; pass < 20 && o.Current != o.Spec; pass++ {
		d := membership.Decide(o)
		if d.StepDown != "" {
			o.ActivePod = "bao-0"
			continue
		}
		if d.RemovePeer != "" {
			delete(o.Servers, d.RemovePeer)
			if len(o.Servers) < int(d.Replicas) {
				t.Fatalf("Raft holds %d servers but %d pods stay", len(o.Servers), d.Replicas)
			}
		}
		if d.Replicas < o.Current-1 {
			t.Fatalf("dropped %d pods in one pass", o.Current-d.Replicas)
		}
		o.Current = d.Replicas
	}
	if o.Current != 3 || len(o.Servers) != 3 {
		t.Fatalf("ended with %d pods and %d peers", o.Current, len(o.Servers))
	}
}

// TestAScaleUpDeletesTheVolumesOfRemovedPeersFirst: 3 → 5 after an earlier
// 5 → 3 finds data-bao-3 and data-bao-4. Their servers left the Raft
// configuration, so a server started on either would never rejoin: both
// go before the StatefulSet grows. A volume whose server is still a
// member holds current data and stays.
func TestAScaleUpDeletesTheVolumesOfRemovedPeersFirst(t *testing.T) {
	left := map[string]membership.Volume{"bao-3": {Name: "data-bao-3"}, "bao-4": {Name: "data-bao-4"}}
	d := membership.Decide(membership.Observed{Spec: 5, Current: 3, Name: "bao", Servers: servers(3), LeftVolumes: left})
	if d.Replicas != 3 || fmt.Sprint(d.DeleteVolumes) != "[data-bao-3 data-bao-4]" || d.Requeue == 0 {
		t.Fatalf("stale volumes: %+v, want both deleted while 3 replicas stay", d)
	}
	left["bao-3"] = membership.Volume{Name: "data-bao-3", Terminating: true}
	left["bao-4"] = membership.Volume{Name: "data-bao-4", Terminating: true}
	if d := membership.Decide(membership.Observed{Spec: 5, Current: 3, Name: "bao", Servers: servers(3), LeftVolumes: left}); d.Replicas != 3 || len(d.DeleteVolumes) != 0 {
		t.Fatalf("volumes being deleted: %+v, want a wait at 3", d)
	}
	if d := membership.Decide(membership.Observed{Spec: 5, Current: 3, Name: "bao", Problem: "sealed", LeftVolumes: left}); d.Replicas != 3 || len(d.DeleteVolumes) != 0 {
		t.Fatalf("membership unknown: %+v, want a wait and nothing deleted", d)
	}
	member := map[string]membership.Volume{"bao-3": {Name: "data-bao-3"}}
	if d := membership.Decide(membership.Observed{Spec: 4, Current: 3, Name: "bao", Servers: servers(4), LeftVolumes: member}); d.Replicas != 4 || len(d.DeleteVolumes) != 0 {
		t.Fatalf("a member's volume: %+v, want it kept and the scale-up rendered", d)
	}
}

// TestAScaleUpNeverDeletesVolumesOlderThanItsRaftConfiguration: a retained
// cluster created again, or one reset at bootstrap, reads a Raft
// configuration that began after those volumes were written: it cannot
// speak for them. They are kept and the scale-up is blocked, naming them.
func TestAScaleUpNeverDeletesVolumesOlderThanItsRaftConfiguration(t *testing.T) {
	created := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	tests := map[string]membership.Observed{
		"a volume created before the OpenBaoCluster": {ClusterCreated: created,
			LeftVolumes: map[string]membership.Volume{"bao-1": {Name: "data-bao-1", Created: created.Add(-48 * time.Hour)}}},
		"a volume created before the bootstrap reset": {ClusterCreated: created, ResetAt: created.Add(time.Minute),
			LeftVolumes: map[string]membership.Volume{"bao-1": {Name: "data-bao-1", Created: created.Add(30 * time.Second)}}},
		"one old volume among stale ones of this cluster": {ClusterCreated: created,
			LeftVolumes: map[string]membership.Volume{"bao-1": {Name: "data-bao-1", Created: created.Add(time.Hour)},
				"bao-2": {Name: "data-bao-2", Created: created.Add(-time.Hour)}}},
	}
	for name, o := range tests {
		t.Run(name, func(t *testing.T) {
			o.Spec, o.Current, o.Name, o.Servers = 3, 1, "bao", servers(1)
			d := membership.Decide(o)
			if len(d.DeleteVolumes) != 0 || d.Replicas != 1 || !d.Blocked || !strings.Contains(d.Message, "data-bao-") {
				t.Fatalf("got %+v, want nothing deleted, 1 replica, blocked naming the volume", d)
			}
		})
	}
	own := membership.Observed{Spec: 3, Current: 1, Name: "bao", Servers: servers(1), ClusterCreated: created,
		ResetAt:     created.Add(time.Minute),
		LeftVolumes: map[string]membership.Volume{"bao-1": {Name: "data-bao-1", Created: created.Add(time.Hour)}}}
	if d := membership.Decide(own); fmt.Sprint(d.DeleteVolumes) != "[data-bao-1]" {
		t.Fatalf("a removed peer's volume made after the reset: %+v, want it deleted", d)
	}
}

// FuzzScaleUpDeletesOnlyItsOwnStaleVolumes: whatever the membership and
// volumes, a deleted volume is not a member, not older than the cluster
// or its reset, and is never deleted while spec.replicas is rendered.
func FuzzScaleUpDeletesOnlyItsOwnStaleVolumes(f *testing.F) {
	f.Add(int32(5), int32(3), uint8(3), int64(-10), int64(0), int64(10), false, true)
	f.Add(int32(3), int32(1), uint8(1), int64(100), int64(50), int64(-5), true, false)
	f.Fuzz(func(t *testing.T, spec, current int32, members uint8, age1, resetAfter, age2 int64, term1, hasReset bool) {
		created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		o := membership.Observed{Spec: spec % 9, Current: current % 9, Name: "bao", Servers: servers(int(members % 9)),
			ClusterCreated: created, LeftVolumes: map[string]membership.Volume{
				"bao-3": {Name: "data-bao-3", Created: created.Add(time.Duration(age1) * time.Second), Terminating: term1},
				"bao-4": {Name: "data-bao-4", Created: created.Add(time.Duration(age2) * time.Second)},
			}}
		if hasReset {
			o.ResetAt = created.Add(time.Duration(resetAfter) * time.Second)
		}
		d := membership.Decide(o)
		for _, name := range d.DeleteVolumes {
			id := strings.TrimPrefix(name, "data-")
			v := o.LeftVolumes[id]
			if _, member := o.Servers[id]; member {
				t.Fatalf("deleted %s of a Raft member: %+v", name, o)
			}
			if v.Created.Before(created) || hasReset && v.Created.Before(o.ResetAt.Truncate(time.Second)) {
				t.Fatalf("deleted %s, older than the cluster or its reset: %+v", name, o)
			}
			if d.Replicas == o.Spec && o.Spec != o.Current {
				t.Fatalf("deleted %s in the pass that renders the scale-up: %+v", name, d)
			}
		}
	})
}
