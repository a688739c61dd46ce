package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/secrets"
)

// readSecret returns the Secret, or nil when it does not exist.
func (r *OpenBaoClusterReconciler) readSecret(ctx context.Context, reader client.Reader, namespace, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s: %w", name, err)
	}
	return s, nil
}

// readOwnSecret reads a Secret of a name the operator writes: from the
// cache, which holds only Secrets with the operator's label, and exactly
// when the cache has none, since a person may have created one by hand.
func (r *OpenBaoClusterReconciler) readOwnSecret(ctx context.Context, c *v1alpha1.OpenBaoCluster, name string) (*corev1.Secret, error) {
	s, err := r.readSecret(ctx, r.Client, c.Namespace, name)
	if err != nil || s != nil {
		return s, err
	}
	return r.readSecret(ctx, r.APIReader, c.Namespace, name)
}

// createSecret creates a Secret built by package secrets. Its error names
// the API status only.
func (r *OpenBaoClusterReconciler) createSecret(ctx context.Context, s *corev1.Secret) error {
	if err := r.Client.Create(ctx, s); err != nil {
		return fmt.Errorf("create Secret %s: %w", s.Name, secrets.Redact(err))
	}
	return nil
}

// replaceSecretData replaces the data of an existing Secret in one update
// guarded by its resourceVersion, so readers see the old or the new data,
// never a mix.
func (r *OpenBaoClusterReconciler) replaceSecretData(ctx context.Context, existing *corev1.Secret, data map[string][]byte) error {
	existing.Data = data
	if err := r.Client.Update(ctx, existing); err != nil {
		return fmt.Errorf("update Secret %s: %w", existing.Name, secrets.Redact(err))
	}
	return nil
}

// deleteSecret deletes a Secret; one already gone counts as deleted.
func (r *OpenBaoClusterReconciler) deleteSecret(ctx context.Context, s *corev1.Secret) error {
	if err := r.Client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete Secret %s: %w", s.Name, secrets.Redact(err))
	}
	return nil
}

func dataOf(s *corev1.Secret) map[string][]byte {
	if s == nil {
		return nil
	}
	return s.Data
}
