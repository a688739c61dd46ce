package upgrade_test

import (
	"strings"
	"testing"

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

// TestTheReadReplicasRollBeforeTheVoters: the voters' rollout starts only
// once every read replica runs the new template and passes the checks a
// released voter passes (Ready, unsealed, healthy, caught up); until then
// no voter is released and the hold says which read replica is behind.
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
				if d.Partition != 2 || d.Problem != nil {
					t.Fatalf("partition %d problem %+v; want bao-2 released", d.Partition, d.Problem)
				}
				return
			}
			if d.Partition != 3 || reasonOf(d.Problem) != v1alpha1.ReasonPreflightFailed || !strings.Contains(d.Problem.Message, tc.held) ||
				!strings.Contains(d.Problem.Message, "read replicas roll first") {
				t.Fatalf("partition %d problem %+v; want every voter held, naming %q", d.Partition, d.Problem, tc.held)
			}
		})
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
