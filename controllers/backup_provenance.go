package controllers

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/secrets"
)

// ReasonProvenanceKeyNotAdopted: a Secret of the provenance key's name
// exists that the operator did not write; it is neither used nor replaced.
const ReasonProvenanceKeyNotAdopted = "ProvenanceKeyNotAdopted"

// errForeignProvenanceKey says the provenance Secret's name is taken.
type errForeignProvenanceKey struct{ name string }

func (e errForeignProvenanceKey) Error() string {
	return fmt.Sprintf("Secret %s exists but was not written by the operator; it is neither used nor replaced as the key "+
		"that signs this cluster's snapshot names. Delete it to let the operator create one, or label it %s=<cluster> and %s=%s "+
		"if it is the key of an earlier cluster of this name", e.name, v1alpha1.LabelCluster, v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue)
}

// ensureProvenanceKey creates the cluster's provenance key Secret once,
// before its first backup Job, and never rewrites it: the names already
// signed would stop being proven. It has no owner (secrets.WithData), so a
// cluster recovered under the same name proves its predecessor's
// snapshots; deletionPolicy DeleteAll deletes it.
func (r *OpenBaoBackupReconciler) ensureProvenanceKey(ctx context.Context, c *v1alpha1.OpenBaoCluster) error {
	name := c.BackupProvenanceSecretName()
	existing := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, existing)
	switch {
	case err == nil && writtenByOperator(existing, c):
		return nil
	case err == nil:
		return errForeignProvenanceKey{name: name}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read Secret %s: %w", name, secrets.Redact(err))
	}
	random := r.Random
	if random == nil {
		random = rand.Reader
	}
	key, err := backup.NewProvenanceKey(random)
	if err != nil {
		return err
	}
	s := secrets.New(c, secrets.Spec{Name: name, Data: map[string][]byte{backup.ProvenanceDataKey: key},
		Lifetime: secrets.WithData, Immutable: true})
	if err := r.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Secret %s: %w", name, secrets.Redact(err))
	}
	return nil
}

// prover reads the cluster's provenance key for the operator's own
// retention: without it no name is proven, and nothing is deleted.
func (r *OpenBaoBackupReconciler) prover(ctx context.Context, c *v1alpha1.OpenBaoCluster) (backup.Prover, error) {
	s, err := r.readSecret(ctx, c.Namespace, c.BackupProvenanceSecretName())
	if err != nil {
		return backup.Prover{}, err
	}
	if !writtenByOperator(s, c) {
		return backup.Prover{}, errForeignProvenanceKey{name: s.Name}
	}
	return backup.NewProver(s.Data[backup.ProvenanceDataKey], c.Namespace, c.Name), nil
}
