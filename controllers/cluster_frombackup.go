package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/restore"
)

// +kubebuilder:rbac:groups=openbao.org,resources=openbaorestores,verbs=create

// reconcileFromBackup owns RestoredFromBackup: it forms a cluster of
// spec.bootstrap.fromBackup from its snapshot through an OpenBaoRestore
// (restore.DecideBootstrap), and does what the restore cannot: voids the
// empty initialization's root token and binds the restored identity.
func (r *OpenBaoClusterReconciler) reconcileFromBackup(ctx context.Context, p *pass) error {
	c := p.cluster
	if c.FromBackup() == nil {
		return nil
	}
	o := restore.BootstrapObserved{Cluster: c, Initialized: p.status.Initialized, Status: p.status.FromBackup, Now: metav1.NewTime(p.now)}
	if p.status.Initialized {
		rs := &v1alpha1.OpenBaoRestore{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.FromBackupRestoreName()}, rs)
		switch {
		case err == nil && !metav1.IsControlledBy(rs, c):
			o.RestoreOfAnother = true
		case err == nil:
			o.Restore = rs
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("read OpenBaoRestore %s: %w", c.FromBackupRestoreName(), err)
		}
	}
	d := restore.DecideBootstrap(o)
	if err := r.carryOutBootstrap(ctx, p, &d); err != nil {
		return err
	}
	p.status.FromBackup = d.Status
	if d.Reason != "" {
		p.setCondition(v1alpha1.ConditionRestoredFromBackup, d.Value, d.Reason, d.Message)
	}
	if d.Degraded {
		p.degrade(d.Reason, d.Message)
	}
	if d.Reason != "" && !d.Value && !d.Degraded {
		p.requeueAfter(restore.VerifyPoll)
	}
	return nil
}

func (r *OpenBaoClusterReconciler) carryOutBootstrap(ctx context.Context, p *pass, d *restore.BootstrapDecision) error {
	c := p.cluster
	if d.CreateRestore {
		err := r.Client.Create(ctx, restore.BootstrapRestoreFor(c))
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create OpenBaoRestore %s: %w", c.FromBackupRestoreName(), err)
		}
		if err == nil {
			p.record("Normal", restore.ReasonBootstrapRestoreCreated, "CreateRestore", d.Message)
		}
	}
	if d.VoidRootToken {
		if err := r.voidRootToken(ctx, p); err != nil {
			return err
		}
	}
	if d.BindIdentity {
		if err := r.bindRestoredIdentity(ctx, p); err != nil {
			ctrl.LoggerFrom(ctx).Info("the restored identity is not bound to this cluster yet; retrying", "reason", err.Error())
			d.Message += ": " + err.Error()
			return nil
		}
		d.Status.IdentityBound = true
		r.forgetUpgradeToken(c)
	}
	return nil
}

// voidRootToken deletes the root-token Secret this operator wrote when it
// initialized the cluster: the restore replaced OpenBao's token store, so
// the token opens nothing, and a Secret that seems to hold a root token
// would mislead. The restored data's root token is the source cluster's.
func (r *OpenBaoClusterReconciler) voidRootToken(ctx context.Context, p *pass) error {
	c := p.cluster
	s, err := r.rootTokenSecret(ctx, p)
	if err != nil || s == nil || !writtenByOperator(s, c) {
		return err
	}
	if err := r.deleteSecret(ctx, s); err != nil {
		return err
	}
	p.rootTokenSecret = nil // the pass's later steps must not see it held
	ctrl.LoggerFrom(ctx).Info("deleted the root token of the cluster's own initialization: the restored snapshot replaced it",
		"audit", true, "event_type", "openbao.restore.root_token_voided", "secret", s.Name)
	p.record("Normal", "RootTokenVoided", "Restore", fmt.Sprintf(
		"deleted Secret %s: its root token was issued by the empty data the snapshot replaced; the restored data's root token is the source cluster's", s.Name))
	return nil
}

// bindRestoredIdentity rewrites the operator's identity in the restored
// data (bound to the source cluster) for this cluster, with the token of
// spec.bootstrap.fromBackup.tokenSecretRef: the same idempotent requests
// as at initialization.
func (r *OpenBaoClusterReconciler) bindRestoredIdentity(ctx context.Context, p *pass) error {
	c := p.cluster
	ref := c.FromBackup().TokenSecretRef
	token, err := r.userToken(ctx, c, "spec.bootstrap.fromBackup.tokenSecretRef", ref)
	if err != nil {
		return err
	}
	if r.Issuer == nil {
		return fmt.Errorf("this operator cannot read the service-account issuer")
	}
	iss, err := r.Issuer.Issuer(ctx)
	if err != nil {
		return err
	}
	bao, err := r.activeClient(ctx, c, p.tls, p.servers, token)
	if err != nil {
		return err
	}
	if err := identity.Apply(ctx, bao, c, iss); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("bound the operator's identity in the restored data to this cluster", "audit", true,
		"event_type", "openbao.restore.identity_bound", "source", c.FromBackup().SourceClusterName(c.Name), "tokenSecret", ref.Name)
	p.record("Normal", restore.ReasonBindingIdentity, "BindIdentity", fmt.Sprintf(
		"bound the operator's identity in the restored data to this cluster with the token of Secret %s", ref.Name))
	return nil
}
