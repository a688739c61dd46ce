package envtest_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
)

// TestARolloutWaitsForItsPreUpgradeSnapshot: with preUpgradeSnapshot, a
// due rollout first asks for an OpenBaoBackup and moves no pod until it
// has succeeded; a failed one holds the rollout with its reason until it
// is deleted, and the snapshot taken anew lets the rollout start.
func TestARolloutWaitsForItsPreUpgradeSnapshot(t *testing.T) {
	ro := newRollout(t, "preupgrade", 3)
	ro.r.(*controllers.OpenBaoClusterReconciler).PreUpgradeSnapshot = controllers.NewBackupSnapshots(k8s)
	c := ro.cluster()
	c.Spec.Upgrade.PreUpgradeSnapshot = true
	c.Spec.Backup = &v1alpha1.BackupSpec{JWTAuthRole: "backup",
		Target: v1alpha1.BackupTarget{Endpoint: "https://s3.example.com", Bucket: "snapshots"}}
	if err := k8s.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	ro.pass()
	ro.setVersion("2.4.1")
	ro.pass()
	ro.kubeControllerManager()
	ro.pass()
	ro.expect("waiting for the snapshot", 3, "-")
	name := ro.cluster().PreUpgradeBackupName("rev-2.4.1")
	b := ro.backup(name)
	if b.Labels[v1alpha1.LabelBackupTrigger] != v1alpha1.BackupTriggerPreUpgrade || b.Spec.ClusterName != "bao" {
		t.Fatalf("pre-upgrade backup %+v", b.ObjectMeta)
	}

	ro.finishBackup(b, v1alpha1.BackupFailed, "StoreFailed", "the store refused the upload")
	ro.pass()
	ro.expect("a failed snapshot holds the rollout", 3, "-")
	cond := meta.FindStatusCondition(ro.cluster().Status.Conditions, v1alpha1.ConditionUpgrading)
	if cond == nil || cond.Reason != v1alpha1.ReasonPreflightFailed || !strings.Contains(cond.Message, name) {
		t.Fatalf("Upgrading %+v, want PreflightFailed naming %s", cond, name)
	}

	if err := k8s.Delete(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	ro.pass() // asks for the snapshot again
	ro.finishBackup(ro.backup(name), v1alpha1.BackupSucceeded, "Succeeded", "stored")
	ro.pass()
	ro.expect("rollout started after the snapshot", 2, "PodReady")
}

func (ro *rollout) backup(name string) *v1alpha1.OpenBaoBackup {
	ro.t.Helper()
	b := &v1alpha1.OpenBaoBackup{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ro.ns, Name: name}, b); err != nil {
		ro.t.Fatalf("OpenBaoBackup %s: %v", name, err)
	}
	return b
}

// finishBackup plays the OpenBaoBackup reconciler's last word.
func (ro *rollout) finishBackup(b *v1alpha1.OpenBaoBackup, phase v1alpha1.BackupPhase, reason, message string) {
	ro.t.Helper()
	b.Status.Phase, b.Status.Reason, b.Status.Message = phase, reason, message
	if err := k8s.Status().Update(context.Background(), b); err != nil {
		ro.t.Fatal(err)
	}
}
