package controllers

// This file holds the ways the cluster reconciler talks to OpenBao: what a
// pass reads of the servers (the view), the clients of one server and of
// the active one, and the tokens it logs in with (its upgrade role, the
// short-lived ServiceAccount tokens behind it, a token a user stored).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/internal/secrets"
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
	v := r.serverHealth(ctx, p)
	if v.problem == "" {
		v.raft, v.problem = r.readRaft(ctx, p, v)
	}
	return v
}

// serverHealth is the first half of view: each server's sys/health.
func (r *OpenBaoClusterReconciler) serverHealth(ctx context.Context, p *pass) *openbaoView {
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
	for name, p := range openbao.RaftProgressTo(ctx, leader, v.servers) {
		if s, ok := v.raft.Servers[name]; ok {
			s.Lag, s.LagKnown = p.Lag, true
			s.Received, s.Index, s.LeaderIndex = p.Received, p.Index, p.LeaderIndex
			v.raft.Servers[name] = s
		}
	}
}

// readRaft reads the leader's committed index and autopilot state from the
// server that just said it is active, or from the one activeClient finds
// when none did (an election is under way). Asking the active pod directly
// spares a read through a Service whose endpoints may still name a server
// that stepped down and is stopping. A standby's sys/leader answers its
// own index, not the leader's (the Service routes to standbys too, and
// the active pod may have stepped down since), so only the active
// server's answer counts.
func (r *OpenBaoClusterReconciler) readRaft(ctx context.Context, p *pass, v *openbaoView) (*upgrade.Raft, string) {
	tok, err := r.upgradeToken(ctx, p)
	if err != nil {
		return nil, err.Error()
	}
	var bao openbao.Client
	if name := v.activeServer(); name != "" {
		bao, err = r.podClient(p, ordinalOf(p, name), tok)
	} else {
		bao, err = r.activeClient(ctx, p.cluster, p.tls, p.servers, tok)
	}
	if err != nil {
		return nil, err.Error()
	}
	leader, err := readWithin(ctx, viewReadTimeout, bao.Leader)
	if err != nil {
		return nil, "read sys/leader: " + err.Error()
	}
	if !leader.Leads() {
		return nil, "the server asked for the leader's index is a standby: leadership is changing"
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
		out.Servers[id] = upgrade.Server{Lag: lag, LagKnown: true, Voter: s.Status == "voter" || s.Status == "leader", Healthy: s.Healthy,
			LastContact: s.LastContact, ContactKnown: s.ContactKnown || s.Status == "leader", LastIndex: s.LastIndex}
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
		out = append(out, upgrade.Pod{Name: s.Name, Ordinal: s.Ordinal, Revision: s.Revision, Ready: s.Ready, Active: active, Started: s.RunningSince,
			Container: upgrade.Container{Waiting: s.WaitingReason, Restarts: s.RestartCount, LastReason: s.LastTerminationReason,
				LastExitCode: s.LastExitCode, LastMessage: s.LastTerminationMessage}})
	}
	return out
}

// serviceClient talks to whichever server the client Service reaches (on
// the internal listener with ACME): every server that serves clients (the
// active one only with ACME, from OpenBao 2.5 and while the cluster is
// formed from another's snapshot). For requests without a token, whose
// answer the caller checks (sys/leader): a standby forwards what it does
// not serve. A token goes through it only to a server that says its
// storage has no HA (activeClient), where it is the one server.
//
// A standby's client Service has no endpoints while it stands by (so that
// no client can write): the operator then asks pod-0 at its stable name.
func (r *OpenBaoClusterReconciler) serviceClient(c *v1alpha1.OpenBaoCluster, served servedTLS, token openbao.Token) (openbao.Client, error) {
	if c.StandingBy() {
		return r.OpenBao(openbao.Options{Address: c.PodAPIAddress(0), CACert: served.caPEM, ServerName: c.PodDNSName(0), Token: token})
	}
	return r.OpenBao(openbao.Options{Address: c.InternalServiceAddress(), CACert: served.caPEM,
		ServerName: c.ClientServiceDNSName(), Token: token})
}

