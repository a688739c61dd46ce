package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/secrets"
)

// rootTokenSteps bounds the lookup, revoke, lookup, delete sequence of one
// pass.
const rootTokenSteps = 4

// reconcileRootToken owns status.rootToken (whether a root token is
// stored, which recovery keys exist) and carries out spec.rootToken.policy
// Revoke, as bootstrap.DecideRevoke decides: look the stored token up,
// revoke it with itself, prove it dead, then delete its Secret.
func (r *OpenBaoClusterReconciler) reconcileRootToken(ctx context.Context, p *pass) error {
	c, st := p.cluster, p.status
	if !st.Initialized || st.SelfInitialized {
		return nil
	}
	secret, err := r.rootTokenSecret(ctx, p)
	if err != nil {
		return err
	}
	token := storedToken(secret)
	recovery, err := r.recoveryKeysSecret(ctx, c, !token.IsZero())
	if err != nil {
		return err
	}
	if st.RootToken == nil {
		st.RootToken = &v1alpha1.RootTokenStatus{}
	}
	shares, threshold := bootstrap.StoredRecoveryShares(recovery)
	st.RootToken.RecoveryShares, st.RootToken.RecoveryThreshold = int32(shares), int32(threshold)
	st.RootToken.Held = !token.IsZero()
	obs := bootstrap.RevokeObserved{
		Revoke: c.RootTokenPolicyOf() == v1alpha1.RootTokenRevoke, Initialized: st.Initialized,
		SelfInitialized: st.SelfInitialized, SecretExists: st.RootToken.Held, RecoveryKeysStored: shares > 0,
		// The stored status, not this pass's: an identity set up in this
		// pass whose status write is lost, with the root token revoked
		// in the same pass, could never be recorded again.
		IdentityCurrent:        identity.RecordedRevision(&c.Status) >= identity.Revision,
		SecretName:             c.RootTokenSecretName(),
		RecoveryKeysSecretName: c.RecoveryKeysSecretName(),
		RevokedRecorded:        c.Status.RootToken != nil && c.Status.RootToken.RevokedAt != nil,
	}
	switch d := bootstrap.DecideRevoke(withLogin(obs)); {
	case d.Action == bootstrap.RevokeHold:
		holdRevoke(ctx, p, d)
		return nil
	case d.Action == bootstrap.RevokeNone || !p.tls.ready || r.OpenBao == nil:
		return nil
	}
	obs.OperatorLoggedIn = r.operatorCanWork(ctx, p)
	return r.revokeRootToken(ctx, p, obs, secret, token)
}

// recoveryKeysSecret reads <cluster>-recovery-keys from the cache (the
// operator writes it with its label), and exactly when the cache has none
// and a revocation depends on it: a cache that lags the Secret written in
// this pass's sys/init must not make the revocation look refused.
func (r *OpenBaoClusterReconciler) recoveryKeysSecret(ctx context.Context, c *v1alpha1.OpenBaoCluster, tokenHeld bool) (*corev1.Secret, error) {
	s, err := r.readSecret(ctx, r.Client, c.Namespace, c.RecoveryKeysSecretName())
	if err != nil || s != nil || !tokenHeld || c.RootTokenPolicyOf() != v1alpha1.RootTokenRevoke {
		return s, err
	}
	return r.readSecret(ctx, r.APIReader, c.Namespace, c.RecoveryKeysSecretName())
}

// withLogin is obs as if the operator had logged in: the login is tried
// only when it is all the revocation waits for.
func withLogin(obs bootstrap.RevokeObserved) bootstrap.RevokeObserved {
	obs.OperatorLoggedIn, obs.Token = true, bootstrap.TokenAlive
	return obs
}

// revokeRootToken carries out DecideRevoke's actions until it holds or is
// done.
func (r *OpenBaoClusterReconciler) revokeRootToken(ctx context.Context, p *pass, obs bootstrap.RevokeObserved,
	secret *corev1.Secret, token openbao.Token) error {
	log := ctrl.LoggerFrom(ctx).WithValues("secret", p.cluster.RootTokenSecretName())
	for range rootTokenSteps {
		d := bootstrap.DecideRevoke(obs)
		switch d.Action {
		case bootstrap.RevokeLookup:
			obs.Token = r.lookUpToken(ctx, p, token)
		case bootstrap.RevokeSelf:
			log.Info("revoking the root token (spec.rootToken.policy Revoke)", "audit", true, "event_type", "openbao.root_token.revoke")
			if err := r.revokeSelf(ctx, p, token); err != nil {
				// The lookup that follows decides: an answer lost on the way
				// back may still have revoked it.
				log.Info("revoke-self did not succeed; looking the token up", "reason", err.Error())
			}
			obs.RevokeSent, obs.Token = true, r.lookUpToken(ctx, p, token)
		case bootstrap.RevokeRecord:
			if p.status.RootToken.RevokedAt == nil {
				now := metav1.NewTime(p.now)
				p.status.RootToken.RevokedAt = &now
			}
			log.Info("the root token is proven dead; its Secret goes once the revocation is recorded in status")
			p.requeueAfter(revokeRecordedRequeue)
			return nil
		case bootstrap.RevokeDeleteSecret:
			return r.deleteRevokedToken(ctx, p, secret)
		case bootstrap.RevokeHold:
			holdRevoke(ctx, p, d)
			return nil
		default:
			return nil
		}
	}
	return nil
}

