package openbao_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/autopilot"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/baoconfig"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/test/baotest"
)

// selfInitRequests enable userpass with a password from the environment and
// a read-only policy for the Raft endpoints, so the test can read back what
// the operator's autopilot request wrote: the operator itself holds no
// token in self-init mode.
func selfInitRequests(t *testing.T, autopilot baoconfig.InitRequest) []baoconfig.InitRequest {
	t.Helper()
	return []baoconfig.InitRequest{
		{Name: "enable_userpass", Operation: "update", Path: "sys/auth/userpass", Data: map[string]any{"type": "userpass"}},
		{Name: "raft_reader", Operation: "update", Path: "sys/policies/acl/raft-reader", Data: map[string]any{
			"policy": `path "sys/storage/raft/*" { capabilities = ["read"] }`}},
		{Name: "reader_user", Operation: "update", Path: "auth/userpass/users/reader", Data: map[string]any{
			"password":       map[string]any{"eval_source": "env", "eval_type": "string", "env_var": "BAO_READER_PASSWORD"},
			"token_policies": []any{"raft-reader"},
		}},
		autopilot,
	}
}

func login(t *testing.T, s *baotest.Server, user, password string) openbao.Token {
	t.Helper()
	status, body := call(t, s, http.MethodPut, "/v1/auth/userpass/login/"+user, `{"password":"`+password+`"}`)
	if status != http.StatusOK {
		t.Fatalf("login as %s: %d", user, status)
	}
	var answer struct {
		Auth struct {
			ClientToken string `json:"client_token"`
		} `json:"auth"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || answer.Auth.ClientToken == "" {
		t.Fatalf("login answer unreadable: %v", err)
	}
	return openbao.NewToken(answer.Auth.ClientToken)
}

func TestSelfInitWithTheAutopilotRequestFormsThreeVoters(t *testing.T) {
	t.Parallel()
	const password = "reader password"
	request, err := autopilot.SelfInitRequest(3, autopilot.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	certs := newTestCerts(t)
	key := newUnsealKey(t)
	c, iss := testCluster(), newIssuer(t)
	// The operator's own identity comes as self-init requests too, after
	// the user's and the autopilot one, as values.SelfInitFor renders them.
	requests := append(selfInitRequests(t, request), identity.Requests(c, iss.identity(t))...)
	start := time.Now()
	node0 := startNode(t, certs, key, "node-0", nodeConfig{selfInit: requests}, "BAO_READER_PASSWORD="+password)

	// Detection without a token: sys/health, as the labels would say it.
	c0 := baoClient(t, node0, certs.CA, openbao.Token{})
	d := waitForDecision(t, c0, true, bootstrap.ActionAdopt, 60*time.Second)
	if !d.SelfInitialized || d.Reason != bootstrap.ReasonSelfInitialized {
		t.Errorf("decision %+v, want Adopt as self-initialized", d)
	}
	detected := time.Since(start)
	waitForActive(t, c0, 30*time.Second)

	reader := baoClient(t, node0, certs.CA, login(t, node0, "reader", password))
	got, err := reader.AutopilotConfiguration(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := autopilot.For(3, autopilot.Overrides{}, autopilot.PhaseSteady)
	if autopilot.NeedsUpdate(got, want) {
		t.Errorf("autopilot after self-init %+v, want %+v", got, want)
	}
	// The operator logs in with its upgrade role on a cluster it never
	// held a root token for.
	tok, _, err := c0.Login(context.Background(), identity.Mount, identity.UpgradeRole,
		iss.roleToken(t, identity.UpgradeRole))
	if err != nil {
		t.Fatalf("login as the operator's upgrade role on a self-initialized cluster: %v", err)
	}
	if _, err := baoClient(t, node0, certs.CA, tok).AutopilotState(context.Background()); err != nil {
		t.Errorf("the upgrade role reads the autopilot state: %v", err)
	}
	// The canary mount came with self-init: the backup role writes it.
	btok, _, err := c0.Login(context.Background(), identity.Mount, identity.BackupRole, iss.roleToken(t, identity.BackupRole))
	if err != nil {
		t.Fatalf("login as the backup role on a self-initialized cluster: %v", err)
	}
	canary, _ := backup.CanaryValue("b1", "k1", time.Now())
	if err := baoClient(t, node0, certs.CA, btok).Write(context.Background(), identity.CanaryPath, canary); err != nil {
		t.Errorf("the backup role writes the canary on a self-initialized cluster: %v", err)
	}

	// The joiners carry no initialize stanzas (only pod-0 does).
	joinersStart := time.Now()
	var nodes []*baotest.Server
	for _, id := range []string{"node-1", "node-2"} {
		nodes = append(nodes, startNode(t, certs, key, id, nodeConfig{leaderAddr: node0.Addr}))
	}
	raft := waitForVoters(t, reader, 3, 3*time.Minute)
	t.Logf("self-init: detected initialized after %s; joiners to 3 voters %s (steady stabilization %s); pod-0 start to 3 voters %s",
		seconds(detected), seconds(time.Since(joinersStart)), want.ServerStabilizationTime, seconds(time.Since(start)))
	for _, s := range raft.Servers {
		if !s.Voter {
			t.Errorf("%s is not a voter", s.NodeID)
		}
	}
	for _, n := range nodes {
		if h, err := baoClient(t, n, certs.CA, openbao.Token{}).Health(context.Background()); err != nil || !h.Standby {
			t.Errorf("joiner %s: %+v %v, want an unsealed standby of the same cluster", n.Addr, h, err)
		}
	}
}

// callToken is call with a token.
func callToken(t *testing.T, s *baotest.Server, method, path string, token openbao.Token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.Addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Vault-Token", token.Reveal())
	resp, err := s.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var buf strings.Builder
	_, _ = io.Copy(&buf, resp.Body)
	return resp.StatusCode, buf.String()
}

// initNode initializes a single node through internal/bootstrap and
// returns its root token once it is active.
func initNode(t *testing.T, s *baotest.Server, ca []byte) openbao.Token {
	t.Helper()
	c := baoClient(t, s, ca, openbao.Token{})
	waitForDecision(t, c, false, bootstrap.ActionInitialize, 30*time.Second)
	store := &memoryStore{}
	if _, err := bootstrap.Initialize(context.Background(), c, store, bootstrap.InitOptions{}); err != nil {
		t.Fatalf("initialize %s: %v", s.Addr, err)
	}
	waitForActive(t, c, 30*time.Second)
	return store.Token()
}

// transitServer is a second bao serving the transit engine with a key and
// a token limited to encrypting and decrypting with it.
func transitServer(t *testing.T) (*baotest.Server, testCerts, openbao.Token) {
	t.Helper()
	certs := newTestCerts(t)
	s := startNode(t, certs, newUnsealKey(t), "transit-0", nodeConfig{})
	root := initNode(t, s, certs.CA)
	policy := `path "transit/encrypt/autounseal" { capabilities = ["update"] }
path "transit/decrypt/autounseal" { capabilities = ["update"] }`
	policyBody, _ := json.Marshal(map[string]string{"policy": policy})
	for _, step := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/sys/mounts/transit", `{"type":"transit"}`},
		{http.MethodPost, "/v1/transit/keys/autounseal", `{}`},
		{http.MethodPut, "/v1/sys/policies/acl/autounseal", string(policyBody)},
	} {
		if status, body := callToken(t, s, step.method, step.path, root, step.body); status >= 300 {
			t.Fatalf("%s %s: %d %s", step.method, step.path, status, body)
		}
	}
	status, body := callToken(t, s, http.MethodPost, "/v1/auth/token/create", root, `{"policies":["autounseal"],"period":"24h"}`)
	if status != http.StatusOK {
		t.Fatalf("create the seal token: %d", status)
	}
	var answer struct {
		Auth struct {
			ClientToken string `json:"client_token"`
		} `json:"auth"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || answer.Auth.ClientToken == "" {
		t.Fatalf("token answer unreadable: %v", err)
	}
	return s, certs, openbao.NewToken(answer.Auth.ClientToken)
}

func TestTransitSealInitializesAndAutoUnsealsAfterRestart(t *testing.T) {
	t.Parallel()
	transit, transitCerts, sealToken := transitServer(t)
	certs := newTestCerts(t)
	seal := baoconfig.Seal{Type: baoconfig.SealTransit, Options: map[string]string{
		"address":     transit.Addr,
		"key_name":    "autounseal",
		"mount_path":  "transit/",
		"tls_ca_cert": "{{dir}}/transit-ca.crt",
	}}
	node := startNode(t, certs, nil, "node-0", nodeConfig{seal: seal, files: map[string][]byte{"transit-ca.crt": transitCerts.CA}},
		"BAO_TOKEN="+sealToken.Reveal())
	root := initNode(t, node, certs.CA)
	assertNotInLogs(t, root.Reveal(), node, transit)

	node.Restart(t)
	c := baoClient(t, node, certs.CA, openbao.Token{})
	waitForActive(t, c, 60*time.Second)
	h, err := c.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pod0 := &podstate.Pod{Name: "node-0", Running: true}
	// With the token this operator stored: marked initialized, never
	// initialized again. Without it, nobody this operator knows initialized
	// the server: a security event, not an adoption.
	if d := bootstrap.Decide(bootstrap.Observed{Pod0: pod0, Health: &h, RootTokenSecretExists: true, Now: time.Now()}); d.Action != bootstrap.ActionMarkInitialized {
		t.Errorf("after restart, token stored: %s (%s), want MarkInitialized", d.Action, d.Reason)
	}
	if d := bootstrap.Decide(bootstrap.Observed{Pod0: pod0, Health: &h, Now: time.Now()}); d.Reason != bootstrap.ReasonInitializedElsewhere {
		t.Errorf("after restart, no token stored: %s (%s), want InitializedElsewhere", d.Action, d.Reason)
	}
	if _, err := baoClient(t, node, certs.CA, root).RaftConfiguration(context.Background()); err != nil {
		t.Errorf("the root token from before the restart: %v", err)
	}
}