// activeClient is a client, holding token, of c's active server at that
// server's own address, for every request of the operator's that carries
// a token. The server serviceClient reaches names the active server in
// sys/leader; that must be one of c's (PodOrdinalAt), and it must say
// itself that it is active. Asking whichever server answers would not do:
// a standby forwards requests to the server its data names as active, and
// after a restore of another cluster's snapshot, until the restore ends
// and the record reaches it, that is the other cluster's active server
// (OpenBao 2.4.0 restores the source's leader record with its data and
// rewrites it only at the end of the restore). A token valid in both
// (the source's, restored with its data) would act on the source.
// pods gives the servers' addresses where the caller has them (a replaced
// pod's DNS record can name the old pod for seconds); nil dials by name.
func (r *OpenBaoClusterReconciler) activeClient(ctx context.Context, c *v1alpha1.OpenBaoCluster, served servedTLS, pods podstate.Snapshot,
	token openbao.Token) (openbao.Client, error) {
	asked, err := r.serviceClient(c, served, openbao.Token{})
	if err != nil {
		return nil, err
	}
	leader, err := readWithin(ctx, viewReadTimeout, asked.Leader)
	if err != nil {
		return nil, fmt.Errorf("ask %s for its active server: %w", c.Name, err)
	}
	if !leader.HAEnabled {
		return r.serviceClient(c, served, token) // storage without HA: the one server
	}
	ordinal, ok := c.PodOrdinalAt(leader.LeaderAddress)
	if !ok {
		return nil, fmt.Errorf("%w: %s names %q as its active server, not one of %s's servers (%s)",
			errNoOwnActiveServer, c.Name, leader.LeaderAddress, c.Name, c.PodAPIAddress(0))
	}
	if err := r.confirmActive(ctx, c, served, pods, ordinal); err != nil {
		return nil, err
	}
	return r.serverClient(c, served, pods, ordinal, token)
}

// confirmActive asks the server of ordinal, without a token, whether it is
// the active one: a server taken for active (by a label, another server's
// word or an earlier read) may be a standby by now, and a standby
// forwards a request with a token to whichever server its data names.
func (r *OpenBaoClusterReconciler) confirmActive(ctx context.Context, c *v1alpha1.OpenBaoCluster, served servedTLS, pods podstate.Snapshot, ordinal int) error {
	server, err := r.serverClient(c, served, pods, ordinal, openbao.Token{})
	if err != nil {
		return err
	}
	self, err := readWithin(ctx, viewReadTimeout, server.Leader)
	if err != nil {
		return fmt.Errorf("ask %s whether it is active: %w", c.PodName(ordinal), err)
	}
	if !self.Leads() {
		return fmt.Errorf("%w: %s says it is not active: leadership is changing", errNoOwnActiveServer, c.PodName(ordinal))
	}
	return nil
}

// errNoOwnActiveServer says no server of the cluster could be confirmed
// active; the step waits for the next pass.
var errNoOwnActiveServer = errors.New("no active server of this cluster confirmed")

// podClient talks to one server of the pass's cluster (serverClient).
func (r *OpenBaoClusterReconciler) podClient(p *pass, ordinal int, token openbao.Token) (openbao.Client, error) {
	return r.serverClient(p.cluster, p.tls, p.servers, ordinal, token)
}

// serverClient talks to one server at its pod's address, verified against
// its stable DNS name and the cluster CA (with ACME, on the internal
// listener, whose certificate the operator's CA signs). The address comes
// from pods: a replaced pod's DNS record can name the old pod's address
// for a few seconds, and a dial to it waits out the dial timeout. A pod
// with no address known is dialled by name.
func (r *OpenBaoClusterReconciler) serverClient(c *v1alpha1.OpenBaoCluster, served servedTLS, pods podstate.Snapshot, ordinal int,
	token openbao.Token) (openbao.Client, error) {
	host := c.PodDNSName(ordinal)
	addr := host
	if pod, ok := pods.Get(c.PodName(ordinal)); ok && pod.IP != "" {
		addr = pod.IP
	}
	address := "https://" + net.JoinHostPort(addr, strconv.Itoa(c.InternalAPIPort()))
	return r.OpenBao(openbao.Options{Address: address, CACert: served.caPEM, ServerName: host, Token: token})
}

