package openbao

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Client is what the operator asks of one OpenBao server. The reconciler
// gets it from a Factory so that tests inject a fake.
type Client interface {
	// Health reads sys/health. Not initialized (501), sealed (503) and
	// standby (429) are states of the answer, not errors.
	Health(ctx context.Context) (Health, error)
	// Init calls sys/init. The result holds the root token: keep it in
	// memory for the call only.
	Init(ctx context.Context, req InitRequest) (InitResult, error)
	// RaftConfiguration lists the Raft servers (needs a token).
	RaftConfiguration(ctx context.Context) (RaftConfiguration, error)
	// AutopilotConfiguration reads the autopilot configuration (needs a token).
	AutopilotConfiguration(ctx context.Context) (AutopilotConfig, error)
	// SetAutopilotConfiguration writes it (needs a token).
	SetAutopilotConfiguration(ctx context.Context, cfg AutopilotConfig) error
	// StepDown asks the active server to give up leadership (needs a token).
	StepDown(ctx context.Context) error
	// Leader reads sys/leader (no token needed): who is active and the
	// committed Raft index.
	Leader(ctx context.Context) (Leader, error)
	// AutopilotState reads the leader's view of every Raft server: health,
	// last index, failure tolerance (needs a token).
	AutopilotState(ctx context.Context) (AutopilotState, error)
	// RemovePeer removes a server from the Raft configuration (needs a
	// token).
	RemovePeer(ctx context.Context, nodeID string) error
	// AuthMethods lists the enabled auth methods by mount path (needs a
	// token).
	AuthMethods(ctx context.Context) (map[string]string, error)
	// SecretsEngines lists the enabled secrets engines by mount path
	// (needs a token).
	SecretsEngines(ctx context.Context) (map[string]SecretsEngine, error)
	// Write sends an update to path (needs a token).
	Write(ctx context.Context, path string, data map[string]any) error
	// Read reads the data stored at path (needs a token); nothing there
	// is a *StatusError matching ErrNotFound.
	Read(ctx context.Context, path string) (map[string]any, error)
	// Login exchanges a JWT for a token at auth/<mount>/login and returns
	// the token and its lifetime.
	Login(ctx context.Context, mount, role string, jwt Token) (Token, time.Duration, error)
	// Snapshot opens GET sys/storage/raft/snapshot on the active server
	// (needs a token); the caller reads and closes the stream.
	Snapshot(ctx context.Context) (io.ReadCloser, error)
	// RestoreSnapshot streams body into POST sys/storage/raft/snapshot on
	// the active server (needs a token), or snapshot-force with force. The
	// body is sent chunked: a body that fails before io.EOF aborts the
	// request, and OpenBao, which reads the whole archive before it
	// installs anything, changes nothing.
	RestoreSnapshot(ctx context.Context, body io.Reader, force bool) error
}

// SecretsEngine is one enabled secrets engine: its type and options.
type SecretsEngine struct {
	Type    string
	Options map[string]string
}

// KVVersion1 says the engine is KV version 1 (a kv mount without a
// version option is version 1).
func (e SecretsEngine) KVVersion1() bool {
	v := e.Options["version"]
	return e.Type == "kv" && (v == "" || v == "1")
}

func (e SecretsEngine) String() string {
	if v := e.Options["version"]; v != "" {
		return e.Type + " version " + v
	}
	return e.Type
}

// Factory builds a Client for one server address.
type Factory func(opts Options) (Client, error)

// Health is the answer of sys/health.
type Health struct {
	Initialized bool
	Sealed      bool
	Standby     bool
	Version     string
	ClusterID   string
}

// Active says the server is initialized, unsealed and the leader.
func (h Health) Active() bool { return h.Initialized && !h.Sealed && !h.Standby }

// InitRequest is the body of sys/init. The zero value sends {}, which is
// what auto-unseal seals (static, KMS, transit) want: they refuse
// secret_shares. Recovery keys are only returned when RecoveryShares > 0.
type InitRequest struct {
	RecoveryShares    int
	RecoveryThreshold int
	// RecoveryPGPKeys (base64 of binary public keys, one per share) make
	// OpenBao return each recovery key encrypted to its key: the caller
	// never sees a plain share.
	RecoveryPGPKeys []string
}

// InitResult is the answer of sys/init.
type InitResult struct {
	RootToken Token
	// RecoveryKeys are recovery_keys_base64: with RecoveryPGPKeys, each is
	// base64 of a PGP message only the key's holder can open.
	RecoveryKeys []Token
}

// Token is a secret string (root token, recovery key) that prints as
// [redacted] in every fmt verb. Reveal returns the value.
type Token struct{ value string }

// NewToken wraps a secret value.
func NewToken(value string) Token { return Token{value: value} }

// Reveal returns the secret value; call it only to hand the value to
// OpenBao or to a Secret's data.
func (t Token) Reveal() string { return t.value }

// IsZero says the token is empty.
func (t Token) IsZero() bool { return t.value == "" }

const redacted = "[redacted]"

func (t Token) String() string   { return redacted }
func (t Token) GoString() string { return redacted }

// Format keeps the value out of every verb, %#v and %x included.
func (t Token) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// MarshalText keeps the value out of JSON, YAML and structured logs.
func (t Token) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// RaftServer is one member of the Raft configuration.
type RaftServer struct {
	NodeID  string
	Address string
	Leader  bool
	Voter   bool
}

// RaftConfiguration is the answer of sys/storage/raft/configuration.
type RaftConfiguration struct {
	Servers []RaftServer
}

// Voters returns the node ids of the voters.
func (r RaftConfiguration) Voters() []string { return r.ids(true) }

// NonVoters returns the node ids of the non-voters.
func (r RaftConfiguration) NonVoters() []string { return r.ids(false) }

func (r RaftConfiguration) ids(voter bool) []string {
	var out []string
	for _, s := range r.Servers {
		if s.Voter == voter {
			out = append(out, s.NodeID)
		}
	}
	return out
}

// AutopilotConfig is the autopilot configuration of integrated storage.
type AutopilotConfig struct {
	CleanupDeadServers             bool
	LastContactThreshold           time.Duration
	DeadServerLastContactThreshold time.Duration
	MaxTrailingLogs                uint64
	MinQuorum                      uint
	ServerStabilizationTime        time.Duration
}
