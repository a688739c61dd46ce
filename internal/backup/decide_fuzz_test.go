package backup_test

import (
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
)

// FuzzDecide: whatever is observed, a Job is asked for only under the
// name the status records, a start only for a backup that had none and
// passed every check, retention only after a stored snapshot under the
// cluster's own prefix, and a backup that ended never changes.
func FuzzDecide(f *testing.F) {
	f.Add(uint16(0), "", "")
	f.Add(uint16(0b1111_0000_0011), storedKey, "UploadFailed")
	f.Fuzz(func(t *testing.T, bits uint16, key, reason string) {
		bit := func(i int) bool { return bits&(1<<i) != 0 }
		status := v1alpha1.OpenBaoBackupStatus{}
		switch {
		case bit(0) && bit(1):
			status.Phase = v1alpha1.BackupSucceeded
		case bit(0):
			status = runningBackup()
		}
		o := backup.Observed{Now: now, Backup: newBackup(status), Preflight: backup.Check{OK: bit(3), Wait: bit(4), Reason: reason}}
		if !bit(2) {
			o.Cluster = backupCluster()
		}
		if bit(5) {
			o.Refusals = []backup.Refusal{{Reason: "Refused"}}
		}
		if bit(6) {
			o.Job = &backup.Job{Found: bit(7), Owned: bit(8), Succeeded: bit(9), Failed: bit(10), ReportRead: bit(11),
				Report: backup.Report{Key: key, Reason: reason, Duration: "1s"}}
		}
		d := backup.Decide(o)
		s := d.Status
		if status.Phase.Done() && (d.Ended || d.Start || d.CreateJob || d.ApplyRetention || s.Phase != status.Phase) {
			t.Fatalf("a backup that ended changed: %+v", d)
		}
		if d.CreateJob && (s.JobName == "" || s.Phase != v1alpha1.BackupRunning) {
			t.Fatalf("a Job asked for without its name recorded: %+v", d)
		}
		if d.Start && (status.JobName != "" || !o.Preflight.OK || len(o.Refusals) > 0 || o.Cluster == nil || !d.CreateJob) {
			t.Fatalf("a start without every check passed: %+v", d)
		}
		if d.ApplyRetention && (s.Phase != v1alpha1.BackupSucceeded || !strings.HasPrefix(s.Key, backup.ObjectPrefix("prod", "ns", "bao")+"/")) {
			t.Fatalf("retention after %+v", s)
		}
		if d.Ended != (s.Phase.Done() && !status.Phase.Done()) || (d.Ended && (s.CompletionTime == nil || d.CreateJob)) {
			t.Fatalf("ended %v with status %+v", d.Ended, s)
		}
		if d.Requeue < 0 || d.Requeue > time.Minute {
			t.Fatalf("requeue %s", d.Requeue)
		}
	})
}
