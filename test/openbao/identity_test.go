package openbao_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/autopilot"
	"github.com/openbao/operator/internal/baoconfig"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/test/baotest"
)

// issuer plays the Kubernetes service-account issuer: a signing key, its
// JWKS and discovery document, and tokens as TokenRequest would mint them.
type issuer struct {
	url string
	key *rsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &issuer{url: "https://kubernetes.default.svc.cluster.local", key: key}
}

func (i *issuer) identity(t *testing.T) identity.Issuer {
	t.Helper()
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &i.key.PublicKey, KeyID: "k1", Use: "sig", Algorithm: "RS256"}}})
	discovery, _ := json.Marshal(map[string]string{"issuer": i.url, "jwks_uri": i.url + "/openid/v1/jwks"})
	iss, err := identity.IssuerFromDiscovery(discovery, jwks)
	if err != nil {
		t.Fatal(err)
	}
	return iss
}

func (i *issuer) token(t *testing.T, subject, audience string) openbao.Token {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: i.key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	raw, err := jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: i.url, Subject: subject, Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(10 * time.Minute)),
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return openbao.NewToken(raw)
}

// roleToken is the token the operator mints for a role of testCluster at
// the current identity revision (identity.LoginFor): the role's own
// ServiceAccount and audience.
func (i *issuer) roleToken(t *testing.T, role string) openbao.Token {
	t.Helper()
	c := testCluster()
	c.Status.IdentityConfigured, c.Status.IdentityRevision = true, identity.Revision
	l := identity.LoginFor(c, role, role)
	return i.token(t, identity.Subject(c.Namespace, l.ServiceAccount), l.Audience)
}

func testCluster() *v1alpha1.OpenBaoCluster {
	return &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "team-a"}}
}

// TestTheOperatorsIdentityAllowsWhatRolloutsAndBackupsNeedAndNothingElse
// sets the identity up with the root token, as the operator does after
// sys/init, then logs in with service-account tokens as the operator and
// a backup Job would.
func TestTheOperatorsIdentityAllowsWhatRolloutsAndBackupsNeedAndNothingElse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := formCluster(t, baoconfig.Timers{}, nil)
	root := baoClient(t, f.nodes[0], f.certs.CA, f.token)
	c, iss := testCluster(), newIssuer(t)
	if err := identity.Apply(ctx, root, c, iss.identity(t)); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if err := identity.Apply(ctx, root, c, iss.identity(t)); err != nil {
		t.Fatalf("a second apply (after a cut-short one) fails: %v", err)
	}
	anon := baoClient(t, f.nodes[0], f.certs.CA, openbao.Token{})
	const (
		upgradeSA = "system:serviceaccount:team-a:bao-upgrade-serviceaccount"
		restoreSA = "system:serviceaccount:team-a:bao-restore-serviceaccount"
		drillSA   = "system:serviceaccount:team-a:bao-drill-serviceaccount"
	)
	upgradeJWT := iss.token(t, upgradeSA, "openbao-operator:team-a/bao:upgrade")
	tok, ttl, err := anon.Login(ctx, identity.Mount, identity.UpgradeRole, upgradeJWT)
	if err != nil || ttl != identity.TokenTTL {
		t.Fatalf("login as upgrade: %v (ttl %s)", err, ttl)
	}
	up := baoClient(t, f.nodes[0], f.certs.CA, tok)
	if _, err := up.RaftConfiguration(ctx); err != nil {
		t.Errorf("upgrade role reads the Raft configuration: %v", err)
	}
	if _, err := up.AutopilotState(ctx); err != nil {
		t.Errorf("upgrade role reads the autopilot state: %v", err)
	}
	steady := autopilot.For(3, autopilot.Overrides{}, autopilot.PhaseSteady)
	if err := up.SetAutopilotConfiguration(ctx, steady); err != nil {
		t.Errorf("upgrade role writes autopilot: %v", err)
	}
	assertRefused(t, f.nodes[0], tok, http.MethodGet, "/v1/sys/storage/raft/snapshot")
	assertRefused(t, f.nodes[0], tok, http.MethodGet, "/v1/sys/policies/acl/"+identity.UpgradePolicy)
	assertRefused(t, f.nodes[0], tok, http.MethodPost, "/v1/sys/mounts/kv")

	backupJWT := iss.token(t, backupSubject, "openbao-operator:team-a/bao:backup")
	btok, _, err := anon.Login(ctx, identity.Mount, identity.BackupRole, backupJWT)
	if err != nil {
		t.Fatalf("login as backup: %v", err)
	}
	if code, _ := callToken(t, f.nodes[0], http.MethodGet, "/v1/sys/storage/raft/snapshot", btok, ""); code != http.StatusOK {
		t.Errorf("backup role reads a snapshot: HTTP %d", code)
	}
	assertRefused(t, f.nodes[0], btok, http.MethodPut, "/v1/sys/step-down")
	assertRefused(t, f.nodes[0], btok, http.MethodGet, "/v1/sys/storage/raft/configuration")

	restoreJWT := iss.token(t, restoreSA, "openbao-operator:team-a/bao:restore")
	if _, _, err := anon.Login(ctx, identity.Mount, identity.RestoreRole, restoreJWT); err != nil {
		t.Errorf("login as restore with the restore account and audience: %v", err)
	}

	// Tokens of the wrong account, audience or role are refused: each
	// role takes its own account with its own audience, and nothing else.
	for name, bad := range map[string]struct {
		role string
		jwt  openbao.Token
	}{
		"the backup account as upgrade":                {identity.UpgradeRole, backupJWT},
		"another cluster's audience":                   {identity.UpgradeRole, iss.token(t, upgradeSA, "openbao-operator:team-a/other:upgrade")},
		"another namespace's account":                  {identity.UpgradeRole, iss.token(t, "system:serviceaccount:team-b:bao-upgrade-serviceaccount", "openbao-operator:team-a/bao:upgrade")},
		"a backup Job's token as restore":              {identity.RestoreRole, backupJWT},
		"the backup account with the restore audience": {identity.RestoreRole, iss.token(t, backupSubject, "openbao-operator:team-a/bao:restore")},
		"the restore account with the backup audience": {identity.RestoreRole, iss.token(t, restoreSA, "openbao-operator:team-a/bao:backup")},
		"a restore Job's token as backup":              {identity.BackupRole, restoreJWT},
		"the upgrade account with the backup audience": {identity.BackupRole, iss.token(t, upgradeSA, "openbao-operator:team-a/bao:backup")},
		"the cluster's shared audience of revision 2":  {identity.UpgradeRole, iss.token(t, upgradeSA, c.OperatorTokenAudience())},
		"the shared audience with the backup account":  {identity.RestoreRole, iss.token(t, backupSubject, c.OperatorTokenAudience())},
		"a drill token as drill, outside a backup":     {identity.DrillRole, iss.token(t, drillSA, c.DrillTokenAudience("openbao/team-a/bao/k.snap"))},
		"a drill token as backup":                      {identity.BackupRole, iss.token(t, drillSA, c.DrillTokenAudience("openbao/team-a/bao/k.snap"))},
		"the drill account with the backup audience":   {identity.BackupRole, iss.token(t, drillSA, "openbao-operator:team-a/bao:backup")},
	} {
		if _, _, err := anon.Login(ctx, identity.Mount, bad.role, bad.jwt); err == nil {
			t.Errorf("%s: login succeeded", name)
		} else if containsSecret(err, bad.jwt.Reveal()) {
			t.Errorf("%s: the login error quotes the JWT", name)
		}
	}
}

