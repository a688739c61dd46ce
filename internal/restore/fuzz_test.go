package restore_test

import (
	"testing"
	"time"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/restore"
)

// world is what a fuzzed script does around the restore: its Job, that
// Job's end and its pods, the API server's refusals.
type world struct {
	jobExists, ended, succeeded, reportRead, podsLeft bool
	deleting                                          bool
}

// FuzzAtMostOneJobPerRecordedDecision feeds Decide arbitrary sequences of
// observations (preflight verdicts, the restore deleted, the cluster gone,
// the Job created, refused, ended, deleted with or without a pod left
// behind) and holds, in every pass:
//   - a Job is asked for only once the pre-restore snapshot is stored (when
//     one is wanted), and only in the pass that records its name in status
//     (a new decision), never for a restore being deleted; hence at most one
//     Job creation per recorded decision, and a Job that went missing is
//     never created again;
//   - the restore is released (its finalizer removed, its holds lifted)
//     only once it has ended, and never while its Job, or a pod the Job
//     left, may still be posting the snapshot (unless the cluster itself
//     is gone).
func FuzzAtMostOneJobPerRecordedDecision(f *testing.F) {
	f.Add([]byte{0, 0, 0x10, 0x04, 0x40, 0, 0, 0})
	f.Add([]byte{0, 0x80, 0, 0, 0x20, 0x18, 0, 0, 0, 0})
	f.Add([]byte{3, 0, 0x04, 0x01, 0x10, 0x04, 0x40, 0, 0x20, 0x08})
	f.Add([]byte{0, 0, 0x20, 0x18, 0x04, 0x01, 0, 0})
	f.Add([]byte{0, 0, 0, 0x40, 0x20, 0x18, 0})
	f.Fuzz(func(t *testing.T, script []byte) {
		rs := newRestore(v1alpha1.OpenBaoRestoreStatus{})
		if len(script)%2 == 1 {
			rs.Spec.PreRestoreSnapshot = nil // the default: a snapshot first
		}
		w := &world{}
		decisions, created := 0, map[int]int{}
		for i := 0; i+1 < len(script); i += 2 {
			b, c := script[i], script[i+1]
			o := w.observe(rs, b, c, t0.Add(time.Duration(i)*time.Minute))
			before := rs.Status
			d := restore.Decide(o)
			after := d.Status
			if before.JobName == "" && after.JobName != "" {
				decisions++
			}
			if d.CreateJob {
				if before.JobName != "" || after.JobName == "" || o.Deleting {
					t.Fatalf("pass %d asks for a Job without recording a new decision (before %q, after %q, deleting %v)",
						i/2, before.JobName, after.JobName, o.Deleting)
				}
				if rs.WantsPreRestoreSnapshot() && after.PreRestoreKey == "" {
					t.Fatalf("pass %d asks for a Job before the pre-restore snapshot is stored", i/2)
				}
				if created[decisions]++; created[decisions] > 1 {
					t.Fatalf("decision %d created its Job twice", decisions)
				}
			}
			checkRelease(t, o, d, w)
			rs.Status = after
			if d.CreateJob {
				rs.Status = w.create(after, c)
			}
		}
	})
}

// observe changes the world by two script bytes and says what a pass sees.
func (w *world) observe(rs *v1alpha1.OpenBaoRestore, b, c byte, now time.Time) restore.Observed {
	w.deleting = w.deleting || (b&0x04 != 0 && c&0x01 != 0)
	if w.jobExists && b&0x10 != 0 { // someone deletes the Job
		w.jobExists, w.podsLeft = false, c&0x04 != 0
	}
	if w.jobExists && !w.ended && b&0x20 != 0 {
		w.ended, w.succeeded = true, c&0x08 != 0
	}
	w.reportRead = w.reportRead || (w.ended && c&0x10 != 0)
	if b&0x40 != 0 {
		w.podsLeft = false
	}
	o := restore.Observed{Now: now, Restore: rs, Cluster: runningCluster(), Deleting: w.deleting}
	switch b & 0x03 {
	case 0, 3:
		o.Preflight = restore.Check{OK: true}
	case 1:
		o.Preflight = restore.Check{Reason: backup.ReasonBackupInProgress}
	case 2:
		o.Preflight = restore.Check{Permanent: true, Reason: backup.ReasonBackupNotConfigured}
	}
	if b&0x08 != 0 && c&0x02 != 0 {
		o.Cluster = nil
	}
	if rs.Status.PreRestoreBackup != "" {
		o.PreRestore = &restore.Backup{Found: true, Ours: c&0x20 == 0, Phase: v1alpha1.BackupRunning}
		switch c & 0x60 {
		case 0x40:
			o.PreRestore.Phase, o.PreRestore.Key = v1alpha1.BackupSucceeded, "ns/bao/x.snap"
		case 0x60:
			o.PreRestore.Phase = v1alpha1.BackupFailed
		}
	}
	switch {
	case rs.Status.JobName == "":
	case rs.Status.Step == v1alpha1.RestoreStepVerifying:
		o.Servers = servers(uint64(c>>5), 0, 0)
	default:
		o.Job = w.job()
	}
	return o
}

func (w *world) job() *restore.Job {
	if !w.jobExists {
		j := &restore.Job{}
		if w.podsLeft {
			j.PodsLeft = []string{"restore-bao-r1-x1"}
		}
		return j
	}
	j := &restore.Job{Found: true, Owned: true, ReportRead: w.reportRead}
	if w.ended {
		j.Succeeded, j.Failed = w.succeeded, !w.succeeded
		if w.reportRead && w.succeeded {
			j.Report = backup.Report{Key: "ns/bao/x.snap", RaftIndex: 7}
		}
	}
	return j
}

// create carries out CreateJob: the API server refuses it (the decision is
// taken back) or a new Job starts.
func (w *world) create(s v1alpha1.OpenBaoRestoreStatus, c byte) v1alpha1.OpenBaoRestoreStatus {
	if c&0x80 != 0 {
		return restore.JobNotCreated(s, "Forbidden").Status
	}
	*w = world{jobExists: true, deleting: w.deleting}
	return s
}

func checkRelease(t *testing.T, o restore.Observed, d restore.Decision, w *world) {
	t.Helper()
	if d.Release != d.Status.Phase.Done() {
		t.Fatalf("release %v for phase %s", d.Release, d.Status.Phase)
	}
	s := o.Restore.Status
	mayPost := s.JobName != "" && s.Step == v1alpha1.RestoreStepRestoring && !s.Phase.Done() &&
		((w.jobExists && (!w.ended || !w.reportRead)) || (!w.jobExists && w.podsLeft))
	if d.Release && mayPost && o.Cluster != nil {
		t.Fatalf("released while the Job may be posting the snapshot: %+v, world %+v -> %s %s", s, *w, d.Status.Reason, d.Status.Message)
	}
}
