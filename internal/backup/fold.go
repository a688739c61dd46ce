package backup

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
)

// Fold counts into a cluster's backup status the backups that finished
// after the newest one it counted, in the order they finished: a success
// records its object and clears the failures, a failure counts one more
// and records why. Each backup is counted once, so the status survives
// the backups' deletion (history limits) and repeated passes. Completion
// times have microseconds, and a cluster's backups run one at a time, so
// no two of them end at the same time.
func Fold(status v1alpha1.BackupStatus, backups []v1alpha1.OpenBaoBackup) v1alpha1.BackupStatus {
	done := make([]v1alpha1.OpenBaoBackup, 0, len(backups))
	for _, b := range backups {
		t := b.Status.CompletionTime
		if b.Status.Phase.Done() && t != nil &&
			(status.LastCompletionTime == nil || t.After(status.LastCompletionTime.Time)) {
			done = append(done, b)
		}
	}
	sort.Slice(done, func(i, j int) bool {
		ti, tj := done[i].Status.CompletionTime.Time, done[j].Status.CompletionTime.Time
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return done[i].Name < done[j].Name
	})
	for _, b := range done {
		completed := metav1.NewTime(b.Status.CompletionTime.Time)
		if b.Status.Phase == v1alpha1.BackupSucceeded {
			status.LastBackupTime = &completed
			status.LastBackupKey, status.LastBackupSize, status.LastBackupName = b.Status.Key, b.Status.Size, b.Name
			status.ConsecutiveFailures = 0
		} else {
			status.ConsecutiveFailures++
			status.LastFailureTime = &completed
			status.LastFailureReason = failureReason(b)
		}
		t := *b.Status.CompletionTime
		status.LastCompletionTime = &t
	}
	return status
}

func failureReason(b v1alpha1.OpenBaoBackup) string {
	msg := b.Status.Reason
	if b.Status.Message != "" {
		msg += ": " + b.Status.Message
	}
	return b.Name + ": " + msg
}