// revokeRecordedRequeue is how soon the pass after the one that recorded
// the revocation comes, to delete the Secret.
const revokeRecordedRequeue = time.Second

// holdRevoke reports a revocation that waits, as Degraded when a person
// must act.
func holdRevoke(ctx context.Context, p *pass, d bootstrap.RevokeDecision) {
	if d.Degraded {
		p.degrade(d.Reason, d.Message)
	}
	ctrl.LoggerFrom(ctx).Info("the root token is not revoked yet", "reason", d.Reason, "message", d.Message)
	p.requeueAfter(bootstrap.DegradedRequeue)
}

// operatorCanWork says the credential the operator uses for rollouts (its
// own identity's login, or spec.upgrade.tokenSecretRef) answers a
// lookup-self on the active server: the cluster is unsealed and the
// operator does not need the root token.
func (r *OpenBaoClusterReconciler) operatorCanWork(ctx context.Context, p *pass) bool {
	tok, err := r.upgradeToken(ctx, p)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("the operator cannot log in with its own identity yet", "reason", err.Error())
		return false
	}
	if r.lookUpToken(ctx, p, tok) == bootstrap.TokenAlive {
		return true
	}
	r.forgetUpgradeToken(p.cluster)
	return false
}

// lookUpToken asks the active server about token with token itself: a
// 403 says it opens nothing.
func (r *OpenBaoClusterReconciler) lookUpToken(ctx context.Context, p *pass, token openbao.Token) bootstrap.TokenState {
	bao, err := r.activeClient(ctx, p.cluster, p.tls, p.servers, token)
	if err != nil {
		return bootstrap.TokenUnknown
	}
	_, err = bao.Read(ctx, "auth/token/lookup-self")
	switch {
	case err == nil:
		return bootstrap.TokenAlive
	case errors.Is(err, openbao.ErrPermissionDenied):
		return bootstrap.TokenDead
	}
	return bootstrap.TokenUnknown
}

func (r *OpenBaoClusterReconciler) revokeSelf(ctx context.Context, p *pass, token openbao.Token) error {
	bao, err := r.activeClient(ctx, p.cluster, p.tls, p.servers, token)
	if err != nil {
		return err
	}
	return bao.Write(ctx, "auth/token/revoke-self", nil)
}

// deleteRevokedToken deletes the Secret whose token was proven dead, only
// as it was read (UID and resourceVersion): a token stored there since is
// looked up again first.
func (r *OpenBaoClusterReconciler) deleteRevokedToken(ctx context.Context, p *pass, s *corev1.Secret) error {
	c := p.cluster
	uid, rv := s.UID, s.ResourceVersion
	if err := r.Client.Delete(ctx, s, client.Preconditions{UID: &uid, ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete Secret %s of the revoked root token: %w", s.Name, secrets.Redact(err))
	}
	p.rootTokenSecret = nil
	p.status.RootToken.Held = false
	msg := fmt.Sprintf("the root token was revoked, proven dead, and Secret %s deleted (spec.rootToken.policy Revoke); "+
		"to make a root token again, run bao operator generate-root with the recovery keys of Secret %s", s.Name, c.RecoveryKeysSecretName())
	ctrl.LoggerFrom(ctx).Info("the root token is revoked and its Secret deleted", "audit", true,
		"event_type", "openbao.root_token.revoked", "secret", s.Name)
	p.record(corev1.EventTypeNormal, bootstrap.ReasonRootTokenRevoked, "RevokeRootToken", msg)
	return nil
}

// rootTokenSecret reads <cluster>-root-token once per pass, exactly when
// the cache has none: a person may store a token there by hand (a
// break-glass token, or one to adopt retained data).
func (r *OpenBaoClusterReconciler) rootTokenSecret(ctx context.Context, p *pass) (*corev1.Secret, error) {
	if !p.rootTokenRead {
		s, err := r.readOwnSecret(ctx, p.cluster, p.cluster.RootTokenSecretName())
		if err != nil {
			return nil, err
		}
		p.rootTokenSecret, p.rootTokenRead = s, true
	}
	return p.rootTokenSecret, nil
}

// storedToken is the token of a root-token Secret; zero when there is none.
func storedToken(s *corev1.Secret) openbao.Token {
	if s == nil || len(s.Data[bootstrap.RootTokenDataKey]) == 0 {
		return openbao.Token{}
	}
	return openbao.NewToken(string(s.Data[bootstrap.RootTokenDataKey]))
}
