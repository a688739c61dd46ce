package envtest_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
)

// laggingCache plays an informer cache that has not yet seen the writes
// made since it was frozen, in its lists of OpenBaoRestores or
// OpenBaoBackups (the one set), which the preflights read; everything else
// it reads from the API server.
type laggingCache struct {
	client.Client
	restores *v1alpha1.OpenBaoRestoreList
	backups  *v1alpha1.OpenBaoBackupList
}

func (l laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	switch out := list.(type) {
	case *v1alpha1.OpenBaoRestoreList:
		if l.restores != nil {
			l.restores.DeepCopyInto(out)
			return nil
		}
	case *v1alpha1.OpenBaoBackupList:
		if l.backups != nil {
			l.backups.DeepCopyInto(out)
			return nil
		}
	}
	return l.Client.List(ctx, list, opts...)
}

func reconcileRequest(ns, name string) ctrl.Request {
	return ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}
}

// TestABackupWaitsForARestoreStartedInMemoryThatTheCacheDoesNotShowYet:
// the restore reconciler starts r1 (its status names the Job, the Job is
// created); the backup reconciler's cache still shows r1 Pending. Sharing
// the Day-2 registry, the backup waits for r1 in that window instead of
// snapshotting a store that is being replaced.
func TestABackupWaitsForARestoreStartedInMemoryThatTheCacheDoesNotShowYet(t *testing.T) {
	rig := newRestoreRig(t, "day2-restore-then-backup")
	rig.createRestore("r1", v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao", Source: v1alpha1.RestoreSource{Latest: true},
		PreRestoreSnapshot: ptr.To(false)})
	stale := &v1alpha1.OpenBaoRestoreList{}
	if err := k8s.List(context.Background(), stale, client.InNamespace(rig.ns)); err != nil || len(stale.Items) != 1 {
		t.Fatalf("restores %v, %v", stale.Items, err)
	}
	rig.reconcileRestore("r1")
	if s := rig.restore("r1").Status; s.Phase != v1alpha1.RestoreRunning || s.JobName == "" {
		t.Fatalf("r1 did not start: %+v", s)
	}

	lagging := *rig.br
	lagging.Client = laggingCache{Client: k8s, restores: stale}
	createBackup(t, rig.ns, "b1")
	if _, err := lagging.Reconcile(context.Background(), reconcileRequest(rig.ns, "b1")); err != nil {
		t.Fatal(err)
	}
	if s := rig.backup("b1").Status; s.Phase != v1alpha1.BackupPending || s.JobName != "" || s.Reason != backup.ReasonWaiting ||
		!strings.Contains(s.Message, "restore r1") {
		t.Fatalf("a backup in the cache-lag window of a restore's start: %+v", s)
	}
}

// TestARestoreWaitsForABackupStartedInMemoryThatTheCacheDoesNotShowYet is
// the other way round: the backup reconciler starts b1; the restore
// reconciler's cache still shows b1 Pending; r1 is held by b1.
func TestARestoreWaitsForABackupStartedInMemoryThatTheCacheDoesNotShowYet(t *testing.T) {
	rig := newRestoreRig(t, "day2-backup-then-restore")
	createBackup(t, rig.ns, "b1")
	stale := &v1alpha1.OpenBaoBackupList{}
	if err := k8s.List(context.Background(), stale, client.InNamespace(rig.ns)); err != nil || len(stale.Items) != 1 {
		t.Fatalf("backups %v, %v", stale.Items, err)
	}
	rig.reconcileBackup("b1")
	if s := rig.backup("b1").Status; s.Phase != v1alpha1.BackupRunning || s.JobName == "" {
		t.Fatalf("b1 did not start: %+v", s)
	}

	lagging := *rig.rr
	lagging.Client = laggingCache{Client: k8s, backups: stale}
	rig.createRestore("r1", v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao", Source: v1alpha1.RestoreSource{Latest: true},
		PreRestoreSnapshot: ptr.To(false)})
	for i := 0; i < 2; i++ { // the first pass puts the finalizer on
		if _, err := lagging.Reconcile(context.Background(), reconcileRequest(rig.ns, "r1")); err != nil {
			t.Fatal(err)
		}
	}
	if s := rig.restore("r1").Status; s.Phase != v1alpha1.RestorePending || s.JobName != "" || s.Reason != backup.ReasonBackupInProgress ||
		!strings.Contains(s.Message, "backup b1") {
		t.Fatalf("a restore in the cache-lag window of a backup's start: %+v", s)
	}
	noJob(t, client.ObjectKey{Namespace: rig.ns, Name: "restore-bao-r1"})
}
