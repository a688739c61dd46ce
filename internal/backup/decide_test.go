package backup_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
)

var now = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func newBackup(status v1alpha1.OpenBaoBackupStatus) *v1alpha1.OpenBaoBackup {
	return &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: "ns"},
		Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: "bao"}, Status: status}
}

func runningBackup() v1alpha1.OpenBaoBackupStatus {
	start := metav1.NewTime(now.Add(-time.Minute))
	return v1alpha1.OpenBaoBackupStatus{Phase: v1alpha1.BackupRunning, JobName: "backup-bao-x", StartTime: &start}
}

func ended(succeeded bool, report backup.Report) *backup.Job {
	return &backup.Job{Found: true, Owned: true, Succeeded: succeeded, Failed: !succeeded, Report: report, ReportRead: true}
}

var storedKey = backup.ObjectKey(backup.ObjectPrefix("prod", "ns", "bao"), now, "00000001")

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name  string
		o     backup.Observed
		check func(*testing.T, backup.Decision)
	}{
		{"a backup of a cluster that does not exist fails", backup.Observed{Backup: newBackup(v1alpha1.OpenBaoBackupStatus{})},
			ended_(v1alpha1.BackupFailed, backup.ReasonClusterNotFound)},
		{"a refusal fails a backup that has not started, before the preflight", backup.Observed{Backup: newBackup(v1alpha1.OpenBaoBackupStatus{}),
			Cluster: backupCluster(), Refusals: []backup.Refusal{{Reason: "ManagedSecretReferenced", Message: "no"}},
			Preflight: backup.Check{Wait: true, Reason: backup.ReasonRestoreInProgress}},
			ended_(v1alpha1.BackupFailed, "ManagedSecretReferenced")},
		{"an operation in the way holds it Pending and looks again", backup.Observed{Backup: newBackup(v1alpha1.OpenBaoBackupStatus{}),
			Cluster: backupCluster(), Preflight: backup.Check{Wait: true, Reason: backup.ReasonRestoreInProgress, Message: "restore r1 ..."}},
			func(t *testing.T, d backup.Decision) {
				if s := d.Status; s.Phase != v1alpha1.BackupPending || s.Reason != backup.ReasonWaiting || s.Message != "restore r1 ..." ||
					d.Start || d.CreateJob || d.Ended || d.Requeue != backup.WaitRetry {
					t.Fatalf("%+v", d)
				}
			}},
		{"a preflight that waiting cannot fix fails it", backup.Observed{Backup: newBackup(v1alpha1.OpenBaoBackupStatus{}),
			Cluster: backupCluster(), Preflight: backup.Check{Reason: backup.ReasonClusterNotRunning, Message: "the cluster is Degraded"}},
			ended_(v1alpha1.BackupFailed, backup.ReasonClusterNotRunning)},
		{"a passed preflight records the Job's name, then asks for it", backup.Observed{Now: now, Backup: newBackup(v1alpha1.OpenBaoBackupStatus{}),
			Cluster: backupCluster(), Preflight: backup.Check{OK: true}},
			func(t *testing.T, d backup.Decision) {
				s := d.Status
				if s.Phase != v1alpha1.BackupRunning || s.JobName != backupCluster().BackupJobName(now) || !s.StartTime.Time.Equal(now) ||
					s.Reason != backup.ReasonJobCreated || !d.Start || !d.CreateJob || d.Ended {
					t.Fatalf("%+v", d)
				}
			}},
		{"a started backup whose Job is missing creates it again: it only reads the cluster", backup.Observed{
			Backup: newBackup(runningBackup()), Cluster: backupCluster(), Job: &backup.Job{}},
			func(t *testing.T, d backup.Decision) {
				if !d.CreateJob || d.Start || d.Ended || d.Status.Phase != v1alpha1.BackupRunning {
					t.Fatalf("%+v", d)
				}
			}},
		{"a Job of its name that is not its own fails it", backup.Observed{Backup: newBackup(runningBackup()), Cluster: backupCluster(),
			Job: &backup.Job{Found: true}}, ended_(v1alpha1.BackupFailed, backup.ReasonJobNameTaken)},
		{"a Job under way changes nothing", backup.Observed{Backup: newBackup(runningBackup()), Cluster: backupCluster(),
			Job: &backup.Job{Found: true, Owned: true}}, func(t *testing.T, d backup.Decision) {
			if d.Ended || d.CreateJob || d.Requeue != 0 || d.Status.Phase != v1alpha1.BackupRunning {
				t.Fatalf("%+v", d)
			}
		}},
		{"a Job that ended before its pod's report is seen looks again soon", backup.Observed{Backup: newBackup(runningBackup()),
			Cluster: backupCluster(), Job: &backup.Job{Found: true, Owned: true, Succeeded: true}}, func(t *testing.T, d backup.Decision) {
			if d.Ended || d.Requeue != backup.ReportRetry {
				t.Fatalf("%+v", d)
			}
		}},
		{"a stored snapshot succeeds with its key and asks for the retention", backup.Observed{Now: now, Backup: newBackup(runningBackup()),
			Cluster: backupCluster(), Job: ended(true, backup.Report{Key: storedKey, Size: 8, SHA256: "ab", RaftIndex: 42, Duration: "3s", Canary: "t"})},
			func(t *testing.T, d backup.Decision) {
				s := d.Status
				if s.Phase != v1alpha1.BackupSucceeded || s.Reason != backup.ReasonSnapshotStored || s.Key != storedKey || s.Size != 8 ||
					s.Duration.Duration != 3*time.Second || s.Canary != "t" || !d.ApplyRetention || !d.Ended || s.CompletionTime == nil ||
					s.Message != "stored and verified 8 bytes at Raft index 42" {
					t.Fatalf("%+v", d)
				}
			}},
		{"a success that says why the canary is missing says so", backup.Observed{Backup: newBackup(runningBackup()), Cluster: backupCluster(),
			Job: ended(true, backup.Report{Key: storedKey, CanaryError: "permission denied"})}, func(t *testing.T, d backup.Decision) {
			if !strings.HasSuffix(d.Status.Message, "; no canary: permission denied") {
				t.Fatalf("%+v", d)
			}
		}},
		{"a key outside the cluster's prefix is an invalid report, and nothing is retained", backup.Observed{Backup: newBackup(runningBackup()),
			Cluster: backupCluster(), Job: ended(true, backup.Report{Key: "other/bao/x.snap"})}, func(t *testing.T, d backup.Decision) {
			if d.Status.Phase != v1alpha1.BackupFailed || d.Status.Reason != backup.ReasonReportInvalid || d.ApplyRetention {
				t.Fatalf("%+v", d)
			}
		}},
		{"a Job that exited 0 with a failed report fails with its reason", backup.Observed{Backup: newBackup(runningBackup()),
			Cluster: backupCluster(), Job: ended(true, backup.Report{Reason: "UploadFailed", Error: "503"})},
			ended_(v1alpha1.BackupFailed, "UploadFailed")},
		{"a failed Job with the executor's report fails with its reason and duration", backup.Observed{Backup: newBackup(runningBackup()),
			Cluster: backupCluster(), Job: ended(false, backup.Report{Reason: "SnapshotFailed", Error: "sealed", Duration: "2s"})},
			func(t *testing.T, d backup.Decision) {
				if d.Status.Reason != "SnapshotFailed" || d.Status.Message != "sealed" || d.Status.Duration.Duration != 2*time.Second || !d.Ended {
					t.Fatalf("%+v", d)
				}
			}},
		{"a failed Job without a report fails with the Job's own reason", backup.Observed{Backup: newBackup(runningBackup()),
			Cluster: backupCluster(), Job: &backup.Job{Found: true, Owned: true, Failed: true, ReportRead: true,
				FailureMessage: "DeadlineExceeded: too long"}},
			func(t *testing.T, d backup.Decision) {
				if d.Status.Reason != backup.ReasonJobFailed || d.Status.Duration != nil ||
					d.Status.Message != "the Job failed without a report from the executor: DeadlineExceeded: too long" {
					t.Fatalf("%+v", d)
				}
			}},
		{"a backup that ended is left as it is", backup.Observed{Backup: newBackup(v1alpha1.OpenBaoBackupStatus{Phase: v1alpha1.BackupSucceeded})},
			func(t *testing.T, d backup.Decision) {
				if d.Ended || d.Start || d.CreateJob || d.Status.Phase != v1alpha1.BackupSucceeded {
					t.Fatalf("%+v", d)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.o.Backup.DeepCopy()
			tc.check(t, backup.Decide(tc.o))
			if tc.o.Backup.Status.Phase != before.Status.Phase || tc.o.Backup.Status.JobName != before.Status.JobName {
				t.Fatal("Decide changed the observed backup")
			}
		})
	}
}

// ended_ checks a decision that ends the backup with phase and reason.
func ended_(phase v1alpha1.BackupPhase, reason string) func(*testing.T, backup.Decision) {
	return func(t *testing.T, d backup.Decision) {
		t.Helper()
		s := d.Status
		if s.Phase != phase || s.Reason != reason || s.CompletionTime == nil || !d.Ended || d.Start || d.CreateJob || d.Requeue != 0 {
			t.Fatalf("%+v, want %s %s", d, phase, reason)
		}
	}
}
