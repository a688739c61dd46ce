package backup_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
)

func TestPreflight(t *testing.T) {
	running := &v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseRunning, IdentityConfigured: true}
	noIdentity := &v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseRunning}
	upgrading := &v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseRunning, IdentityConfigured: true, Conditions: []metav1.Condition{
		{Type: v1alpha1.ConditionUpgrading, Status: metav1.ConditionTrue}}}
	cases := []struct {
		name    string
		cluster *v1alpha1.OpenBaoCluster
		status  *v1alpha1.OpenBaoClusterStatus
		running []string
		want    string
	}{
		{"a Running cluster with backups configured", backupCluster(), running, nil, ""},
		{"no spec.backup", backupCluster(func(c *v1alpha1.OpenBaoCluster) { c.Spec.Backup = nil }), running, nil, backup.ReasonNotConfigured},
		{"no identity", backupCluster(func(c *v1alpha1.OpenBaoCluster) { c.Spec.Backup.JWTAuthRole = "" }), running, nil, backup.ReasonAuthNotConfigured},
		{"the JWT identity not set up yet", backupCluster(), noIdentity, nil, backup.ReasonIdentityPending},
		{"a token needs no operator identity", backupCluster(func(c *v1alpha1.OpenBaoCluster) {
			c.Spec.Backup.JWTAuthRole, c.Spec.Backup.TokenSecretRef = "", &v1alpha1.SecretKeyRef{Name: "t"}
		}), noIdentity, nil, ""},
		{"paused", backupCluster(func(c *v1alpha1.OpenBaoCluster) { c.Spec.Paused = true }), running, nil, backup.ReasonClusterPaused},
		{"upgrading", backupCluster(), upgrading, nil, backup.ReasonUpgradeInProgress},
		{"initializing", backupCluster(), &v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseInitializing, IdentityConfigured: true}, nil, backup.ReasonClusterNotRunning},
		{"degraded", backupCluster(), &v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseDegraded, IdentityConfigured: true}, nil, backup.ReasonClusterNotRunning},
		{"another backup running", backupCluster(), running, []string{"bao-1"}, backup.ReasonBackupInProgress},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := backup.Preflight(backup.Observed{Cluster: tc.cluster, Status: tc.status, Running: tc.running})
			if got.Reason != tc.want || got.OK != (tc.want == "") || (!got.OK && got.Message == "") {
				t.Errorf("%+v, want reason %q", got, tc.want)
			}
		})
	}
}

// TestPreflightLetsThePreUpgradeSnapshotRunWhileTheRolloutWaits: the
// rollout says Upgrading while it holds every pod for its snapshot; that
// snapshot alone may start, and only one backup at a time still holds.
func TestPreflightLetsThePreUpgradeSnapshotRunWhileTheRolloutWaits(t *testing.T) {
	waiting := &v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseUpgrading, IdentityConfigured: true, Conditions: []metav1.Condition{
		{Type: v1alpha1.ConditionUpgrading, Status: metav1.ConditionTrue}}}
	o := backup.Observed{Cluster: backupCluster(), Status: waiting, PreUpgrade: true}
	if got := backup.Preflight(o); !got.OK {
		t.Errorf("pre-upgrade snapshot: %+v", got)
	}
	o.Running = []string{"bao-1"}
	if got := backup.Preflight(o); got.Reason != backup.ReasonBackupInProgress {
		t.Errorf("pre-upgrade snapshot beside another backup: %+v", got)
	}
	o.Running, o.PreUpgrade = nil, false
	if got := backup.Preflight(o); got.Reason != backup.ReasonUpgradeInProgress {
		t.Errorf("any other backup during the rollout: %+v", got)
	}
}

func TestARestoreUnderWayHoldsABackup(t *testing.T) {
	running := &v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseRunning, IdentityConfigured: true}
	got := backup.Preflight(backup.Observed{Cluster: backupCluster(), Status: running, Restores: []string{"r1"}})
	if got.OK || got.Reason != backup.ReasonRestoreInProgress {
		t.Fatalf("a backup beside a restore: %+v", got)
	}
	got = backup.Preflight(backup.Observed{Cluster: backupCluster(), Status: running, Restores: []string{"r1"}, PreUpgrade: true})
	if got.OK {
		t.Fatalf("a pre-upgrade snapshot beside a restore: %+v", got)
	}
}