// upgradeToken returns a token for rollouts, peer removal and autopilot:
// from spec.upgrade.tokenSecretRef, or by logging in with a short-lived
// token of <cluster>-upgrade-serviceaccount. It is kept in memory until
// shortly before it expires.
func (r *OpenBaoClusterReconciler) upgradeToken(ctx context.Context, p *pass) (openbao.Token, error) {
	c := p.cluster
	if ref := c.Spec.Upgrade.TokenSecretRef; ref != nil && c.DrillSource() == "" {
		return r.userToken(ctx, c, "spec.upgrade.tokenSecretRef", ref)
	}
	if c.Spec.Upgrade.JWTAuthRole == "" && !p.status.IdentityConfigured {
		return openbao.Token{}, errNoUpgradeAuth
	}
	key := client.ObjectKeyFromObject(c)
	var cached openbao.Token
	r.memory.with(key, c.UID, func(m *clusterMemory) {
		if r.Clock.Now().Before(m.upgradeTokenExpiry) {
			cached = m.upgradeToken
		}
	})
	if !cached.IsZero() {
		return cached, nil
	}
	tok, ttl, err := r.loginAsUpgrade(ctx, p)
	if err != nil {
		return openbao.Token{}, err
	}
	r.memory.with(key, c.UID, func(m *clusterMemory) {
		m.upgradeToken, m.upgradeTokenExpiry = tok, r.Clock.Now().Add(ttl*3/4)
	})
	return tok, nil
}

// forgetUpgradeToken drops a token OpenBao refused.
func (r *OpenBaoClusterReconciler) forgetUpgradeToken(c *v1alpha1.OpenBaoCluster) {
	r.memory.with(client.ObjectKeyFromObject(c), c.UID, func(m *clusterMemory) {
		m.upgradeToken, m.upgradeTokenExpiry = openbao.Token{}, time.Time{}
	})
}

// loginAsUpgrade logs in as the pass's status says the identity is: an
// identity this very pass brought to a new revision binds its roles to
// that revision's audiences already, and the stored status still names
// the old one.
func (r *OpenBaoClusterReconciler) loginAsUpgrade(ctx context.Context, p *pass) (openbao.Token, time.Duration, error) {
	c := p.cluster.DeepCopy()
	c.Status = *p.status.DeepCopy()
	login, mount, err := r.upgradeLogin(ctx, c)
	if err != nil {
		return openbao.Token{}, 0, err
	}
	jwt, err := r.serviceAccountToken(ctx, c.Namespace, login)
	if err != nil {
		return openbao.Token{}, 0, err
	}
	bao, err := r.activeClient(ctx, c, p.tls, p.servers, openbao.Token{})
	if err != nil {
		return openbao.Token{}, 0, err
	}
	tok, ttl, err := bao.Login(ctx, mount, login.Role, jwt)
	if err != nil {
		return openbao.Token{}, 0, fmt.Errorf("log in at auth/%s as role %s: %w", mount, login.Role, err)
	}
	if ttl <= 0 {
		ttl = time.Minute
	}
	return tok, ttl, nil
}

