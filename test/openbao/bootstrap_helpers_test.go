package openbao_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openbao/operator/internal/baoconfig"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/internal/sealkey"
	"github.com/openbao/operator/test/baotest"
)

// Cluster nodes on loopback, configured from what internal/baoconfig
// renders. Paths point into each server's directory; the node identity
// comes from the environment, as in a pod; there is no Kubernetes, so no
// service registration.

// openbaoDefaultTimers are OpenBao 2.4.0's own Raft and autopilot timers,
// for comparison with the operator's defaults (zero Timers).
var openbaoDefaultTimers = baoconfig.Timers{
	PerformanceMultiplier:      5,
	AutopilotReconcileInterval: 10 * time.Second,
	AutopilotUpdateInterval:    2 * time.Second,
}

type nodeConfig struct {
	leaderAddr string // empty: the node is the bootstrap node and joins itself
	timers     baoconfig.Timers
	seal       baoconfig.Seal // zero: static seal from {{dir}}/unseal.key
	selfInit   []baoconfig.InitRequest
	files      map[string][]byte // written into the node's directory besides TLS and key
}

func renderNodeConfig(t testing.TB, nc nodeConfig) string {
	t.Helper()
	leader := nc.leaderAddr
	if leader == "" {
		leader = "https://127.0.0.1:{{api_port}}"
	}
	seal := nc.seal
	if seal.Type == "" {
		seal = baoconfig.Seal{Type: baoconfig.SealStatic, KeyID: "operator-1", KeyFile: "{{dir}}/unseal.key"}
	}
	hcl, err := baoconfig.Render(baoconfig.Input{
		Listener: baoconfig.Listener{
			Address: "127.0.0.1:{{api_port}}", ClusterAddress: "127.0.0.1:{{cluster_port}}",
			TLS: baoconfig.TLS{Mode: baoconfig.TLSFiles, CertFile: "{{dir}}/tls.crt", KeyFile: "{{dir}}/tls.key"},
		},
		Raft: baoconfig.Raft{Path: "{{dir}}/raft", LeaderAPIAddr: leader, LeaderCAFile: "{{dir}}/ca.crt", Timers: nc.timers},
		Seal: seal,
	})
	if err != nil {
		t.Fatal(err)
	}
	config := string(hcl)
	if len(nc.selfInit) > 0 {
		selfInit, err := baoconfig.RenderSelfInit(nc.selfInit)
		if err != nil {
			t.Fatal(err)
		}
		config += "\n" + string(selfInit)
	}
	return config
}

// startNode starts one node with the shared certificates and static key.
func startNode(t testing.TB, certs testCerts, key []byte, nodeID string, nc nodeConfig, env ...string) *baotest.Server {
	t.Helper()
	files := map[string][]byte{"tls.crt": certs.Cert, "tls.key": certs.Key, "ca.crt": certs.CA}
	if key != nil {
		files["unseal.key"] = key
	}
	for name, data := range nc.files {
		files[name] = data
	}
	s := baotest.Start(t, baotest.Options{
		NodeID: nodeID, Config: renderNodeConfig(t, nc), Files: files, CACert: certs.CA,
		Env: append([]string{
			"BAO_API_ADDR=https://127.0.0.1:{{api_port}}",
			"BAO_CLUSTER_ADDR=https://127.0.0.1:{{cluster_port}}",
			"BAO_RAFT_NODE_ID={{node_id}}",
		}, env...),
	})
	t.Cleanup(func() { dumpLog(t, s) })
	return s
}

func newUnsealKey(t testing.TB) []byte {
	t.Helper()
	key, err := sealkey.New(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := sealkey.Validate(key); err != nil {
		t.Fatal(err)
	}
	return key
}

func baoClient(t testing.TB, s *baotest.Server, ca []byte, token openbao.Token) openbao.Client {
	t.Helper()
	c, err := openbao.New(openbao.Options{Address: s.Addr, CACert: ca, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// memoryStore is the test's TokenStore: the token stays in this process.
type memoryStore struct {
	mu    sync.Mutex
	token openbao.Token
}

func (m *memoryStore) Name() string                       { return "test/memory" }
func (m *memoryStore) DryRunCreate(context.Context) error { return nil }
func (m *memoryStore) Create(_ context.Context, tok openbao.Token) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.token = tok
	return nil
}

func (m *memoryStore) Token() openbao.Token {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.token
}

// decideFromHealth observes pod-0 the way the reconciler does without
// service-registration labels: through sys/health.
func decideFromHealth(t testing.TB, c openbao.Client, selfInit bool) bootstrap.Decision {
	t.Helper()
	obs := bootstrap.Observed{Pod0: &podstate.Pod{Name: "node-0", Running: true}, SelfInit: selfInit, Now: time.Now()}
	if !obs.NeedsHealth() {
		t.Fatal("without labels the decision should want sys/health")
	}
	h, err := c.Health(context.Background())
	if err != nil {
		obs.HealthErr = err
	} else {
		obs.Health = &h
	}
	return bootstrap.Decide(obs)
}

// waitForVoters polls the Raft configuration until it holds n voters and
// returns it.
func waitForVoters(t testing.TB, c openbao.Client, n int, timeout time.Duration) openbao.RaftConfiguration {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last openbao.RaftConfiguration
	var lastErr error
	for time.Now().Before(deadline) {
		last, lastErr = c.RaftConfiguration(context.Background())
		if lastErr == nil && len(last.Voters()) >= n {
			return last
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no %d voters within %s: voters %v non-voters %v, last error %v", n, timeout, last.Voters(), last.NonVoters(), lastErr)
	return last
}

// waitForDecision polls sys/health until Decide returns the action.
func waitForDecision(t testing.TB, c openbao.Client, selfInit bool, want bootstrap.Action, timeout time.Duration) bootstrap.Decision {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var d bootstrap.Decision
	for time.Now().Before(deadline) {
		if d = decideFromHealth(t, c, selfInit); d.Action == want {
			return d
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("decision still %s (%s: %s), want %s", d.Action, d.Reason, d.Message, want)
	return d
}

func assertNotInLogs(t *testing.T, secret string, servers ...*baotest.Server) {
	t.Helper()
	for _, s := range servers {
		if strings.Contains(s.Log(), secret) {
			t.Errorf("the root token appears in the log of %s", s.Addr)
		}
	}
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func errorsIsInvalid(err error) bool { return errors.Is(err, openbao.ErrInvalidRequest) }

// waitForActive polls sys/health until the server is the active node.
func waitForActive(t *testing.T, c openbao.Client, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var h openbao.Health
	var err error
	for time.Now().Before(deadline) {
		if h, err = c.Health(context.Background()); err == nil && h.Active() {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("not active within %s: %+v %v", timeout, h, err)
}
