package envtest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/plugin"
	"github.com/openbao/operator/test/fixtures"
)

// revokeFaults injects faults into the operator's OpenBao client and its
// Secret deletes.
type revokeFaults struct {
	// revokeNotSent fails revoke-self without sending it; revokeLost sends
	// it and then reports a lost answer.
	revokeNotSent, revokeLost atomic.Bool
	// deleteFails refuses the delete of the root-token Secret;
	// statusConflicts answers every status write of the cluster with a
	// conflict, as when the cluster changed during the pass.
	deleteFails, statusConflicts atomic.Bool
	revokes                      atomic.Int32
}

type faultyClient struct {
	openbao.Client
	f *revokeFaults
}

func (c faultyClient) Write(ctx context.Context, path string, data map[string]any) error {
	if path != "auth/token/revoke-self" {
		return c.Client.Write(ctx, path, data)
	}
	c.f.revokes.Add(1)
	lost := &openbao.TransportError{Op: path, Err: errors.New("connection reset by the test")}
	if c.f.revokeNotSent.Load() {
		return lost
	}
	if err := c.Client.Write(ctx, path, data); err != nil {
		return err
	}
	if c.f.revokeLost.Load() {
		return lost
	}
	return nil
}

// TestARevokedRootTokenLeavesABreakGlassPath: a cluster with
// spec.rootToken.policy Revoke is initialized with recovery keys encrypted
// to the user's PGP key; the root token is revoked only once the
// operator's identity is set up, its Secret deleted only once a lookup
// proved the token dead (a revoke that was not sent, one whose answer was
// lost, a delete that failed are each survived, and an identity of an
// earlier revision holds it); afterwards the old token
// is refused, the operator still logs in with its own identity, and the
// user makes a working root token with generate-root and the decrypted
// share. The token's value reaches no log, event or status.
func TestARevokedRootTokenLeavesABreakGlassPath(t *testing.T) {
	requireBao(t)
	t.Parallel()
	ctx := context.Background()
	createNamespace(t, "root-token-revoke")
	user, armored := pgpKey(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pgp", Namespace: "root-token-revoke"},
		Data: map[string]string{"alice.asc": armored}}
	if err := k8s.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, "root-token-revoke", `
metadata: {name: boot}
spec:
  version: 2.4.0
  replicas: 1
  rootToken:
    policy: Revoke
    recoveryKeys: {pgpKeysConfigMapRef: {name: pgp, keys: [alice.asc]}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	faults := &revokeFaults{}
	rec := events.NewFakeRecorder(200)
	r, logs := revokeReconciler(t, c, rec, faults)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	pass := func() error { _, err := r.Reconcile(ctrl.LoggerInto(ctx, logs.logger()), req); return err }
	mustPass(t, pass)
	bao := startPod0(t, c)
	routeServiceToPod0(r, c, bao)

	// The identity is not set up in the pass of sys/init: no revoke.
	issuer := r.Issuer
	r.Issuer = failingIssuer{}
	mustPass(t, pass)
	token := readRootToken(t, c)
	if faults.revokes.Load() != 0 || tokenState(t, bao, token) != "alive" {
		t.Fatalf("%d revoke(s) before the identity was set up; token %s", faults.revokes.Load(), tokenState(t, bao, token))
	}
	if s := latestCluster(t, c).Status.RootToken; s == nil || s.RecoveryShares != 1 || s.RecoveryThreshold != 1 || !s.Held {
		t.Fatalf("status.rootToken %+v, want 1 recovery share stored and the token held", s)
	}

	assertPluginSays(t, c, "HELD in Secret boot-root-token, to be revoked")

	// The pass that sets the identity up records it; the next one
	// revokes. A revoke that was never sent keeps the Secret.
	r.Issuer = issuer
	mustPass(t, pass)
	if faults.revokes.Load() != 0 {
		t.Fatal("revoke-self sent in the pass that set the identity up, before its status was stored")
	}
	faults.revokeNotSent.Store(true)
	mustPass(t, pass)
	if faults.revokes.Load() == 0 || secretData(t, c, c.RootTokenSecretName()) == nil || tokenState(t, bao, token) != "alive" {
		t.Fatalf("after a revoke that was not sent: %d revoke(s), Secret kept %v, token %s", faults.revokes.Load(),
			secretData(t, c, c.RootTokenSecretName()) != nil, tokenState(t, bao, token))
	}
	// An identity of an earlier revision that cannot be brought up to
	// date holds the revocation, though the operator can log in.
	faults.revokeNotSent.Store(false)
	sent := faults.revokes.Load()
	outdated := latestCluster(t, c)
	outdated.Status.IdentityRevision = 1
	if err := k8s.Status().Update(ctx, outdated); err != nil {
		t.Fatal(err)
	}
	r.Issuer = failingIssuer{}
	mustPass(t, pass)
	if faults.revokes.Load() != sent || tokenState(t, bao, token) != "alive" {
		t.Fatalf("revoke-self sent while the identity was at revision 1; token %s", tokenState(t, bao, token))
	}
	// The identity brought up to date is recorded first; the revocation
	// waits for the stored status to say so, since the pass that revokes
	// the token could lose its status write and the identity could then
	// never be recorded again.
	r.Issuer = issuer
	mustPass(t, pass)
	if faults.revokes.Load() != sent || tokenState(t, bao, token) != "alive" ||
		identity.RecordedRevision(&latestCluster(t, c).Status) != identity.Revision {
		t.Fatalf("in the pass that brought the identity up to date: revoke-self sent %t, token %s, identity revision %d recorded",
			faults.revokes.Load() != sent, tokenState(t, bao, token), identity.RecordedRevision(&latestCluster(t, c).Status))
	}
	// A revoke whose answer is lost, in a pass whose status write is
	// lost: the token is dead, and the Secret stays, since no status says
	// the token was revoked.
	faults.revokeLost.Store(true)
	faults.statusConflicts.Store(true)
	mustPass(t, pass)
	faults.statusConflicts.Store(false)
	if tokenState(t, bao, token) != "dead" || secretData(t, c, c.RootTokenSecretName()) == nil {
		t.Fatalf("after a lost revoke answer and a lost status write: token %s, Secret kept %v", tokenState(t, bao, token),
			secretData(t, c, c.RootTokenSecretName()) != nil)
	}
	if s := latestCluster(t, c).Status.RootToken; s == nil || s.RevokedAt != nil {
		t.Fatalf("status.rootToken %+v: a lost status write cannot have stored the revocation", s)
	}
	// The next pass records the revocation; the Secret stays until the
	// one after, and there a failed delete keeps it.
	faults.deleteFails.Store(true)
	mustPass(t, pass)
	if s := latestCluster(t, c).Status.RootToken; s == nil || s.RevokedAt == nil || secretData(t, c, c.RootTokenSecretName()) == nil {
		t.Fatalf("status.rootToken %+v, Secret kept %v: want the revocation recorded and the Secret kept", s,
			secretData(t, c, c.RootTokenSecretName()) != nil)
	}
	if err := pass(); err == nil {
		t.Fatal("a pass whose delete failed returned no error")
	}
	if secretData(t, c, c.RootTokenSecretName()) == nil {
		t.Fatal("the Secret is gone after a failed delete")
	}
	faults.deleteFails.Store(false)
	mustPass(t, pass)
	mustPass(t, pass)
	latest := latestCluster(t, c)
	if secretData(t, c, c.RootTokenSecretName()) != nil {
		t.Fatal("the root-token Secret of a revoked token was not deleted")
	}
	if s := latest.Status.RootToken; s == nil || s.Held || s.RevokedAt == nil {
		t.Fatalf("status.rootToken %+v, want revoked, not held", s)
	}
	if cond := findCondition(latest, v1alpha1.ConditionOpenBaoInitialized); cond == nil || cond.Reason != bootstrap.ReasonRootTokenRevoked {
		t.Errorf("OpenBaoInitialized %+v, want reason %s", cond, bootstrap.ReasonRootTokenRevoked)
	}

	assertPluginSays(t, c, "revoked")
	// The operator still works with its own identity.
	assertOperatorLogsIn(t, c, bao)
	// Break glass: generate-root with the share only the user can open.
	encrypted := secretData(t, c, c.RecoveryKeysSecretName())[bootstrap.RecoveryShareKey(1)]
	share := openShare(t, user, encrypted)
	newRoot := generateRoot(t, bao, share)
	if state := tokenState(t, bao, newRoot); state != "alive" {
		t.Fatalf("the generated root token is %s", state)
	}
	if _, err := bao.client(t, newRoot).Read(ctx, "sys/policies/acl/"+identity.UpgradePolicy); err != nil {
		t.Errorf("the generated root token cannot read a policy: %v", err)
	}
	assertNoTokenIn(t, token, rec, logs, latest)
	for what, secret := range map[string]string{"the decrypted share": share, "the encrypted share": base64.StdEncoding.EncodeToString(encrypted)} {
		if strings.Contains(logs.String(), secret) || strings.Contains(fmt.Sprintf("%+v", latest.Status), secret) {
			t.Errorf("%s is in the operator's log or the status", what)
		}
	}
}

// assertPluginSays runs kubectl openbao status (the list) for c's
// namespace and wants want on c's line.
func assertPluginSays(t *testing.T, c *v1alpha1.OpenBaoCluster, want string) {
	t.Helper()
	var out bytes.Buffer
	cmds := &plugin.Commands{Client: k8s, Namespace: c.Namespace, Now: time.Now}
	if err := cmds.StatusAll(context.Background(), plugin.OutputTable, &out); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, " "+c.Name+" ") && strings.Contains(line, want) {
			return
		}
	}
	t.Errorf("kubectl openbao status does not say %q of %s:\n%s", want, c.Name, out.String())
}

func mustPass(t *testing.T, pass func() error) {
	t.Helper()
	if err := pass(); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
}

// revokeReconciler is the production reconciler on real OpenBao, with the
// issuer of the envtest API server, faults and a log that is kept.
func revokeReconciler(t *testing.T, c *v1alpha1.OpenBaoCluster, rec *events.FakeRecorder, f *revokeFaults) (*controllers.OpenBaoClusterReconciler, *logBuffer) {
	t.Helper()
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	failing := interceptor.NewClient(direct, interceptor.Funcs{
		Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if obj.GetName() == c.RootTokenSecretName() && f.deleteFails.Load() {
				return errors.New("the delete is refused by the test")
			}
			return cl.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if sub == "status" && obj.GetName() == c.Name && f.statusConflicts.Load() {
				return apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("openbaoclusters").GroupResource(), c.Name,
					errors.New("the test changed the cluster"))
			}
			return cl.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	r, err := newReconciler(failing, k8s, rec)
	if err != nil {
		t.Fatal(err)
	}
	issuer, err := controllers.NewIssuerSource(cfg, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	r.Issuer = issuer
	r.OpenBao = func(o openbao.Options) (openbao.Client, error) {
		bc, err := openbao.New(o)
		if err != nil {
			return nil, err
		}
		return faultyClient{Client: bc, f: f}, nil
	}
	return r, &logBuffer{}
}

// routeServiceToPod0 sends what the operator addresses to the client
// Service to pod-0: there is no DNS here.
func routeServiceToPod0(r *controllers.OpenBaoClusterReconciler, c *v1alpha1.OpenBaoCluster, bao *podServer) {
	podFactory := r.OpenBao
	r.OpenBao = func(o openbao.Options) (openbao.Client, error) {
		if u, err := url.Parse(o.Address); err == nil && u.Hostname() == c.Name+"."+c.Namespace+".svc" {
			o.Address = bao.Addr
		}
		return podFactory(o)
	}
}

type failingIssuer struct{}

func (failingIssuer) Issuer(context.Context) (identity.Issuer, error) {
	return identity.Issuer{}, errors.New("the issuer is unreachable in this test")
}

// tokenState looks token up with itself: alive, dead (403) or the error.
func tokenState(t *testing.T, bao *podServer, token openbao.Token) string {
	t.Helper()
	_, err := bao.client(t, token).Read(context.Background(), "auth/token/lookup-self")
	switch {
	case err == nil:
		return "alive"
	case errors.Is(err, openbao.ErrPermissionDenied):
		return "dead"
	}
	return err.Error()
}

// assertOperatorLogsIn logs in as the operator's upgrade role with a token
// of its ServiceAccount, as rollouts do.
func assertOperatorLogsIn(t *testing.T, c *v1alpha1.OpenBaoCluster, bao *podServer) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: c.UpgradeServiceAccountName(), Namespace: c.Namespace}}
	jwt := requestToken(t, sa, c.RoleTokenAudience(identity.UpgradeRole))
	tok, _, err := bao.client(t, openbao.Token{}).Login(context.Background(), identity.Mount, identity.UpgradeRole, jwt)
	if err != nil {
		t.Fatalf("the operator's upgrade role after the revocation: %v", err)
	}
	if state := tokenState(t, bao, tok); state != "alive" {
		t.Fatalf("the upgrade login's token is %s", state)
	}
}

// requestToken asks the API server for a token of sa for audience.
func requestToken(t *testing.T, sa *corev1.ServiceAccount, audience string) openbao.Token {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}}}
	if err := k8s.SubResource("token").Create(context.Background(), sa, req); err != nil {
		t.Fatalf("a token of ServiceAccount %s: %v", sa.Name, err)
	}
	return openbao.NewToken(req.Status.Token)
}

// pgpKey makes the user's key pair; it returns the entity (with its
// private key) and the armored public key.
func pgpKey(t *testing.T) (*openpgp.Entity, string) {
	t.Helper()
	e, armored, err := fixtures.PGPKey("Alice")
	if err != nil {
		t.Fatal(err)
	}
	return e, armored
}

// openShare decrypts a stored share with the user's private key, as
// gpg --decrypt does: the share in hex.
func openShare(t *testing.T, user *openpgp.Entity, msg []byte) string {
	t.Helper()
	if len(msg) == 0 {
		t.Fatal("no encrypted share stored")
	}
	md, err := openpgp.ReadMessage(bytes.NewReader(msg), openpgp.EntityList{user}, nil, nil)
	if err != nil {
		t.Fatalf("decrypt the share: %v", err)
	}
	share, err := io.ReadAll(md.UnverifiedBody)
	if err != nil {
		t.Fatal(err)
	}
	return string(share)
}

// generateRoot sends what bao operator generate-root of OpenBao 2.4
// sends, unauthenticated, with one share, and decodes the token with the
// one-time password.
func generateRoot(t *testing.T, bao *podServer, share string) openbao.Token {
	t.Helper()
	var attempt struct {
		Nonce string `json:"nonce"`
		OTP   string `json:"otp"`
	}
	putJSON(t, bao, "sys/generate-root/attempt", map[string]string{}, &attempt)
	var update struct {
		Complete     bool   `json:"complete"`
		EncodedToken string `json:"encoded_token"`
	}
	putJSON(t, bao, "sys/generate-root/update", map[string]string{"key": share, "nonce": attempt.Nonce}, &update)
	if !update.Complete {
		t.Fatal("generate-root is not complete after the one share of threshold 1")
	}
	enc, err := base64.RawStdEncoding.DecodeString(update.EncodedToken)
	if err != nil || len(enc) != len(attempt.OTP) {
		t.Fatalf("encoded token of %d bytes, OTP of %d: %v", len(enc), len(attempt.OTP), err)
	}
	for i := range enc {
		enc[i] ^= attempt.OTP[i]
	}
	return openbao.NewToken(string(enc))
}

// putJSON sends PUT /v1/path with body, without a token, and decodes the
// answer into out.
func putJSON(t *testing.T, bao *podServer, path string, body, out any) {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPut, bao.Addr+"/v1/"+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := bao.Client.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", path, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT %s: HTTP %d: %s", path, resp.StatusCode, answer)
	}
	if err := json.Unmarshal(answer, out); err != nil {
		t.Fatalf("PUT %s: %v", path, err)
	}
}

// logBuffer keeps the reconciler's log lines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.lines = append(b.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 10})
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// assertNoTokenIn scans the log, the events and the status for the root
// token's value.
func assertNoTokenIn(t *testing.T, token openbao.Token, rec *events.FakeRecorder, logs *logBuffer, c *v1alpha1.OpenBaoCluster) {
	t.Helper()
	secret := token.Reveal()
	if len(secret) < 8 {
		t.Fatalf("the token read is %d characters: the scan would prove nothing", len(secret))
	}
	if strings.Contains(logs.String(), secret) {
		t.Error("the root token is in the operator's log")
	}
	var evs []string
	for done := false; !done; {
		select {
		case e := <-rec.Events:
			evs = append(evs, e)
		default:
			done = true
		}
	}
	if len(evs) == 0 || !strings.Contains(strings.Join(evs, "\n"), bootstrap.ReasonRootTokenRevoked) {
		t.Errorf("no %s event among %d", bootstrap.ReasonRootTokenRevoked, len(evs))
	}
	if strings.Contains(strings.Join(evs, "\n"), secret) {
		t.Error("the root token is in an event")
	}
	if strings.Contains(fmt.Sprintf("%+v", c.Status), secret) {
		t.Error("the root token is in the status")
	}
}

// TestSysInitWaitsForUsablePGPKeys: with spec.rootToken.recoveryKeys,
// sys/init is not called while the ConfigMap is missing or holds no
// usable public key (a cluster initialized then would have no recovery
// keys); once it does, the cluster initializes with them.
func TestSysInitWaitsForUsablePGPKeys(t *testing.T) {
	requireBao(t)
	t.Parallel()
	ctx := context.Background()
	createNamespace(t, "root-token-keys")
	c := newCluster(t, "root-token-keys", `
metadata: {name: boot}
spec:
  version: 2.4.0
  replicas: 1
  rootToken:
    policy: Revoke
    recoveryKeys: {pgpKeysConfigMapRef: {name: pgp, keys: [alice.asc]}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	r, inits := realReconciler(t, events.NewFakeRecorder(100))
	reconcile := reconcileFunc(t, ctx, r, c)
	reconcile()
	startPod0(t, c)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pgp", Namespace: c.Namespace},
		Data: map[string]string{"alice.asc": "-----BEGIN PGP PUBLIC KEY BLOCK-----\nnot a key\n-----END PGP PUBLIC KEY BLOCK-----\n"}}
	for _, step := range []string{"missing", "not a key"} {
		if step == "not a key" {
			if err := k8s.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
		}
		reconcile()
		cond := findCondition(latestCluster(t, c), v1alpha1.ConditionOpenBaoInitialized)
		if inits.Load() != 0 || cond == nil || cond.Reason != bootstrap.ReasonRecoveryKeysUnavailable ||
			!strings.Contains(cond.Message, "pgpKeysConfigMapRef") {
			t.Fatalf("ConfigMap %s: %d sys/init call(s), OpenBaoInitialized %+v", step, inits.Load(), cond)
		}
	}
	_, armored := pgpKey(t)
	cm.Data["alice.asc"] = armored
	if err := k8s.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if s := latestCluster(t, c).Status; inits.Load() != 1 || !s.Initialized || s.RootToken == nil || s.RootToken.RecoveryShares != 1 {
		t.Fatalf("with a usable key: %d sys/init call(s), status %+v", inits.Load(), s.RootToken)
	}
}

