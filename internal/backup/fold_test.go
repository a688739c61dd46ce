package backup_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
)

func done(name string, phase v1alpha1.BackupPhase, completed time.Time) v1alpha1.OpenBaoBackup {
	t := metav1.NewMicroTime(completed)
	b := v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: v1alpha1.OpenBaoBackupStatus{Phase: phase, CompletionTime: &t}}
	if phase == v1alpha1.BackupSucceeded {
		b.Status.Key, b.Status.Size = "p/ns/bao/"+name+".snap", 100
	} else {
		b.Status.Reason, b.Status.Message = "StoreFailed", "connection refused"
	}
	return b
}

func TestFoldCountsEachFinishedBackupOnceInOrder(t *testing.T) {
	base := at("2025-01-01T00:00:00Z")
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	running := v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "running"}, Status: v1alpha1.OpenBaoBackupStatus{Phase: v1alpha1.BackupRunning}}
	all := []v1alpha1.OpenBaoBackup{
		done("f3", v1alpha1.BackupFailed, ms(400)), running,
		done("s1", v1alpha1.BackupSucceeded, ms(100)),
		done("f1", v1alpha1.BackupFailed, ms(200)), done("f2", v1alpha1.BackupFailed, ms(300)),
	}
	st := backup.Fold(v1alpha1.BackupStatus{}, all)
	if st.LastBackupName != "s1" || st.ConsecutiveFailures != 3 || st.LastFailureReason != "f3: StoreFailed: connection refused" ||
		!st.LastCompletionTime.Time.Equal(ms(400)) {
		t.Fatalf("folded %+v", st)
	}
	if again := backup.Fold(st, all); again.ConsecutiveFailures != 3 {
		t.Errorf("a second fold counted again: %d failures", again.ConsecutiveFailures)
	}
	// History pruned away, one more failure, then a success: counting goes
	// on from the status, not from what is left of the history.
	st = backup.Fold(st, []v1alpha1.OpenBaoBackup{done("f4", v1alpha1.BackupFailed, ms(500))})
	if st.ConsecutiveFailures != 4 {
		t.Fatalf("after pruning: %d failures, want 4", st.ConsecutiveFailures)
	}
	st = backup.Fold(st, []v1alpha1.OpenBaoBackup{done("s2", v1alpha1.BackupSucceeded, ms(600)), done("f4", v1alpha1.BackupFailed, ms(500))})
	if st.ConsecutiveFailures != 0 || st.LastBackupKey != "p/ns/bao/s2.snap" || st.LastFailureReason == "" {
		t.Fatalf("after a success: %+v", st)
	}
}
