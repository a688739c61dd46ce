package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/openbao"
)

// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create
// +kubebuilder:rbac:urls=/.well-known/openid-configuration;/openid/v1/jwks,verbs=get

// IssuerSource reads the Kubernetes service-account issuer that OpenBao
// must trust to verify the operator's tokens.
type IssuerSource interface {
	Issuer(ctx context.Context) (identity.Issuer, error)
}

// apiIssuer reads the issuer from the API server's discovery endpoints and
// keeps it for issuerTTL: its keys change rarely, and every cluster of
// this operator shares them.
type apiIssuer struct {
	rest  rest.Interface
	clock clock.PassiveClock

	mu     sync.Mutex
	cached identity.Issuer
	at     time.Time
}

const issuerTTL = 10 * time.Minute

// NewIssuerSource reads the issuer through the API server of cfg.
func NewIssuerSource(cfg *rest.Config, clk clock.PassiveClock) (IssuerSource, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("REST client for the service-account issuer: %w", err)
	}
	return &apiIssuer{rest: dc.RESTClient(), clock: clk}, nil
}

func (a *apiIssuer) Issuer(ctx context.Context) (identity.Issuer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.at.IsZero() && a.clock.Since(a.at) < issuerTTL {
		return a.cached, nil
	}
	discovery, err := a.rest.Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil {
		return identity.Issuer{}, fmt.Errorf("read /.well-known/openid-configuration: %w", err)
	}
	jwks, err := a.rest.Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
	if err != nil {
		return identity.Issuer{}, fmt.Errorf("read /openid/v1/jwks: %w", err)
	}
	iss, err := identity.IssuerFromDiscovery(discovery, jwks)
	if err != nil {
		return identity.Issuer{}, err
	}
	a.cached, a.at = iss, a.clock.Now()
	return iss, nil
}

// reconcileIdentity sets up the operator's own identity in a cluster it
// initialized, with the stored root token, when the setup right after
// sys/init did not finish, and brings one set up by an earlier release
// (status.identityRevision) up to this release's revision the same way.
// Self-initialized clusters got it as self-init requests; one of an
// earlier release, without a root token, is told what to add by hand.
func (r *OpenBaoClusterReconciler) reconcileIdentity(ctx context.Context, p *pass) error {
	c, status := p.cluster, p.status
	if !status.Initialized || !p.tls.ready || r.OpenBao == nil || r.Issuer == nil {
		return nil
	}
	rev := identity.RecordedRevision(status)
	if rev >= identity.Revision {
		return nil
	}
	if status.SelfInitialized && rev == 0 {
		// The self-init requests were this release's.
		if status.IdentityConfigured = c.Spec.SelfInit != nil && c.Spec.SelfInit.Enabled; status.IdentityConfigured {
			status.IdentityRevision = identity.Revision
			p.setCondition(v1alpha1.ConditionIdentityCurrent, true, v1alpha1.ReasonIdentityUpToDate,
				fmt.Sprintf("revision %d, set up by self-init", identity.Revision))
		}
		return nil
	}
	// Exact when the cache has none: a break-glass token is stored by hand.
	secret, err := r.rootTokenSecret(ctx, p)
	if err != nil {
		return err
	}
	if secret == nil || len(secret.Data[bootstrap.RootTokenDataKey]) == 0 {
		// No token to set it up with: the user's upgrade auth applies, or
		// the user adds what an earlier revision lacks.
		if rev > 0 {
			r.handAddedIdentity(p, rev)
		}
		return nil
	}
	if err := r.applyIdentity(ctx, p, openbao.NewToken(string(secret.Data[bootstrap.RootTokenDataKey]))); err != nil {
		ctrl.LoggerFrom(ctx).Info("the operator's identity is not set up yet; retrying", "reason", err.Error())
		if rev > 0 {
			p.identityOutdated(fmt.Sprintf("bringing the operator's identity in OpenBao from revision %d to %d "+
				"with the stored root token failed: %s", rev, identity.Revision, err.Error()))
		}
		p.requeueAfter(autopilotRetry)
		return nil
	}
	if rev > 0 {
		p.record(corev1.EventTypeNormal, "IdentityUpdated", "UpdateIdentity", fmt.Sprintf(
			"the operator's identity in OpenBao was brought from revision %d to %d with the stored root token", rev, identity.Revision))
	}
	return nil
}

