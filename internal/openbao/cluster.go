package openbao

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Leader is the answer of sys/leader, which needs no token.
type Leader struct {
	HAEnabled bool
	// IsSelf says the server asked is the active one.
	IsSelf bool
	// LeaderAddress is the active server's API address.
	LeaderAddress string
	ActiveTime    time.Time
	// RaftCommittedIndex is the leader's last committed Raft index, as the
	// server asked knows it.
	RaftCommittedIndex uint64
	RaftAppliedIndex   uint64
}

// Leads says the server asked is the active one, or the only one (storage
// without HA); its RaftCommittedIndex is then the leader's.
func (l Leader) Leads() bool { return !l.HAEnabled || l.IsSelf }

// AutopilotState is the answer of sys/storage/raft/autopilot/state: the
// leader's view of every server.
type AutopilotState struct {
	Healthy          bool
	FailureTolerance int
	// Leader is the node id of the Raft leader.
	Leader  string
	Voters  []string
	Servers map[string]AutopilotServer
}

// AutopilotServer is one server in the autopilot state.
type AutopilotServer struct {
	ID        string
	Name      string
	Address   string
	Status    string // leader, voter, non-voter
	Healthy   bool
	LastIndex uint64
	LastTerm  uint64
	// LastContact is how long ago the leader last heard from it;
	// ContactKnown says the answer gave one ("0s" on the leader).
	LastContact  time.Duration
	ContactKnown bool
}

func (c *client) Leader(ctx context.Context) (Leader, error) {
	l, err := c.api.Sys().LeaderWithContext(ctx)
	if err != nil {
		return Leader{}, wrap("sys/leader", err, true)
	}
	return Leader{HAEnabled: l.HAEnabled, IsSelf: l.IsSelf, LeaderAddress: l.LeaderAddress, ActiveTime: l.ActiveTime,
		RaftCommittedIndex: l.RaftCommittedIndex, RaftAppliedIndex: l.RaftAppliedIndex}, nil
}

func (c *client) AutopilotState(ctx context.Context) (AutopilotState, error) {
	const op = "sys/storage/raft/autopilot/state"
	s, err := c.api.Sys().RaftAutopilotStateWithContext(ctx)
	if err != nil {
		return AutopilotState{}, wrap(op, err, true)
	}
	if s == nil {
		return AutopilotState{}, fmt.Errorf("openbao %s: %w: no state (not Raft storage?)", op, ErrUnreadableResponse)
	}
	out := AutopilotState{Healthy: s.Healthy, FailureTolerance: s.FailureTolerance, Leader: s.Leader,
		Voters: s.Voters, Servers: map[string]AutopilotServer{}}
	for id, srv := range s.Servers {
		if srv == nil {
			continue
		}
		contact, err := time.ParseDuration(srv.LastContact) // "0s" on the leader, "" when unknown
		out.Servers[id] = AutopilotServer{ID: srv.ID, Name: srv.Name, Address: srv.Address, Status: srv.Status,
			Healthy: srv.Healthy, LastIndex: srv.LastIndex, LastTerm: srv.LastTerm, LastContact: contact, ContactKnown: err == nil}
	}
	return out, nil
}

func (c *client) RemovePeer(ctx context.Context, nodeID string) error {
	const op = "sys/storage/raft/remove-peer"
	if _, err := c.api.Logical().WriteWithContext(ctx, op, map[string]any{"server_id": nodeID}); err != nil {
		return wrap(op, err, true)
	}
	return nil
}

// AuthMethods lists the enabled auth methods: mount path (without the
// trailing slash) to type.
func (c *client) AuthMethods(ctx context.Context) (map[string]string, error) {
	mounts, err := c.api.Sys().ListAuthWithContext(ctx)
	if err != nil {
		return nil, wrap("sys/auth", err, true)
	}
	out := make(map[string]string, len(mounts))
	for path, m := range mounts {
		if m != nil {
			out[strings.TrimSuffix(path, "/")] = m.Type
		}
	}
	return out, nil
}

// SecretsEngines lists the enabled secrets engines by mount path (without
// the trailing slash).
func (c *client) SecretsEngines(ctx context.Context) (map[string]SecretsEngine, error) {
	mounts, err := c.api.Sys().ListMountsWithContext(ctx)
	if err != nil {
		return nil, wrap("sys/mounts", err, true)
	}
	out := make(map[string]SecretsEngine, len(mounts))
	for path, m := range mounts {
		if m != nil {
			out[strings.TrimSuffix(path, "/")] = SecretsEngine{Type: m.Type, Options: m.Options}
		}
	}
	return out, nil
}

// Read reads what the operator stored itself (the backup canary); it is
// not for secrets: OpenBao's messages are kept in errors.
func (c *client) Read(ctx context.Context, path string) (map[string]any, error) {
	secret, err := c.api.Logical().ReadWithContext(ctx, path)
	if err != nil {
		return nil, wrap(path, err, true)
	}
	if secret == nil || secret.Data == nil {
		return nil, &StatusError{Op: path, Code: http.StatusNotFound}
	}
	return secret.Data, nil
}

// Write sends an update to path, for the operator's own setup requests (an
// auth method, its roles, policies). Their data holds no secret.
func (c *client) Write(ctx context.Context, path string, data map[string]any) error {
	if _, err := c.api.Logical().WriteWithContext(ctx, path, data); err != nil {
		return wrap(path, err, true)
	}
	return nil
}

type loginAnswer struct {
	Auth *struct {
		ClientToken   string `json:"client_token"`
		LeaseDuration int64  `json:"lease_duration"`
	} `json:"auth"`
}

