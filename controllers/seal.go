package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/bootstrap"
)

// StaticKeyDataKey is the key of the unseal Secret that the chart mounts as
// /etc/bao/unseal/key, the file config.hcl's static seal reads.
const StaticKeyDataKey = bootstrap.UnsealKeyDataKey

// reconcileSealMaterial owns SealReady. For a static seal it creates the key
// Secret once and never rewrites it: the key wraps OpenBao's root key, so a
// new key would make the stored data unreadable. With deletionPolicy Retain
// the Secret has no owner and outlives the cluster, like the data volumes.
func (r *OpenBaoClusterReconciler) reconcileSealMaterial(ctx context.Context, c *v1alpha1.OpenBaoCluster,
	status *v1alpha1.OpenBaoClusterStatus, events *[]event) error {
	now := r.Clock.Now()
	if c.Spec.Unseal.Type != v1alpha1.UnsealStatic && c.Spec.Unseal.Type != "" {
		setCondition(status, c, now, v1alpha1.ConditionSealReady, true, v1alpha1.ReasonExternalSeal,
			fmt.Sprintf("servers unseal through %s", c.Spec.Unseal.Type))
		return nil
	}
	existing, err := r.readSecret(ctx, r.Client, c.Namespace, c.UnsealKeySecretName())
	if err != nil {
		return err
	}
	ready := fmt.Sprintf("static seal key in Secret %s", c.UnsealKeySecretName())
	switch action, problem := bootstrap.DecideUnsealKey(existing != nil, dataOf(existing)); action {
	case bootstrap.UnsealKeyDegraded:
		setCondition(status, c, now, v1alpha1.ConditionSealReady, false, v1alpha1.ReasonStaticKeyInvalid,
			fmt.Sprintf("Secret %s: %v. The operator never replaces an existing key: restore the original",
				c.UnsealKeySecretName(), problem))
		return nil
	case bootstrap.UnsealKeyCreate:
		if err := r.createStaticKey(ctx, c); err != nil {
			return err
		}
		*events = append(*events, event{"Normal", "StaticKeyCreated", "CreateSealKey",
			fmt.Sprintf("created Secret %s holding the static seal key", c.UnsealKeySecretName())})
	}
	setCondition(status, c, now, v1alpha1.ConditionSealReady, true, v1alpha1.ReasonStaticKeyReady, ready)
	return nil
}

func (r *OpenBaoClusterReconciler) createStaticKey(ctx context.Context, c *v1alpha1.OpenBaoCluster) error {
	key, err := bootstrap.NewUnsealKey(r.random())
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: c.UnsealKeySecretName(), Namespace: c.Namespace, Labels: map[string]string{
			v1alpha1.LabelCluster: c.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		}},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr.To(true),
		Data:      map[string][]byte{StaticKeyDataKey: key},
	}
	if c.Spec.DeletionPolicy == v1alpha1.DeletionPolicyDelete {
		if err := controllerutil.SetControllerReference(c, s, r.Client.Scheme()); err != nil {
			return fmt.Errorf("own Secret %s: %w", s.Name, err)
		}
	}
	if err := r.Client.Create(ctx, s); err != nil {
		return fmt.Errorf("create Secret %s: %s", s.Name, bootstrap.DescribeAPIError(err))
	}
	return nil
}
