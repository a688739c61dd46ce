package autopilot

import (
	"errors"
	"fmt"
	"time"

	"github.com/openbao/operator/internal/baoconfig"
	"github.com/openbao/operator/internal/openbao"
)

// Defaults the operator sets after initialization.
const (
	DefaultDeadServerLastContactThreshold = 5 * time.Minute
	// BootstrapStabilizationTime lets autopilot promote the first joiners
	// within seconds while the cluster forms (measured on the local node:
	// 3 voters in 9.9 s instead of 29.6 s with OpenBao's defaults).
	BootstrapStabilizationTime = time.Second
	// SteadyStabilizationTime is OpenBao's default, restored once every
	// replica is a voter: a server replaced later must stay healthy this
	// long before it counts towards quorum.
	SteadyStabilizationTime = 10 * time.Second
	// MinQuorumFloor is the least min_quorum OpenBao accepts with
	// cleanup_dead_servers.
	MinQuorumFloor = 3
	// MinDeadServerThreshold is the least dead-server threshold OpenBao
	// accepts.
	MinDeadServerThreshold = time.Minute
	// RequestName names the self-init request that configures
	// autopilot.
	RequestName = "operator-autopilot"
	// Path is the API path of the autopilot configuration.
	Path = "sys/storage/raft/autopilot/configuration"
)

// Overrides are the user's configuration.raft.autopilot; nil
// fields take the defaults.
type Overrides struct {
	CleanupDeadServers             *bool
	DeadServerLastContactThreshold *time.Duration
	MinQuorum                      *int
	ServerStabilizationTime        *time.Duration
}

// ErrInvalid is wrapped by Validate's complaints.
var ErrInvalid = errors.New("invalid autopilot configuration")

// Phase says whether the cluster is still forming.
type Phase int

const (
	// PhaseBootstrap: fewer voters than replicas.
	PhaseBootstrap Phase = iota
	// PhaseSteady: every replica is a voter.
	PhaseSteady
)

// PhaseOf returns PhaseSteady once the Raft configuration holds at least
// replicas voters.
func PhaseOf(raft openbao.RaftConfiguration, replicas int32) Phase {
	if len(raft.Voters()) >= int(replicas) {
		return PhaseSteady
	}
	return PhaseBootstrap
}

// For is the configuration for the cluster's size and phase:
// cleanup_dead_servers true, dead_server_last_contact_threshold 5m,
// min_quorum max(3, replicas/2+1), server_stabilization_time 1s while
// forming and 10s after; each overridable.
func For(replicas int32, o Overrides, phase Phase) openbao.AutopilotConfig {
	cfg := openbao.AutopilotConfig{
		CleanupDeadServers:             true,
		DeadServerLastContactThreshold: DefaultDeadServerLastContactThreshold,
		MinQuorum:                      uint(max(MinQuorumFloor, int(replicas)/2+1)),
		ServerStabilizationTime:        SteadyStabilizationTime,
	}
	if phase == PhaseBootstrap {
		cfg.ServerStabilizationTime = BootstrapStabilizationTime
	}
	if o.CleanupDeadServers != nil {
		cfg.CleanupDeadServers = *o.CleanupDeadServers
	}
	if o.DeadServerLastContactThreshold != nil {
		cfg.DeadServerLastContactThreshold = *o.DeadServerLastContactThreshold
	}
	if o.MinQuorum != nil {
		cfg.MinQuorum = uint(max(0, *o.MinQuorum))
	}
	if o.ServerStabilizationTime != nil {
		cfg.ServerStabilizationTime = *o.ServerStabilizationTime
	}
	return cfg
}

// Validate rejects what OpenBao 2.4 refuses with 400 (checked
// against the real server in test/openbao), for admission and before any
// write; a stabilization time in fractions of a second is rejected too,
// because OpenBao silently ignores it.
func Validate(cfg openbao.AutopilotConfig) error {
	if cfg.CleanupDeadServers && cfg.MinQuorum < MinQuorumFloor {
		return fmt.Errorf("%w: min_quorum %d is below %d with cleanup_dead_servers", ErrInvalid, cfg.MinQuorum, MinQuorumFloor)
	}
	// OpenBao checks the threshold only with cleanup enabled (measured).
	if cfg.CleanupDeadServers && cfg.DeadServerLastContactThreshold != 0 && cfg.DeadServerLastContactThreshold < MinDeadServerThreshold {
		return fmt.Errorf("%w: dead_server_last_contact_threshold %s is below %s with cleanup_dead_servers", ErrInvalid,
			cfg.DeadServerLastContactThreshold, MinDeadServerThreshold)
	}
	if cfg.ServerStabilizationTime != 0 && cfg.ServerStabilizationTime%time.Second != 0 {
		return fmt.Errorf("%w: server_stabilization_time %s: OpenBao takes whole seconds", ErrInvalid, cfg.ServerStabilizationTime)
	}
	return nil
}

// NeedsUpdate says whether the server's configuration differs from
// the wanted one in a field the operator sets.
func NeedsUpdate(current, want openbao.AutopilotConfig) bool {
	return current.CleanupDeadServers != want.CleanupDeadServers ||
		current.DeadServerLastContactThreshold != want.DeadServerLastContactThreshold ||
		current.MinQuorum != want.MinQuorum ||
		current.ServerStabilizationTime != want.ServerStabilizationTime
}

// SelfInitRequest is the self-init request that configures
// autopilot when the operator holds no token. The operator cannot change
// it later, so it carries the steady configuration (PhaseSteady), not the
// short bootstrap stabilization time. values.ConfigFor appends it to the
// user's requests when self-init is enabled.
func SelfInitRequest(replicas int32, o Overrides) (baoconfig.InitRequest, error) {
	cfg := For(replicas, o, PhaseSteady)
	if err := Validate(cfg); err != nil {
		return baoconfig.InitRequest{}, err
	}
	return baoconfig.InitRequest{
		Name:      RequestName,
		Operation: "update",
		Path:      Path,
		Data:      openbao.AutopilotRequestData(cfg),
	}, nil
}
