// Package openbaofake is an in-memory openbao.Client for tests. Each answer
// is a field; each call is counted.
package openbaofake

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/openbao/operator/internal/openbao"
)

// Client is a fake openbao.Client. Set the answers before use; errors take
// precedence over answers.
type Client struct {
	mu sync.Mutex

	HealthAnswer openbao.Health
	HealthErr    error

	InitAnswer openbao.InitResult
	InitErr    error
	// InitMarksInitialized makes a successful Init set HealthAnswer to
	// initialized and unsealed, as a real server would.
	InitMarksInitialized bool

	Raft    openbao.RaftConfiguration
	RaftErr error

	Autopilot       openbao.AutopilotConfig
	AutopilotErr    error
	SetAutopilotErr error
	// SetAutopilotFailures, when positive, limits SetAutopilotErr to the
	// first that many calls.
	SetAutopilotFailures int

	StepDownErr error

	LeaderAnswer openbao.Leader
	LeaderErr    error

	// LoginToken is what LoginJWT returns unless LoginErr; LoginRoles
	// records the roles it was called with.
	LoginToken openbao.Token
	LoginErr   error
	LoginRoles []string

	// SnapshotData is what Snapshot streams unless SnapshotErr;
	// SnapshotStreamErr, when set, ends the stream with that error after
	// the data instead of io.EOF.
	SnapshotData      []byte
	SnapshotErr       error
	SnapshotStreamErr error

	// Calls counts calls by method name ("Health", "Init", ...).
	Calls map[string]int
	// InitRequests records the requests Init received.
	InitRequests []openbao.InitRequest
}

var _ openbao.Client = (*Client)(nil)

func (c *Client) count(name string) {
	if c.Calls == nil {
		c.Calls = map[string]int{}
	}
	c.Calls[name]++
}

// CallCount returns how often the method was called.
func (c *Client) CallCount(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Calls[name]
}

// Health returns HealthAnswer or HealthErr.
func (c *Client) Health(context.Context) (openbao.Health, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("Health")
	return c.HealthAnswer, c.HealthErr
}

// Init returns InitAnswer or InitErr.
func (c *Client) Init(_ context.Context, req openbao.InitRequest) (openbao.InitResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("Init")
	c.InitRequests = append(c.InitRequests, req)
	if c.InitErr != nil {
		return openbao.InitResult{}, c.InitErr
	}
	if c.InitMarksInitialized {
		c.HealthAnswer = openbao.Health{Initialized: true}
	}
	return c.InitAnswer, nil
}

// RaftConfiguration returns Raft or RaftErr.
func (c *Client) RaftConfiguration(context.Context) (openbao.RaftConfiguration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("RaftConfiguration")
	return c.Raft, c.RaftErr
}

// AutopilotConfiguration returns Autopilot or AutopilotErr.
func (c *Client) AutopilotConfiguration(context.Context) (openbao.AutopilotConfig, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("AutopilotConfiguration")
	return c.Autopilot, c.AutopilotErr
}

// SetAutopilotConfiguration stores cfg in Autopilot unless SetAutopilotErr.
func (c *Client) SetAutopilotConfiguration(_ context.Context, cfg openbao.AutopilotConfig) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("SetAutopilotConfiguration")
	n := c.Calls["SetAutopilotConfiguration"]
	if c.SetAutopilotErr != nil && (c.SetAutopilotFailures <= 0 || n <= c.SetAutopilotFailures) {
		return c.SetAutopilotErr
	}
	c.Autopilot = cfg
	return nil
}

// StepDown returns StepDownErr.
func (c *Client) StepDown(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("StepDown")
	return c.StepDownErr
}

// Leader returns LeaderAnswer or LeaderErr.
func (c *Client) Leader(context.Context) (openbao.Leader, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("Leader")
	return c.LeaderAnswer, c.LeaderErr
}

// LoginJWT returns LoginToken or LoginErr.
func (c *Client) LoginJWT(_ context.Context, _, role string, _ openbao.Token) (openbao.Token, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("LoginJWT")
	c.LoginRoles = append(c.LoginRoles, role)
	return c.LoginToken, c.LoginErr
}

// Snapshot streams SnapshotData, or returns SnapshotErr.
func (c *Client) Snapshot(context.Context) (io.ReadCloser, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("Snapshot")
	if c.SnapshotErr != nil {
		return nil, c.SnapshotErr
	}
	var r io.Reader = bytes.NewReader(c.SnapshotData)
	if c.SnapshotStreamErr != nil {
		r = io.MultiReader(r, errReader{c.SnapshotStreamErr})
	}
	return io.NopCloser(r), nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
