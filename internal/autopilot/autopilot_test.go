package autopilot_test

import (
	"errors"
	"testing"
	"time"

	"github.com/openbao/operator/internal/autopilot"
	"github.com/openbao/operator/internal/baoconfig"
	"github.com/openbao/operator/internal/openbao"
)

func ptr[T any](v T) *T { return &v }

func TestAutopilotDefaults(t *testing.T) {
	tests := map[string]struct {
		replicas int32
		phase    autopilot.Phase
		o        autopilot.Overrides
		want     openbao.AutopilotConfig
	}{
		"one replica keeps min_quorum at 3": {1, autopilot.PhaseSteady, autopilot.Overrides{},
			openbao.AutopilotConfig{CleanupDeadServers: true, DeadServerLastContactThreshold: 5 * time.Minute, MinQuorum: 3, ServerStabilizationTime: 10 * time.Second}},
		"three replicas while forming stabilize in 1s": {3, autopilot.PhaseBootstrap, autopilot.Overrides{},
			openbao.AutopilotConfig{CleanupDeadServers: true, DeadServerLastContactThreshold: 5 * time.Minute, MinQuorum: 3, ServerStabilizationTime: time.Second}},
		"seven replicas need a quorum of 4": {7, autopilot.PhaseSteady, autopilot.Overrides{},
			openbao.AutopilotConfig{CleanupDeadServers: true, DeadServerLastContactThreshold: 5 * time.Minute, MinQuorum: 4, ServerStabilizationTime: 10 * time.Second}},
		"overrides win in both phases": {5, autopilot.PhaseBootstrap, autopilot.Overrides{
			CleanupDeadServers: ptr(false), DeadServerLastContactThreshold: ptr(time.Hour), MinQuorum: ptr(1), ServerStabilizationTime: ptr(30 * time.Second)},
			openbao.AutopilotConfig{CleanupDeadServers: false, DeadServerLastContactThreshold: time.Hour, MinQuorum: 1, ServerStabilizationTime: 30 * time.Second}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := autopilot.For(tc.replicas, tc.o, tc.phase)
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if err := autopilot.Validate(got); err != nil {
				t.Errorf("defaults fail validation: %v", err)
			}
		})
	}
}

func TestValidateAutopilotRejectsWhatOpenBaoRefuses(t *testing.T) {
	tests := map[string]openbao.AutopilotConfig{
		"min_quorum below 3 with cleanup":               {CleanupDeadServers: true, MinQuorum: 2},
		"a dead-server threshold under 1m with cleanup": {CleanupDeadServers: true, DeadServerLastContactThreshold: 30 * time.Second, MinQuorum: 3},
		"a stabilization time of 500ms":                 {ServerStabilizationTime: 500 * time.Millisecond},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			err := autopilot.Validate(cfg)
			if !errors.Is(err, autopilot.ErrInvalid) {
				t.Errorf("error %v", err)
			}
		})
	}
	if err := autopilot.Validate(openbao.AutopilotConfig{CleanupDeadServers: false, MinQuorum: 1, DeadServerLastContactThreshold: 30 * time.Second}); err != nil {
		t.Errorf("min_quorum 1 and a 30s threshold without cleanup (OpenBao accepts both): %v", err)
	}
}

func TestPhaseTurnsSteadyWhenEveryReplicaVotes(t *testing.T) {
	raft := openbao.RaftConfiguration{Servers: []openbao.RaftServer{{NodeID: "a", Voter: true}, {NodeID: "b", Voter: true}, {NodeID: "c"}}}
	if autopilot.PhaseOf(raft, 3) != autopilot.PhaseBootstrap {
		t.Error("2 voters of 3 is steady")
	}
	raft.Servers[2].Voter = true
	if autopilot.PhaseOf(raft, 3) != autopilot.PhaseSteady {
		t.Error("3 voters of 3 is not steady")
	}
	cur := autopilot.For(3, autopilot.Overrides{}, autopilot.PhaseBootstrap)
	if !autopilot.NeedsUpdate(cur, autopilot.For(3, autopilot.Overrides{}, autopilot.PhaseSteady)) {
		t.Error("the switch to steady needs no update")
	}
	if autopilot.NeedsUpdate(cur, cur) {
		t.Error("an equal configuration needs an update")
	}
}

func TestSelfInitAutopilotRequestRendersAsAnInitializeStanza(t *testing.T) {
	req, err := autopilot.SelfInitRequest(5, autopilot.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if req.Operation != "update" || req.Path != "sys/storage/raft/autopilot/configuration" {
		t.Errorf("%+v", req)
	}
	want := map[string]any{"cleanup_dead_servers": true, "dead_server_last_contact_threshold": "300s",
		"min_quorum": int64(3), "server_stabilization_time": "10s"}
	for k, v := range want {
		if req.Data[k] != v {
			t.Errorf("data[%s] = %#v, want %#v", k, req.Data[k], v)
		}
	}
	if _, err := baoconfig.RenderSelfInit([]baoconfig.InitRequest{req}); err != nil {
		t.Errorf("baoconfig refuses it: %v", err)
	}
	_, err = autopilot.SelfInitRequest(3, autopilot.Overrides{MinQuorum: ptr(2)})
	if !errors.Is(err, autopilot.ErrInvalid) {
		t.Errorf("min_quorum 2 with cleanup: %v", err)
	}
}
