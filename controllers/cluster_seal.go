package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/sealkey"
	"github.com/openbao/operator/internal/secrets"
)

// reconcileSealMaterial owns SealReady. For a static seal it creates the key
// Secret once and never rewrites it: the key wraps OpenBao's root key, so a
// new key would make the stored data unreadable. With deletionPolicy Retain
// the Secret has no owner and outlives the cluster, like the data volumes.
func (r *OpenBaoClusterReconciler) reconcileSealMaterial(ctx context.Context, p *pass) error {
	c := p.cluster
	if c.Spec.Unseal.Type != v1alpha1.UnsealStatic && c.Spec.Unseal.Type != "" {
		p.setCondition(v1alpha1.ConditionSealReady, true, v1alpha1.ReasonExternalSeal,
			fmt.Sprintf("servers unseal through %s", c.Spec.Unseal.Type))
		return nil
	}
	existing, err := r.readOwnSecret(ctx, c, c.UnsealKeySecretName())
	if err != nil {
		return err
	}
	switch action, problem := sealkey.Decide(existing != nil, dataOf(existing)); {
	case action == sealkey.Degraded:
		return r.sealKeyProblem(p, v1alpha1.ReasonStaticKeyInvalid, fmt.Sprintf(
			"Secret %s: %v. The operator never uses or replaces a key of the wrong form: restore the original",
			c.UnsealKeySecretName(), problem))
	case existing != nil && !writtenByOperator(existing, c):
		return r.sealKeyProblem(p, v1alpha1.ReasonStaticKeyNotAdopted, fmt.Sprintf(
			"Secret %s exists but was not written by the operator; it is neither used nor replaced. To use it "+
				"(an existing cluster's key), label it %s=%s and %s=%s as a member of the group %s; to let the "+
				"operator create a key, delete it",
			c.UnsealKeySecretName(), v1alpha1.LabelCluster, c.Name, v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue,
			v1alpha1.BreakGlassGroup))
	case action == sealkey.Create && c.FromBackup() != nil:
		if err := r.copySourceKey(ctx, p); err != nil {
			return err
		}
	case action == sealkey.Create:
		if err := r.createStaticKey(ctx, c); err != nil {
			return err
		}
		p.record("Normal", "StaticKeyCreated", "CreateSealKey",
			fmt.Sprintf("created Secret %s holding the static seal key", c.UnsealKeySecretName()))
	}
	p.setCondition(v1alpha1.ConditionSealReady, true, v1alpha1.ReasonStaticKeyReady,
		fmt.Sprintf("static seal key in Secret %s", c.UnsealKeySecretName()))
	return nil
}

// sealKeyProblem reports a key the operator must not use: the pass stops
// before the chart is applied, so no pod mounts it.
func (r *OpenBaoClusterReconciler) sealKeyProblem(p *pass, reason, msg string) error {
	p.setCondition(v1alpha1.ConditionSealReady, false, reason, msg)
	return p.hold(reason, "CheckSealKey", msg)
}

func (r *OpenBaoClusterReconciler) createStaticKey(ctx context.Context, c *v1alpha1.OpenBaoCluster) error {
	key, err := sealkey.New(r.random())
	if err != nil {
		return err
	}
	return r.storeStaticKey(ctx, c, key)
}

// copySourceKey makes the key of the cluster whose snapshot this one
// starts from this cluster's key, before any server starts: the snapshot's
// data is sealed with it. Until the Secret named exists with a valid key,
// no server starts.
func (r *OpenBaoClusterReconciler) copySourceKey(ctx context.Context, p *pass) error {
	c := p.cluster
	ref := c.FromBackup().UnsealKeySecretRef
	name, key := ref.Name, ref.KeyOr(v1alpha1.DefaultUnsealKeyKey)
	source, err := r.readSecret(ctx, r.APIReader, c.Namespace, name)
	if err != nil {
		return err
	}
	if source == nil {
		p.requeueAfter(sourceKeyRetry)
		return r.sealKeyProblem(p, v1alpha1.ReasonSourceKeyMissing, fmt.Sprintf(
			"Secret %s named by spec.bootstrap.fromBackup.unsealKeySecretRef does not exist; no server starts until it does", name))
	}
	if err := sealkey.Validate(source.Data[key]); err != nil {
		return r.sealKeyProblem(p, v1alpha1.ReasonSourceKeyInvalid, fmt.Sprintf(
			"Secret %s named by spec.bootstrap.fromBackup.unsealKeySecretRef, key %s: %v", name, key, err))
	}
	if err := r.storeStaticKey(ctx, c, source.Data[key]); err != nil {
		return err
	}
	p.record("Normal", "StaticKeyCopied", "CreateSealKey", fmt.Sprintf(
		"created Secret %s with the static seal key of Secret %s, which seals the snapshot", c.UnsealKeySecretName(), name))
	return nil
}

// sourceKeyRetry is how soon a missing source key is looked for again.
const sourceKeyRetry = 10 * time.Second

func (r *OpenBaoClusterReconciler) storeStaticKey(ctx context.Context, c *v1alpha1.OpenBaoCluster, key []byte) error {
	return r.createSecret(ctx, secrets.New(c, secrets.Spec{
		Name: c.UnsealKeySecretName(), Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{sealkey.DataKey: key}, Lifetime: secrets.WithData, Immutable: true,
	}))
}
