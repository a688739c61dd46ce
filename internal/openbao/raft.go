package openbao

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

const (
	raftConfigurationPath = "sys/storage/raft/configuration"
	autopilotPath         = "sys/storage/raft/autopilot/configuration"
)

type raftConfigAnswer struct {
	Data struct {
		Config struct {
			Servers []struct {
				NodeID  string `json:"node_id"`
				Address string `json:"address"`
				Leader  bool   `json:"leader"`
				Voter   bool   `json:"voter"`
			} `json:"servers"`
		} `json:"config"`
	} `json:"data"`
}

func (c *client) RaftConfiguration(ctx context.Context) (RaftConfiguration, error) {
	const op = "sys/storage/raft/configuration"
	resp, err := c.api.Logical().ReadRawWithContext(ctx, raftConfigurationPath)
	if resp != nil && resp.Body != nil {
		defer resp.Body.Close()
	}
	if err != nil {
		return RaftConfiguration{}, wrap(op, err, true)
	}
	var answer raftConfigAnswer
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return RaftConfiguration{}, fmt.Errorf("openbao %s: %w: %w", op, ErrUnreadableResponse, err)
	}
	out := RaftConfiguration{}
	for _, s := range answer.Data.Config.Servers {
		out.Servers = append(out.Servers, RaftServer{NodeID: s.NodeID, Address: s.Address, Leader: s.Leader, Voter: s.Voter})
	}
	return out, nil
}

func (c *client) AutopilotConfiguration(ctx context.Context) (AutopilotConfig, error) {
	cfg, err := c.api.Sys().RaftAutopilotConfigurationWithContext(ctx)
	if err != nil {
		return AutopilotConfig{}, wrap(autopilotPath, err, true)
	}
	if cfg == nil {
		return AutopilotConfig{}, fmt.Errorf("openbao %s: %w: empty answer", autopilotPath, ErrUnreadableResponse)
	}
	return AutopilotConfig{
		CleanupDeadServers:             cfg.CleanupDeadServers,
		LastContactThreshold:           cfg.LastContactThreshold,
		DeadServerLastContactThreshold: cfg.DeadServerLastContactThreshold,
		MaxTrailingLogs:                cfg.MaxTrailingLogs,
		MinQuorum:                      cfg.MinQuorum,
		ServerStabilizationTime:        cfg.ServerStabilizationTime,
	}, nil
}

// SetAutopilotConfiguration writes only the fields that are set: a zero
// duration or count leaves OpenBao's value alone (OpenBao reads "0s" as
// "keep the current value" anyway). CleanupDeadServers is always written.
func (c *client) SetAutopilotConfiguration(ctx context.Context, cfg AutopilotConfig) error {
	// Not Sys().PutRaftAutopilotConfiguration: it writes zero durations.
	if _, err := c.api.Logical().WriteWithContext(ctx, autopilotPath, AutopilotRequestData(cfg)); err != nil {
		return wrap(autopilotPath, err, true)
	}
	return nil
}

// AutopilotRequestData is the body of an update of
// sys/storage/raft/autopilot/configuration, in the form both the API and a
// self-init request take: durations as strings ("5m"), counts as integers.
func AutopilotRequestData(cfg AutopilotConfig) map[string]any {
	data := map[string]any{"cleanup_dead_servers": cfg.CleanupDeadServers}
	durations := map[string]time.Duration{
		"last_contact_threshold":             cfg.LastContactThreshold,
		"dead_server_last_contact_threshold": cfg.DeadServerLastContactThreshold,
		"server_stabilization_time":          cfg.ServerStabilizationTime,
	}
	for k, d := range durations {
		if d > 0 {
			data[k] = formatSeconds(d)
		}
	}
	if cfg.MaxTrailingLogs > 0 {
		data["max_trailing_logs"] = int64(cfg.MaxTrailingLogs)
	}
	if cfg.MinQuorum > 0 {
		data["min_quorum"] = int64(cfg.MinQuorum)
	}
	return data
}

// formatSeconds writes whole seconds ("300s"): OpenBao parses the autopilot
// durations in whole seconds and silently ignores "500ms".
func formatSeconds(d time.Duration) string {
	secs := int64(d / time.Second)
	if d%time.Second != 0 {
		secs++
	}
	return fmt.Sprintf("%ds", secs)
}
