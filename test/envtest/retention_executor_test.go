package envtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/objectstore"
)

// TestWithoutCredentialsTheBackupJobAppliesTheRetention: a target that
// names no credentialsSecretRef (the store is reached by a pod's own cloud
// identity) never has the operator open it, since the operator's identity
// is not the tenant's: the Job's executor is told the retention, and the
// operator audits what the executor reports it deleted. A report without
// retention (an older executor image) leaves a warning, and still the
// operator opens nothing.
func TestWithoutCredentialsTheBackupJobAppliesTheRetention(t *testing.T) {
	rig := newBackupRig(t, "backup-retention-executor", `
tokenSecretRef: {name: backup-token}
target: {endpoint: "https://s3.example.com", bucket: backups}
retention: {maxCount: 2}
`, at("2025-02-01T08:00:00Z"))
	var opened []objectstore.Config
	rig.br.NewStore = func(_ context.Context, cfg objectstore.Config) (objectstore.Store, error) {
		opened = append(opened, cfg)
		return rig.store, nil
	}
	prefix := backup.ObjectPrefix("", rig.ns, "bao")
	old := []string{
		backup.ObjectKey(prefix, rig.clock.Now().Add(-3*time.Hour), "00000003"),
		backup.ObjectKey(prefix, rig.clock.Now().Add(-2*time.Hour), "00000002"),
	}
	for _, k := range old {
		rig.store.Add(k, []byte("old"), rig.clock.Now())
	}

	job := startedJob(t, rig, "manual-1")
	if args := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--retention-max-count=2") {
		t.Fatalf("the executor is not told the retention: %s", args)
	}
	key := backup.ObjectKey(prefix, rig.clock.Now(), "abcdef01")
	endJob(t, job, 0, backup.Report{Key: key, Size: 8, SHA256: strings.Repeat("ab", 32), Duration: "3s",
		Retention: &backup.RetentionReport{Deleted: old[:1], DeletedCount: 1}})
	rig.reconcileBackup("manual-1")
	s := rig.backup("manual-1").Status
	if s.Phase != v1alpha1.BackupSucceeded || !strings.Contains(s.Message, "applied by the backup Job, as its executor reports) deleted 1 old snapshots") {
		t.Fatalf("status %+v", s)
	}
	if events := rig.drainEvents(); !strings.Contains(events, "RetentionApplied") || !strings.Contains(events, old[0]) {
		t.Errorf("events %s", events)
	}

	rig.clock.Step(time.Minute)
	job = startedJob(t, rig, "manual-2")
	endJob(t, job, 0, backup.Report{Key: backup.ObjectKey(prefix, rig.clock.Now(), "abcdef02"), Size: 8, SHA256: strings.Repeat("cd", 32)})
	rig.reconcileBackup("manual-2")
	if s := rig.backup("manual-2").Status; s.Phase != v1alpha1.BackupSucceeded || !strings.Contains(s.Message, "the executor reported no retention") {
		t.Fatalf("status %+v", s)
	}
	if events := rig.drainEvents(); !strings.Contains(events, "RetentionNotReported") {
		t.Errorf("events %s", events)
	}
	if len(opened) != 0 || len(rig.store.Deleted) != 0 {
		t.Errorf("the operator opened the store %d times (%+v) and deleted %v", len(opened), opened, rig.store.Deleted)
	}
}

// startedJob creates an on-demand backup, runs its first pass and returns
// its Job.
func startedJob(t *testing.T, rig *backupRig, name string) *batchv1.Job {
	t.Helper()
	createBackup(t, rig.ns, name)
	rig.reconcileBackup(name)
	b := rig.backup(name)
	job := &batchv1.Job{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: rig.ns, Name: b.Status.JobName}, job); err != nil {
		t.Fatalf("backup %s started no Job: %v (%+v)", name, err, b.Status)
	}
	return job
}
