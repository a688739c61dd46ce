package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openbao/operator/api/v1alpha1"
)

// backupSnapshots takes a rollout's pre-upgrade snapshot as an
// OpenBaoBackup, which the OpenBaoBackup reconciler runs like any other:
// the rollout waits for it to succeed and holds on its failure.
type backupSnapshots struct {
	client client.Client
}

var _ SnapshotTaker = backupSnapshots{}

// PreUpgradeSnapshot creates the rollout's OpenBaoBackup once and reports
// how it came out. A failed one stays, holding the rollout with its
// reason, until someone deletes it to try again.
func (s backupSnapshots) PreUpgradeSnapshot(ctx context.Context, c *v1alpha1.OpenBaoCluster, revision string) (bool, string, error) {
	if c.Spec.Backup == nil {
		return false, "needs spec.backup (a target and an identity) to take the snapshot; set it, or unset preUpgradeSnapshot", nil
	}
	b := &v1alpha1.OpenBaoBackup{}
	key := client.ObjectKey{Namespace: c.Namespace, Name: c.PreUpgradeBackupName(revision)}
	err := s.client.Get(ctx, key, b)
	if apierrors.IsNotFound(err) {
		return false, "", s.create(ctx, c, key.Name)
	}
	if err != nil {
		return false, "", fmt.Errorf("read OpenBaoBackup %s: %w", key.Name, err)
	}
	switch b.Status.Phase {
	case v1alpha1.BackupSucceeded:
		return true, "", nil
	case v1alpha1.BackupFailed:
		return false, fmt.Sprintf("OpenBaoBackup %s failed (%s): %s; delete it to take the snapshot again", b.Name, b.Status.Reason, b.Status.Message), nil
	}
	return false, "", nil
}

func (s backupSnapshots) create(ctx context.Context, c *v1alpha1.OpenBaoCluster, name string) error {
	b := &v1alpha1.OpenBaoBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: map[string]string{
			v1alpha1.LabelCluster: c.Name, v1alpha1.LabelBackupTrigger: v1alpha1.BackupTriggerPreUpgrade,
			v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		}},
		Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: c.Name},
	}
	if err := s.client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create OpenBaoBackup %s: %w", name, err)
	}
	log.FromContext(ctx).Info("pre-upgrade snapshot requested", "backup", name)
	return nil
}

// NewBackupSnapshots returns the SnapshotTaker that takes pre-upgrade
// snapshots as OpenBaoBackups through c.
func NewBackupSnapshots(c client.Client) SnapshotTaker { return backupSnapshots{client: c} }
