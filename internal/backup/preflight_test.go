package backup_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/day2"
)

func TestPreflight(t *testing.T) {
	running := &v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseRunning, IdentityConfigured: true}
	noIdentity := &v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseRunning}
	cases := []struct {
		name    string
		cluster *v1alpha1.OpenBaoCluster
		status  *v1alpha1.OpenBaoClusterStatus
		lock    day2.Verdict
		want    string
	}{
		{"a Running cluster with backups configured", backupCluster(), running, day2.Verdict{}, ""},
		{"no spec.backup", backupCluster(func(c *v1alpha1.OpenBaoCluster) { c.Spec.Backup = nil }), running, day2.Verdict{}, backup.ReasonBackupNotConfigured},
		{"neither role nor token starts as the role backup", backupCluster(func(c *v1alpha1.OpenBaoCluster) { c.Spec.Backup.JWTAuthRole = "" }), running, day2.Verdict{}, ""},
		{"neither role nor token waits for the operator's identity", backupCluster(func(c *v1alpha1.OpenBaoCluster) { c.Spec.Backup.JWTAuthRole = "" }), noIdentity, day2.Verdict{}, backup.ReasonIdentityPending},
		{"the JWT identity not set up yet", backupCluster(), noIdentity, day2.Verdict{}, backup.ReasonIdentityPending},
		{"a token needs no operator identity", backupCluster(func(c *v1alpha1.OpenBaoCluster) {
			c.Spec.Backup.JWTAuthRole, c.Spec.Backup.TokenSecretRef = "", &v1alpha1.SecretKeyRef{Name: "t"}
		}), noIdentity, day2.Verdict{}, ""},
		{"paused", backupCluster(func(c *v1alpha1.OpenBaoCluster) { c.Spec.Paused = true }), running, day2.Verdict{}, backup.ReasonClusterPaused},
		{"an operation in the way", backupCluster(), running, inTheWay(day2.RolloutOp()), backup.ReasonUpgradeInProgress},
		{"an operation in the way of a cluster that is not Running", backupCluster(), noIdentity, inTheWay(restoreR1), backup.ReasonRestoreInProgress},
		{"a cluster still marked Restoring after its restore ended, the lock free", backupCluster(),
			&v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseRestoring, IdentityConfigured: true}, day2.Verdict{}, ""},
		{"a cluster a restore holds waits for the restore", backupCluster(),
			&v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseRestoring, IdentityConfigured: true}, inTheWay(restoreR1), backup.ReasonRestoreInProgress},
		{"initializing", backupCluster(), &v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseInitializing, IdentityConfigured: true}, day2.Verdict{}, backup.ReasonClusterNotRunning},
		{"degraded", backupCluster(), &v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseDegraded, IdentityConfigured: true}, day2.Verdict{}, backup.ReasonClusterNotRunning},
		{"another backup running", backupCluster(), running, inTheWay(day2.Op{Ref: day2.Ref{Kind: day2.Backup, Name: "bao-1"}}), backup.ReasonBackupInProgress},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := backup.Preflight(backup.PreflightInput{Cluster: tc.cluster, Status: tc.status, Lock: tc.lock})
			if got.Reason != tc.want || got.OK != (tc.want == "") || (!got.OK && got.Message == "") || got.Wait != !tc.lock.OK() {
				t.Errorf("%+v, want reason %q", got, tc.want)
			}
		})
	}
}

var restoreR1 = day2.Op{Ref: day2.Ref{Kind: day2.Restore, Name: "r1"}}

func inTheWay(running day2.Op) day2.Verdict {
	return day2.Decide(day2.Op{Ref: day2.Ref{Kind: day2.Backup, Name: "b"}}, []day2.Op{running})
}

// TestPreflightLetsThePreUpgradeSnapshotRunWhileTheRolloutWaits: the
// rollout's phase is Upgrading while it holds every pod for its snapshot;
// that snapshot alone may start.
func TestPreflightLetsThePreUpgradeSnapshotRunWhileTheRolloutWaits(t *testing.T) {
	waiting := &v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseUpgrading, IdentityConfigured: true, Conditions: []metav1.Condition{
		{Type: v1alpha1.ConditionUpgrading, Status: metav1.ConditionTrue}}}
	o := backup.PreflightInput{Cluster: backupCluster(), Status: waiting, PreUpgrade: true}
	if got := backup.Preflight(o); !got.OK {
		t.Errorf("pre-upgrade snapshot: %+v", got)
	}
	o.PreUpgrade = false
	if got := backup.Preflight(o); got.Reason != backup.ReasonClusterNotRunning {
		t.Errorf("any other backup during the rollout: %+v", got)
	}
}