// TestRevokeIsHeldOnAClusterWithoutRecoveryKeys: a cluster initialized
// without recovery keys, switched to Revoke past the webhook, keeps its
// only credential: Degraded RevokeRefusedNoRecoveryKeys, no revoke-self.
func TestRevokeIsHeldOnAClusterWithoutRecoveryKeys(t *testing.T) {
	requireBao(t)
	t.Parallel()
	ctx := context.Background()
	createNamespace(t, "root-token-nokeys")
	c := newCluster(t, "root-token-nokeys", "metadata: {name: boot}\nspec: {version: 2.4.0, replicas: 1}\n")
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	faults := &revokeFaults{}
	r, logs := revokeReconciler(t, c, events.NewFakeRecorder(100), faults)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	pass := func() error { _, err := r.Reconcile(ctrl.LoggerInto(ctx, logs.logger()), req); return err }
	mustPass(t, pass)
	bao := startPod0(t, c)
	routeServiceToPod0(r, c, bao)
	mustPass(t, pass)
	token := readRootToken(t, c)
	latest := latestCluster(t, c)
	latest.Spec.RootToken = &v1alpha1.RootTokenSpec{Policy: v1alpha1.RootTokenRevoke, RecoveryKeys: &v1alpha1.RecoveryKeysSpec{
		PGPKeysConfigMapRef: v1alpha1.PGPKeysConfigMapRef{Name: "pgp", Keys: []string{"alice.asc"}}}}
	if err := k8s.Update(ctx, latest); err != nil {
		t.Fatal(err)
	}
	mustPass(t, pass)
	mustPass(t, pass)
	cond := findCondition(latestCluster(t, c), v1alpha1.ConditionDegraded)
	if faults.revokes.Load() != 0 || tokenState(t, bao, token) != "alive" || secretData(t, c, c.RootTokenSecretName()) == nil {
		t.Fatalf("%d revoke(s); token %s", faults.revokes.Load(), tokenState(t, bao, token))
	}
	if cond == nil || cond.Reason != bootstrap.ReasonRevokeRefusedNoRecoveryKeys || !strings.Contains(cond.Message, "generate-root") {
		t.Fatalf("Degraded %+v, want %s", cond, bootstrap.ReasonRevokeRefusedNoRecoveryKeys)
	}
}
