package membership_test

import (
	"fmt"
	"testing"

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