// Login logs in with a JWT at auth/<mount>/login. The JWT goes only into
// the request body, and neither it nor the answer reaches an error.
func (c *client) Login(ctx context.Context, mount, role string, jwt Token) (Token, time.Duration, error) {
	op := "auth/" + mount + "/login"
	r := c.api.NewRequest(http.MethodPost, "/v1/"+op)
	if err := r.SetJSONBody(map[string]string{"role": role, "jwt": jwt.Reveal()}); err != nil {
		return Token{}, 0, fmt.Errorf("openbao %s: encode request: %w", op, err)
	}
	resp, err := c.api.RawRequestWithContext(ctx, r)
	if resp != nil && resp.Body != nil {
		defer resp.Body.Close()
	}
	if err != nil {
		return Token{}, 0, redactFrom(wrap(op, err, true), jwt.Reveal())
	}
	var answer loginAnswer
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.Auth == nil || answer.Auth.ClientToken == "" {
		return Token{}, 0, fmt.Errorf("openbao %s: %w", op, ErrUnreadableResponse)
	}
	return NewToken(answer.Auth.ClientToken), time.Duration(answer.Auth.LeaseDuration) * time.Second, nil
}

// redactFrom removes secret from the messages of a *StatusError: an auth
// method may quote what it refused.
func redactFrom(err error, secret string) error {
	var se *StatusError
	if secret == "" || !errors.As(err, &se) {
		return err
	}
	for i, m := range se.Messages {
		se.Messages[i] = strings.ReplaceAll(m, secret, redacted)
	}
	return err
}

// RaftLag reads how many Raft entries each server trails the leader by:
// the leader's committed index from sys/leader first, then the server's
// applied index until it reaches it, for at most catchUpWindow. A server
// that keeps up reaches what the leader had committed a moment ago however
// busy the cluster and however slowly the operator is scheduled: its lag
// is 0. A server that stopped replicating or falls behind does not, and
// its lag is what it still misses at the end of the window. Reading both
// at once measured the writes of one request's latency instead (hundreds
// of entries at 250 writes/s), and the autopilot state's last_index is
// too coarse: a follower reports it only every few seconds. Servers that
// do not answer are left out; err says when no server says it leads.
func RaftLag(ctx context.Context, servers map[string]Client) (map[string]uint64, error) {
	for _, c := range servers {
		if l, err := c.Leader(ctx); err == nil && l.IsSelf {
			return RaftLagTo(ctx, c, servers), nil
		}
	}
	return nil, errors.New("no server says it is the active one")
}

// RaftLagTo is RaftLag for a caller that already knows the leader.
func RaftLagTo(ctx context.Context, leader Client, servers map[string]Client) map[string]uint64 {
	lag := map[string]uint64{}
	for name, p := range RaftProgressTo(ctx, leader, servers) {
		lag[name] = p.Lag
	}
	return lag
}

// Progress is what RaftProgressTo measured of one server.
type Progress struct {
	// Lag is what the server had still to apply of the leader's index at
	// the end of the window (0 once it applied it).
	Lag uint64
	// Received says the server's own log reached the leader's index
	// within the window: entries from the leader reached it during the
	// window or before. A restarted server applies what its own disk held
	// and so can show no lag before the leader replicates to it again;
	// when the leader's index moved while it was down, only the leader's
	// replication brings its log up to it.
	Received bool
	// LeaderIndex is the leader's index read first; Index and Applied are
	// the server's last log index and applied index as last read.
	LeaderIndex, Index, Applied uint64
}

// RaftProgressTo measures, for every server that answers, how far it got
// towards the leader's last index (pairLag); servers that do not answer
// are left out.
func RaftProgressTo(ctx context.Context, leader Client, servers map[string]Client) map[string]Progress {
	out := map[string]Progress{}
	for name, c := range servers {
		if p, ok := pairLag(ctx, c, leader); ok {
			out[name] = p
		}
	}
	return out
}

// catchUpWindow is how long RaftLag waits for a server to apply what the
// leader had committed; catchUpPoll is how often it asks meanwhile.
const (
	catchUpWindow = time.Second
	catchUpPoll   = 100 * time.Millisecond
)

// pairLag reads the leader, then the server until it has applied the
// leader's committed index or the window closes. On a server,
// sys/leader's raft_committed_index is its own last log index (OpenBao
// 2.4 answers raft.LastIndex there), which only the leader's
// AppendEntries raise. A leader that has since stepped down measures
// nothing: its index is then a standby's own, which every other server
// may have passed.
func pairLag(ctx context.Context, server, leader Client) (Progress, bool) {
	l, err := leader.Leader(ctx)
	if err != nil || !l.Leads() {
		return Progress{}, false
	}
	p := Progress{LeaderIndex: l.RaftCommittedIndex}
	deadline := time.Now().Add(catchUpWindow)
	for {
		s, err := server.Leader(ctx)
		if err != nil {
			return Progress{}, false
		}
		p.Index, p.Applied = s.RaftCommittedIndex, s.RaftAppliedIndex
		p.Received = p.Received || s.RaftCommittedIndex >= l.RaftCommittedIndex
		if s.RaftAppliedIndex >= l.RaftCommittedIndex {
			p.Lag, p.Received = 0, true
			return p, true
		}
		if time.Now().After(deadline) {
			p.Lag = l.RaftCommittedIndex - s.RaftAppliedIndex
			return p, true
		}
		select {
		case <-ctx.Done():
			return Progress{}, false
		case <-time.After(catchUpPoll):
		}
	}
}
