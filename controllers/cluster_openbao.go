package controllers

import (
	"context"
	"errors"
	"time"

	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/internal/upgrade"
)

// openbaoView is what OpenBao says about the cluster, read at most once a
// pass and only by the steps that need it (a rollout or a scale-down):
// each server's sys/health and Raft lag (both need no token), and the
// leader's autopilot state read with the upgrade role's token.
type openbaoView struct {
	// raft is nil when it could not be read; problem says why. autopilot
	// is the leader's answer raft was computed from, for status.raft.
	raft      *upgrade.Raft
	autopilot *openbao.AutopilotState
	problem   string
	// health holds the answers of the servers that gave one.
	health map[string]upgrade.Health
	// active is the pod whose server says it is active.
	active map[string]bool
	// servers are the clients of the servers that answered sys/health.
	servers map[string]openbao.Client
}

// view reads OpenBao's view of the cluster once per pass.
func (r *OpenBaoClusterReconciler) view(ctx context.Context, p *pass) *openbaoView {
	if p.openbao != nil {
		return p.openbao
	}
	v := &openbaoView{health: map[string]upgrade.Health{}, active: map[string]bool{}, servers: map[string]openbao.Client{}}
	p.openbao = v
	if !p.tls.ready || r.OpenBao == nil {
		v.problem = "no trusted channel to the servers yet"
		return v
	}
	for _, pod := range p.servers {
		bao, err := r.podClient(p, pod.Ordinal, openbao.Token{})
		if err != nil {
			continue
		}
		if h, err := readWithin(ctx, viewReadTimeout, bao.Health); err == nil {
			v.health[pod.Name] = upgrade.Health{Initialized: h.Initialized, Sealed: h.Sealed}
			v.active[pod.Name] = h.Active()
			v.servers[pod.Name] = bao
		}
	}
	v.raft, v.problem = r.readRaft(ctx, p, v)
	return v
}

// viewReadTimeout bounds each read of the view: a server that does not
// answer in this time is left out of the pass, not waited for.
const viewReadTimeout = 5 * time.Second

func readWithin[T any](ctx context.Context, d time.Duration, read func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return read(ctx)
}

// measureLag replaces the autopilot state's lag, which followers report
// only every few seconds, by what each answering server has applied of
// the active server's committed index (openbao.RaftLagTo). Servers that do
// not answer, or a view without one active server, keep the autopilot's
// figures. Only rollouts ask for it: it costs a few reads per server.
func (v *openbaoView) measureLag(ctx context.Context) {
	if v.raft == nil {
		return
	}
	leader, ok := v.servers[v.activeServer()]
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*viewReadTimeout)
	defer cancel()
	for name, l := range openbao.RaftLagTo(ctx, leader, v.servers) {
		if s, ok := v.raft.Servers[name]; ok {
			s.Lag, s.LagKnown = l, true
			v.raft.Servers[name] = s
		}
	}
}

// readRaft reads the leader's committed index and autopilot state from the
// server that just said it is active, or through the client Service when
// none did (an election is under way). Asking the active pod directly
// spares a read through a Service whose endpoints may still name a server
// that stepped down and is stopping.
func (r *OpenBaoClusterReconciler) readRaft(ctx context.Context, p *pass, v *openbaoView) (*upgrade.Raft, string) {
	tok, err := r.upgradeToken(ctx, p)
	if err != nil {
		return nil, err.Error()
	}
	var bao openbao.Client
	if name := v.activeServer(); name != "" {
		bao, err = r.podClient(p, ordinalOf(p, name), tok)
	} else {
		bao, err = r.activeClient(p.cluster, p.tls, tok)
	}
	if err != nil {
		return nil, err.Error()
	}
	leader, err := readWithin(ctx, viewReadTimeout, bao.Leader)
	if err != nil {
		return nil, "read sys/leader: " + err.Error()
	}
	state, err := readWithin(ctx, viewReadTimeout, bao.AutopilotState)
	if errors.Is(err, openbao.ErrPermissionDenied) {
		r.forgetUpgradeToken(p.cluster)
	}
	if err != nil {
		return nil, "read the autopilot state: " + err.Error()
	}
	v.autopilot = &state
	return raftOf(leader, state), ""
}

// activeServer is the pod whose server said it is active, or "".
func (v *openbaoView) activeServer() string {
	for name, active := range v.active {
		if active {
			return name
		}
	}
	return ""
}

// raftOf computes each server's lag against the leader's committed index.
func raftOf(leader openbao.Leader, state openbao.AutopilotState) *upgrade.Raft {
	out := &upgrade.Raft{Healthy: state.Healthy, FailureTolerance: state.FailureTolerance, Servers: map[string]upgrade.Server{}}
	for id, s := range state.Servers {
		var lag uint64
		if leader.RaftCommittedIndex > s.LastIndex {
			lag = leader.RaftCommittedIndex - s.LastIndex
		}
		out.Servers[id] = upgrade.Server{Lag: lag, LagKnown: true, Voter: s.Status == "voter" || s.Status == "leader", Healthy: s.Healthy}
	}
	return out
}

// rolloutPods is what the rollout needs of each pod: its template
// revision, readiness, whether its server is active (the
// service-registration label, else its own sys/health answer), and the
// kubelet's word on its container for messages.
func rolloutPods(servers podstate.Snapshot, v *openbaoView) []upgrade.Pod {
	out := make([]upgrade.Pod, 0, len(servers))
	for _, s := range servers {
		active, known := s.LabelState(podstate.LabelActive)
		if !known && v != nil {
			active = v.active[s.Name]
		}
		out = append(out, upgrade.Pod{Name: s.Name, Ordinal: s.Ordinal, Revision: s.Revision, Ready: s.Ready, Active: active,
			Container: upgrade.Container{Waiting: s.WaitingReason, Restarts: s.RestartCount, LastReason: s.LastTerminationReason,
				LastExitCode: s.LastExitCode, LastMessage: s.LastTerminationMessage}})
	}
	return out
}