// handAddedIdentity records an identity of an earlier revision brought up
// to date by hand, as the user's annotation says, or else says what it
// lacks.
func (r *OpenBaoClusterReconciler) handAddedIdentity(p *pass, rev int32) {
	if identity.AcknowledgedRevision(p.cluster) >= identity.Revision {
		p.status.IdentityConfigured, p.status.IdentityRevision = true, identity.Revision
		p.setCondition(v1alpha1.ConditionIdentityCurrent, true, v1alpha1.ReasonIdentityUpToDate,
			fmt.Sprintf("revision %d, added by hand (annotation %s)", identity.Revision, v1alpha1.AnnotationIdentityRevision))
		return
	}
	msg := identity.OutdatedMessage(p.cluster, rev)
	if rt := p.status.RootToken; rt != nil && rt.RevokedAt != nil {
		msg = fmt.Sprintf("the root token was revoked (spec.rootToken.policy Revoke), so the operator cannot bring its identity "+
			"from revision %d to %d itself. Break glass: make a root token with bao operator generate-root and the recovery keys "+
			"of Secret %s, and store it in Secret %s under the key token; the operator applies the identity with it, then "+
			"revokes it and deletes the Secret again. Or, by hand: %s", rev, identity.Revision, p.cluster.RecoveryKeysSecretName(),
			p.cluster.RootTokenSecretName(), msg)
	}
	p.identityOutdated(msg)
}

// identityOutdated sets IdentityCurrent False; its Event is sent once,
// when the condition turns False.
func (p *pass) identityOutdated(msg string) {
	if !meta.IsStatusConditionFalse(p.status.Conditions, v1alpha1.ConditionIdentityCurrent) {
		p.record(corev1.EventTypeWarning, v1alpha1.ReasonIdentityOutdated, "CheckIdentity", msg)
	}
	p.setCondition(v1alpha1.ConditionIdentityCurrent, false, v1alpha1.ReasonIdentityOutdated, msg)
}

// applyIdentity sets the identity up with the root token and records it.
func (r *OpenBaoClusterReconciler) applyIdentity(ctx context.Context, p *pass, root openbao.Token) error {
	bao, err := r.activeClient(ctx, p.cluster, p.tls, p.servers, root)
	if err != nil {
		return err
	}
	return r.setUpIdentity(ctx, p, bao)
}

// setUpIdentity applies the identity through a client holding the root
// token: right after sys/init, or later with the stored token.
func (r *OpenBaoClusterReconciler) setUpIdentity(ctx context.Context, p *pass, withRoot openbao.Client) error {
	iss, err := r.Issuer.Issuer(ctx)
	if err != nil {
		return err
	}
	if err := identity.Apply(ctx, withRoot, p.cluster, iss); err != nil {
		return err
	}
	p.status.IdentityConfigured, p.status.IdentityRevision = true, identity.Revision
	p.setCondition(v1alpha1.ConditionIdentityCurrent, true, v1alpha1.ReasonIdentityUpToDate,
		fmt.Sprintf("revision %d, set up with the root token", identity.Revision))
	ctrl.LoggerFrom(ctx).Info("the operator's own identity is set up in OpenBao; the root token is no longer used",
		"audit", true, "event_type", "openbao.identity.configured", "mount", identity.Mount, "revision", identity.Revision)
	return nil
}

// errNoUpgradeAuth says the operator has no way to log in for rollouts.
var errNoUpgradeAuth = errors.New("the operator cannot log in to OpenBao: its own identity is not set up in this cluster " +
	"(it was not initialized by this operator); set spec.upgrade.jwtAuthRole or spec.upgrade.tokenSecretRef")