// upgradeLogin is how the operator logs in to c for rollouts and
// autopilot: as c's upgrade role; in a copy that kept its source's
// identity, as the source's (whose recorded revision says with which
// audience); in a restore drill's copy, as the source's drill role with
// the snapshot's audience, which the source itself refuses, so that the
// copy is never handed a token that works on the source.
func (r *OpenBaoClusterReconciler) upgradeLogin(ctx context.Context, c *v1alpha1.OpenBaoCluster) (identity.Login, string, error) {
	owner := c.IdentityOwner()
	if src := c.DrillSource(); src != "" && owner != c {
		return identity.DrillLogin(owner, c.FromBackup().Key), identity.Mount, nil
	}
	if owner != c {
		source := &v1alpha1.OpenBaoCluster{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(owner), source); err == nil {
			owner = source
		} else if !apierrors.IsNotFound(err) {
			return identity.Login{}, "", fmt.Errorf("read the source cluster %s: %w", owner.Name, err)
		}
	}
	mount := c.Spec.Upgrade.JWTAuthPath
	if mount == "" {
		mount = identity.Mount
	}
	return identity.LoginFor(owner, identity.UpgradeRole, c.Spec.Upgrade.LoginRole()), mount, nil
}

// readCanary logs in to cluster target (reached as activeClient reaches
// it, verified against tls) as login, with a token of login's
// ServiceAccount in namespace, and reads the backup canary: a restore
// drill reads it from its copy, a standby from its own data after each
// restore.
func (r *OpenBaoClusterReconciler) readCanary(ctx context.Context, target *v1alpha1.OpenBaoCluster, tls servedTLS, namespace string,
	login identity.Login) (map[string]any, error) {
	if r.OpenBao == nil {
		return nil, fmt.Errorf("this operator cannot reach OpenBao")
	}
	jwt, err := r.serviceAccountToken(ctx, namespace, login)
	if err != nil {
		return nil, err
	}
	bao, err := r.activeClient(ctx, target, tls, nil, openbao.Token{})
	if err != nil {
		return nil, err
	}
	tok, _, err := bao.Login(ctx, identity.Mount, login.Role, jwt)
	if err != nil {
		return nil, &canaryLoginError{target: target.Name, role: login.Role, err: err}
	}
	withToken, err := r.activeClient(ctx, target, tls, nil, tok)
	if err != nil {
		return nil, err
	}
	data, err := withToken.Read(ctx, identity.CanaryPath)
	if err != nil {
		return nil, fmt.Errorf("read %s from %s: %w", identity.CanaryPath, target.Name, err)
	}
	return data, nil
}

// canaryLoginError says the login before a canary read was refused.
type canaryLoginError struct {
	target, role string
	err          error
}

func (e *canaryLoginError) Error() string {
	return fmt.Sprintf("log in to %s as role %s: %v", e.target, e.role, e.err)
}
func (e *canaryLoginError) Unwrap() error { return e.err }

// serviceAccountTokenLifetime is the shortest TokenRequest allows.
const serviceAccountTokenLifetime = 10 * time.Minute

// serviceAccountToken asks the API server for a short-lived token of
// login's ServiceAccount, for login's audience only.
func (r *OpenBaoClusterReconciler) serviceAccountToken(ctx context.Context, namespace string, login identity.Login) (openbao.Token, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: login.ServiceAccount, Namespace: namespace}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         []string{login.Audience},
		ExpirationSeconds: ptr.To(int64(serviceAccountTokenLifetime / time.Second)),
	}}
	if err := r.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return openbao.Token{}, fmt.Errorf("request a token of ServiceAccount %s: %w", login.ServiceAccount, secrets.Redact(err))
	}
	return openbao.NewToken(req.Status.Token), nil
}

// userToken reads the OpenBao token of a user's tokenSecretRef (field
// names it in errors): the key the reference names, "token" by default.
// Only the Secret's and the key's names ever reach an error.
func (r *OpenBaoClusterReconciler) userToken(ctx context.Context, c *v1alpha1.OpenBaoCluster, field string, ref *v1alpha1.SecretKeyRef) (openbao.Token, error) {
	key := ref.KeyOr(v1alpha1.DefaultTokenKey)
	s, err := r.readSecret(ctx, r.APIReader, c.Namespace, ref.Name)
	if err != nil {
		return openbao.Token{}, err
	}
	if s == nil || len(s.Data[key]) == 0 {
		return openbao.Token{}, fmt.Errorf("%s: Secret %s has no key %s", field, ref.Name, key)
	}
	return openbao.NewToken(string(s.Data[key])), nil
}