func assertRefused(t *testing.T, s *baotest.Server, tok openbao.Token, method, path string) {
	t.Helper()
	if code, _ := callToken(t, s, method, path, tok, "{}"); code != http.StatusForbidden {
		t.Errorf("%s %s: HTTP %d, want 403", method, path, code)
	}
}

func containsSecret(err error, secret string) bool {
	return secret != "" && strings.Contains(err.Error(), secret)
}

// TestRolloutPrimitivesWithTheUpgradeRole: what a rollout and a scale-down
// do, with the upgrade role's token only: read each server's lag the way
// the controller reads it, step the leader down and see another lead,
// remove a peer.
func TestRolloutPrimitivesWithTheUpgradeRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := formCluster(t, baoconfig.Timers{}, nil)
	root := baoClient(t, f.nodes[0], f.certs.CA, f.token)
	c, iss := testCluster(), newIssuer(t)
	if err := identity.Apply(ctx, root, c, iss.identity(t)); err != nil {
		t.Fatal(err)
	}
	anon := baoClient(t, f.nodes[0], f.certs.CA, openbao.Token{})
	tok, _, err := anon.Login(ctx, identity.Mount, identity.UpgradeRole,
		iss.roleToken(t, identity.UpgradeRole))
	if err != nil {
		t.Fatal(err)
	}
	clients := make([]openbao.Client, len(f.nodes))
	for i, n := range f.nodes {
		clients[i] = baoClient(t, n, f.certs.CA, tok)
	}
	leaderIdx := activeNode(t, clients)
	lag := raftLag(t, clients)
	for id, l := range lag {
		t.Logf("%s trails the leader by %d entries", id, l)
		if l > 100 {
			t.Errorf("%s trails by %d entries in a settled cluster", id, l)
		}
	}
	if len(lag) != 3 {
		t.Fatalf("lag of %d servers, want 3", len(lag))
	}

	if err := clients[leaderIdx].StepDown(ctx); err != nil {
		t.Fatalf("step-down with the upgrade role: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	next := -1
	for time.Now().Before(deadline) {
		if next = activeNodeOrNone(clients); next >= 0 && next != leaderIdx {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if next < 0 || next == leaderIdx {
		t.Fatalf("no other server became active within 30 s of the step-down")
	}
	t.Logf("leadership moved from node-%d to node-%d", leaderIdx, next)

	// Remove a standby from the Raft configuration, as a scale-down does
	// before its pod goes.
	gone := 3 - leaderIdx - next
	if err := clients[next].RemovePeer(ctx, "node-"+itoa(gone)); err != nil {
		t.Fatalf("remove-peer with the upgrade role: %v", err)
	}
	raft, err := clients[next].RaftConfiguration(ctx)
	if err != nil || len(raft.Servers) != 2 {
		t.Fatalf("Raft configuration after remove-peer: %+v %v", raft, err)
	}
	f.nodes[gone].Stop(t)
}

// activeNode is the index of the active server.
func activeNode(t *testing.T, clients []openbao.Client) int {
	t.Helper()
	if i := activeNodeOrNone(clients); i >= 0 {
		return i
	}
	t.Fatal("no server is active")
	return -1
}

func activeNodeOrNone(clients []openbao.Client) int {
	for i, c := range clients {
		if l, err := c.Leader(context.Background()); err == nil && l.IsSelf {
			return i
		}
	}
	return -1
}

// raftLag reads, as the controller does, how far each server trails the
// leader (openbao.RaftLag), keyed by node id.
func raftLag(t *testing.T, clients []openbao.Client) map[string]uint64 {
	t.Helper()
	servers := map[string]openbao.Client{}
	for i, c := range clients {
		servers["node-"+itoa(i)] = c
	}
	lag, err := openbao.RaftLag(context.Background(), servers)
	if err != nil {
		t.Fatal(err)
	}
	return lag
}

func itoa(i int) string { return strconv.Itoa(i) }
