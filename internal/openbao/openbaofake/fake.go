// Package openbaofake is an in-memory openbao.Client for tests. Each answer
// is a field; each call is counted.
package openbaofake

import (
	"bytes"
	"context"
	"io"
	"sync"
	"time"

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
	// StepDownHook runs on each StepDown, for a test that moves leadership.
	StepDownHook func()

	LeaderAnswer openbao.Leader
	LeaderErr    error

	AutopilotStateAnswer openbao.AutopilotState
	AutopilotStateErr    error

	RemovePeerErr error
	// RemovedPeers records the node ids RemovePeer received.
	RemovedPeers []string

	// AuthMounts answers AuthMethods.
	AuthMounts map[string]string

	// SecretMounts answers SecretsEngines.
	SecretMounts map[string]openbao.SecretsEngine

	WriteErr error
	// WriteErrs fail the writes to their paths, after WriteErr.
	WriteErrs map[string]error
	// Writes records the paths Write received, in order; Written the last
	// data written to each path, which Read then answers.
	Writes  []string
	Written map[string]map[string]any

	ReadErr error

	LoginToken openbao.Token
	LoginTTL   time.Duration
	LoginErr   error
	// LoginErrAfter lets that many logins succeed before LoginErr applies.
	LoginErrAfter int
	// Logins records mount/role of each Login.
	Logins []string

	// SnapshotData is what Snapshot streams unless SnapshotErr;
	// SnapshotStreamErr, when set, ends the stream with that error after
	// the data instead of io.EOF.
	SnapshotData      []byte
	SnapshotErr       error
	SnapshotStreamErr error

	// RestoreErr fails RestoreSnapshot after it read the whole body;
	// Restored holds the bytes of the last body read to io.EOF, and
	// RestoreForced whether it went to snapshot-force.
	RestoreErr    error
	Restored      []byte
	RestoreForced bool

	// Calls counts calls by method name ("Health", "Init", ...); Order
	// lists them as they came.
	Calls map[string]int
	Order []string
	// InitRequests records the requests Init received.
	InitRequests []openbao.InitRequest
}

var _ openbao.Client = (*Client)(nil)

func (c *Client) count(name string) {
	if c.Calls == nil {
		c.Calls = map[string]int{}
	}
	c.Calls[name]++
	c.Order = append(c.Order, name)
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

// StepDown returns StepDownErr; StepDownHook runs first.
func (c *Client) StepDown(context.Context) error {
	c.mu.Lock()
	c.count("StepDown")
	hook, err := c.StepDownHook, c.StepDownErr
	c.mu.Unlock()
	if hook != nil && err == nil {
		hook()
	}
	return err
}

// Leader returns LeaderAnswer or LeaderErr.
func (c *Client) Leader(context.Context) (openbao.Leader, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("Leader")
	return c.LeaderAnswer, c.LeaderErr
}

// AutopilotState returns AutopilotStateAnswer or AutopilotStateErr.
func (c *Client) AutopilotState(context.Context) (openbao.AutopilotState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("AutopilotState")
	return c.AutopilotStateAnswer, c.AutopilotStateErr
}

// RemovePeer records nodeID unless RemovePeerErr.
func (c *Client) RemovePeer(_ context.Context, nodeID string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("RemovePeer")
	if c.RemovePeerErr != nil {
		return c.RemovePeerErr
	}
	c.RemovedPeers = append(c.RemovedPeers, nodeID)
	return nil
}

// AuthMethods returns AuthMounts.
func (c *Client) AuthMethods(context.Context) (map[string]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("AuthMethods")
	return c.AuthMounts, nil
}

// SecretsEngines returns SecretMounts.
func (c *Client) SecretsEngines(context.Context) (map[string]openbao.SecretsEngine, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("SecretsEngines")
	return c.SecretMounts, nil
}

// Write records path and data unless WriteErr or WriteErrs fails it.
func (c *Client) Write(_ context.Context, path string, data map[string]any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("Write")
	if c.WriteErr != nil {
		return c.WriteErr
	}
	if err := c.WriteErrs[path]; err != nil {
		return err
	}
	c.Writes = append(c.Writes, path)
	if c.Written == nil {
		c.Written = map[string]map[string]any{}
	}
	c.Written[path] = data
	return nil
}

// Read returns what was written to path, or ReadErr, or a 404.
func (c *Client) Read(_ context.Context, path string) (map[string]any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("Read")
	if c.ReadErr != nil {
		return nil, c.ReadErr
	}
	data, ok := c.Written[path]
	if !ok {
		return nil, &openbao.StatusError{Op: path, Code: 404}
	}
	return data, nil
}

// Login returns LoginToken and LoginTTL, or LoginErr.
func (c *Client) Login(_ context.Context, mount, role string, _ openbao.Token) (openbao.Token, time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("Login")
	c.Logins = append(c.Logins, mount+"/"+role)
	if len(c.Logins) <= c.LoginErrAfter {
		return c.LoginToken, c.LoginTTL, nil
	}
	return c.LoginToken, c.LoginTTL, c.LoginErr
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

// RestoreSnapshot reads body to its end as OpenBao does; a body that
// fails is not installed.
func (c *Client) RestoreSnapshot(_ context.Context, body io.Reader, force bool) error {
	data, err := io.ReadAll(body)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("RestoreSnapshot")
	if err != nil {
		return &openbao.TransportError{Op: openbao.SnapshotPath, Err: err}
	}
	if c.RestoreErr != nil {
		return c.RestoreErr
	}
	c.Restored, c.RestoreForced = data, force
	return nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
