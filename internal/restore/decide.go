package restore

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
)

// Reasons of an OpenBaoRestore, besides the preflight's and the
// executor's.
const (
	ReasonWaiting              = "Waiting"
	ReasonClusterNotFound      = "ClusterNotFound"
	ReasonJobCreated           = "JobCreated"
	ReasonJobNameTaken         = "JobNameTaken"
	ReasonJobFailed            = "JobFailed"
	ReasonReportInvalid        = "ReportInvalid"
	ReasonSnapshotInstalled    = "SnapshotInstalled"
	ReasonRestartingServers    = "RestartingServers"
	ReasonVerificationTimedOut = "VerificationTimedOut"
	ReasonRestored             = "Restored"
	// ReasonAwaitingOutcome: the OpenBaoRestore was deleted while its Job
	// may be posting the snapshot; it stays, holding the cluster, until
	// the Job has ended.
	ReasonAwaitingOutcome = "AwaitingOutcome"
	// ReasonDeleted: the OpenBaoRestore was deleted and the outcome of its
	// restore is known; it goes once that is recorded.
	ReasonDeleted = "Deleted"
	// ReasonOutcomeUnknown: the Job that was to post the snapshot is gone
	// and its end was never seen.
	ReasonOutcomeUnknown = "OutcomeUnknown"
	// ReasonJobNotCreated: the API server refused the Job; nothing was
	// started, and the restore decides afresh.
	ReasonJobNotCreated = "JobNotCreated"
	// ReasonTakingPreRestoreSnapshot: the pre-restore snapshot is being taken.
	ReasonTakingPreRestoreSnapshot = "TakingPreRestoreSnapshot"
	// ReasonPreRestoreSnapshotFailed: the pre-restore snapshot failed; nothing was
	// posted.
	ReasonPreRestoreSnapshotFailed = "PreRestoreSnapshotFailed"
	// ReasonBackupNameTaken: an OpenBaoBackup of the pre-restore
	// snapshot's name is not this restore's.
	ReasonBackupNameTaken = "BackupNameTaken"
)

// Timings of the state machine.
const (
	// HoldRetry is how soon a held restore looks again.
	HoldRetry = 10 * time.Second
	// VerifyPoll is how often the servers are checked after the restore,
	// from RestartGrace on; before it, every VerifyPollEarly: the servers
	// usually serve the restored data within seconds of the install, and
	// a 5 s poll added up to 5 s to every restore.
	VerifyPoll      = 5 * time.Second
	VerifyPollEarly = time.Second
	// RestartGrace is how long after the snapshot was installed a server
	// may trail the leader before it is restarted: followers receive the
	// restored state by InstallSnapshot, which takes a moment.
	RestartGrace = 20 * time.Second
	// VerifyTimeout bounds the wait for every server to serve the
	// restored data.
	VerifyTimeout = 10 * time.Minute
)

// Job is what was observed of the restore's Job.
type Job struct {
	// Found says it exists; Owned that the restore controls it.
	Found, Owned bool
	// Succeeded or Failed once it ended; then Report is the executor's,
	// ReportRead false while the pod's end has not been seen yet.
	Succeeded, Failed bool
	Report            backup.Report
	ReportRead        bool
	// FailureMessage is the Job's own reason for failing.
	FailureMessage string
	// PodsLeft names, when the Job is not Found, the pods it left that have
	// not ended: one may still be posting the snapshot.
	PodsLeft []string
}

// Backup is what was observed of the restore's pre-restore OpenBaoBackup.
type Backup struct {
	// Found says it exists; Ours that it is this restore's (its labels
	// name the restore and the cluster).
	Found, Ours bool
	Phase       v1alpha1.BackupPhase
	// Key is the stored snapshot's; Reason and Message say why it failed.
	Key, Reason, Message string
}

// Server is what one server pod says after the snapshot was installed.
type Server struct {
	Pod string
	// Answered says sys/health answered; then Initialized and Sealed.
	Answered, Initialized, Sealed bool
	// Ready is the pod's readiness: a server stalled by installing a large
	// snapshot fails its probe and leaves the Services until it is back.
	Ready bool
	// Lag is what it has not applied of the leader's committed index,
	// measured after the restore (openbao.RaftLagTo); LagKnown false when
	// it could not be measured.
	Lag      uint64
	LagKnown bool
}

// Servers is the cluster's state after the snapshot was installed.
type Servers struct {
	// Replicas is how many servers the cluster runs.
	Replicas int
	Servers  []Server
	// AutopilotHealthy is the leader's autopilot verdict; Problem says
	// why the state could not be read.
	AutopilotHealthy bool
	Problem          string
}

// Observed is everything Decide looks at.
type Observed struct {
	Now     time.Time
	Restore *v1alpha1.OpenBaoRestore
	// Cluster is nil when it does not exist.
	Cluster *v1alpha1.OpenBaoCluster
	// Preflight is the verdict for a restore that has not started.
	Preflight Check
	// PreRestore is the pre-restore OpenBaoBackup, read while the restore
	// has not started and wants one; nil when it does not exist.
	PreRestore *Backup
	// Job is nil before the restore started.
	Job *Job
	// Servers is read only while Verifying; nil when it could not be.
	Servers *Servers
	// Deleting says the OpenBaoRestore is being deleted: nothing new
	// starts, and it goes once the outcome of what did start is known.
	Deleting bool
}

// Decision is what to do: the new status, and the actions it records.
type Decision struct {
	Status v1alpha1.OpenBaoRestoreStatus
	// CreateJob asks for the Job named in Status.JobName. It is set only in
	// the pass that records that name (the decision to post the snapshot),
	// and carried out only once that record is written: a Job that is
	// missing later is never created again, since it may have posted.
	CreateJob bool
	// CreateBackup asks for the pre-restore OpenBaoBackup named in
	// Status.PreRestoreBackup.
	CreateBackup bool
	// RestartPods are server pods to delete so that they restart.
	RestartPods []string
	Requeue     time.Duration
	// Release lets the OpenBaoRestore go (removes its finalizer): the
	// restore has ended, so it no longer holds backups and rollouts.
	Release bool
}

// Decide takes the restore one step further. A restore being deleted
// starts nothing; it ends at once when nothing was started or the snapshot
// is already installed, and otherwise waits for its Job, so that the holds
// on backups and rollouts last until OpenBao is done with the snapshot.
func Decide(o Observed) Decision {
	d := Decision{Status: *o.Restore.Status.DeepCopy()}
	s := &d.Status
	switch {
	case s.Phase.Done():
	case o.Deleting && s.JobName == "":
		d.finish(o.Now, v1alpha1.RestoreFailed, ReasonDeleted, "deleted before it started; nothing was changed")
	case o.Cluster == nil && s.JobName == "":
		d.finish(o.Now, v1alpha1.RestoreFailed, ReasonClusterNotFound,
			"OpenBaoCluster "+o.Restore.Spec.ClusterName+" does not exist in this namespace; nothing was changed")
	case o.Cluster == nil:
		d.finish(o.Now, v1alpha1.RestoreFailed, ReasonClusterNotFound,
			"OpenBaoCluster "+o.Restore.Spec.ClusterName+" was deleted while the restore ran")
	case s.JobName == "":
		d.start(o)
	case s.Step == v1alpha1.RestoreStepVerifying:
		if !o.Deleting {
			d.verify(o)
		}
	default:
		d.follow(o)
	}
	if o.Deleting && !s.Phase.Done() && s.Step == v1alpha1.RestoreStepVerifying {
		d.finish(o.Now, v1alpha1.RestoreFailed, ReasonDeleted, fmt.Sprintf("OpenBao installed %s (Raft index %d); the OpenBaoRestore "+
			"was deleted before every server was seen serving it: check that each server is unsealed and caught up, restart one that trails",
			s.Key, s.RaftIndex))
	}
	d.Release = s.Phase.Done()
	return d
}

// start runs the preflight: a held restore waits, a permanent refusal
// fails it; then the pre-restore snapshot is taken, and once it is stored
// the Job is named and asked for.
func (d *Decision) start(o Observed) {
	s, check := &d.Status, o.Preflight
	switch {
	case check.Permanent:
		d.finish(o.Now, v1alpha1.RestoreFailed, check.Reason, check.Message+"; nothing was changed")
	case !check.OK:
		s.Phase, s.Reason, s.Message = v1alpha1.RestorePending, check.Reason, check.Message
		d.Requeue = HoldRetry
	case o.Restore.WantsPreRestoreSnapshot() && s.PreRestoreKey == "":
		d.snapshot(o)
	default:
		d.begin(o)
	}
}

// begin names the Job and asks for it: the decision to post the snapshot.
func (d *Decision) begin(o Observed) {
	s := &d.Status
	now := metav1.NewTime(o.Now)
	s.Phase, s.Step, s.StartTime = v1alpha1.RestoreRunning, v1alpha1.RestoreStepRestoring, &now
	s.JobName = o.Cluster.RestoreJobName(o.Restore)
	s.Reason, s.Message = ReasonJobCreated, "Job "+s.JobName+" streams the snapshot into the active server, checking it on the way"
	d.CreateJob = true
}

// snapshot takes the pre-restore snapshot through an OpenBaoBackup and
// begins the restore in the pass that sees it stored.
func (d *Decision) snapshot(o Observed) {
	s, b := &d.Status, o.PreRestore
	s.Phase, s.PreRestoreBackup = v1alpha1.RestorePending, o.Restore.PreRestoreBackupName()
	switch {
	case b == nil || !b.Found:
		d.CreateBackup = true
		s.Reason, s.Message = ReasonTakingPreRestoreSnapshot, "OpenBaoBackup "+s.PreRestoreBackup+
			" takes a snapshot of the cluster as it is; the restore starts once it is stored"
		d.Requeue = HoldRetry
	case !b.Ours:
		d.finish(o.Now, v1alpha1.RestoreFailed, ReasonBackupNameTaken, "OpenBaoBackup "+s.PreRestoreBackup+
			" exists and is not this restore's pre-restore snapshot; nothing was changed")
	case b.Phase == v1alpha1.BackupSucceeded && b.Key != "":
		s.PreRestoreKey = b.Key
		d.begin(o)
		s.Message += "; the data it replaces is stored at " + b.Key + " (status.preRestoreKey): restore that key to undo this restore"
	case b.Phase == v1alpha1.BackupFailed:
		d.finish(o.Now, v1alpha1.RestoreFailed, ReasonPreRestoreSnapshotFailed, fmt.Sprintf("the pre-restore snapshot (OpenBaoBackup %s) "+
			"failed (%s: %s); nothing was changed. Create another OpenBaoRestore to try again, or one with preRestoreSnapshot: false "+
			"to restore without a way back", s.PreRestoreBackup, b.Reason, b.Message))
	default:
		s.Reason, s.Message = ReasonTakingPreRestoreSnapshot, "waiting for OpenBaoBackup "+s.PreRestoreBackup+
			" to store a snapshot of the cluster as it is; the restore starts once it is stored"
		if b.Reason != "" && b.Message != "" {
			s.Message += " (the backup is " + orNone(string(b.Phase)) + ", " + b.Reason + ": " + b.Message + ")"
		}
		d.Requeue = HoldRetry
	}
}

// follow waits for the Job and reads its report.
func (d *Decision) follow(o Observed) {
	j, s := o.Job, &d.Status
	switch {
	case j == nil:
		d.Requeue = HoldRetry // not observed
	case !j.Found && len(j.PodsLeft) > 0:
		s.Message = "Job " + s.JobName + " is gone; waiting for its pod " + strings.Join(j.PodsLeft, ", ") +
			", which may be posting the snapshot, to end"
		d.Requeue = HoldRetry
	case !j.Found:
		d.finish(o.Now, v1alpha1.RestoreFailed, ReasonOutcomeUnknown, outcomeUnknown(s.JobName))
	case !j.Owned:
		d.finish(o.Now, v1alpha1.RestoreFailed, ReasonJobNameTaken, "Job "+s.JobName+" exists and belongs to something else; nothing was changed")
	case !j.Succeeded && !j.Failed, !j.ReportRead:
		// the Job's changes bring the restore back
		if o.Deleting {
			s.Reason, s.Message = ReasonAwaitingOutcome, "deleted while Job "+s.JobName+" may be posting the snapshot to OpenBao; "+
				"backups and rollouts stay held, and the OpenBaoRestore goes, once the Job has ended"
		}
	case j.Succeeded && !j.Report.Failed():
		now := metav1.NewTime(o.Now)
		s.Step, s.RestoredAt = v1alpha1.RestoreStepVerifying, &now
		s.Key, s.Size, s.SHA256, s.RaftIndex = j.Report.Key, j.Report.Size, j.Report.SHA256, j.Report.RaftIndex
		s.Reason = ReasonSnapshotInstalled
		s.Message = fmt.Sprintf("OpenBao installed %s (Raft index %d); waiting for every server to be healthy and to serve it", s.Key, s.RaftIndex)
		if msg := j.Report.Unproven.Message(); msg != "" {
			s.Message += "; choosing latest, the executor " + msg
		}
		d.Requeue = VerifyPollEarly
	default:
		reason, msg := failureOf(j)
		d.finish(o.Now, v1alpha1.RestoreFailed, reason, msg)
	}
}

// JobNotCreated takes back the decision recorded in status when the API
// server refused to create its Job (an answer, so the Job does not exist
// and nothing was posted): the restore is Pending again and decides
// afresh, which records a new decision before any Job is created.
func JobNotCreated(s v1alpha1.OpenBaoRestoreStatus, why string) Decision {
	d := Decision{Status: *s.DeepCopy(), Requeue: HoldRetry}
	job := d.Status.JobName
	d.Status.Phase, d.Status.Step, d.Status.JobName, d.Status.StartTime = v1alpha1.RestorePending, "", "", nil
	d.Status.Reason, d.Status.Message = ReasonJobNotCreated, "the API server refused to create Job "+job+" ("+why+
		"); nothing was started, the restore tries again"
	return d
}

// verifyPollAfter is how soon the servers are checked again, since the
// install.
func verifyPollAfter(since time.Duration) time.Duration {
	if since < RestartGrace {
		return VerifyPollEarly
	}
	return VerifyPoll
}

// outcomeUnknown says what a user must check when the Job that was to post
// the snapshot is gone without its end having been seen.
func outcomeUnknown(job string) string {
	return "Job " + job + ", which was to post the snapshot to OpenBao, is gone and its end was never seen (it was deleted, or the " +
		"operator stopped between recording it and creating it): the cluster holds either its old data or the snapshot's. The operator " +
		"does not run it again, which could post the snapshot a second time and lose what was written since. Check the data (a value " +
		"written after the snapshot was taken, or the Raft index in sys/storage/raft/autopilot/state), then create another OpenBaoRestore if needed"
}

// failureOf says why the executor failed and what state that left the
// cluster in.
func failureOf(j *Job) (reason, message string) {
	r := j.Report
	switch {
	case r.Reason == "":
		return ReasonJobFailed, "the restore Job ended without a report (" + orNone(j.FailureMessage) + "); the snapshot may or may not " +
			"have reached OpenBao: check the data, then create another OpenBaoRestore if it is not the restored one"
	case r.Reason == ReasonRestoreFailed:
		return r.Reason, r.Error + "; OpenBao did not confirm the restore, so the cluster may hold its old data or the snapshot's: " +
			"check the data, then create another OpenBaoRestore if needed"
	case r.Reason == ReasonSealMismatch:
		return r.Reason, r.Error
	}
	return r.Reason, r.Error + "; OpenBao installed nothing, the cluster's data is unchanged"
}

// verify waits for every server to be healthy and caught up with the
// restored state, restarts once each server that still trails after the
// grace period, and fails after VerifyTimeout.
func (d *Decision) verify(o Observed) {
	s := &d.Status
	since := o.Now.Sub(s.RestoredAt.Time)
	waiting, lagging := assess(o.Servers)
	if len(waiting) == 0 && len(lagging) == 0 {
		msg := fmt.Sprintf("restored %s (Raft index %d); every server is healthy and serves it", s.Key, s.RaftIndex)
		if len(s.RestartedPods) > 0 {
			msg += "; restarted " + strings.Join(s.RestartedPods, ", ") + ", which trailed the restored state"
		}
		d.finish(o.Now, v1alpha1.RestoreSucceeded, ReasonRestored, msg)
		return
	}
	if since >= VerifyTimeout {
		d.finish(o.Now, v1alpha1.RestoreFailed, ReasonVerificationTimedOut, fmt.Sprintf("OpenBao installed %s at %s, but after %s "+
			"not every server serves it (%s); the leader holds the restored data. Check the pods named, restart them if they stay behind",
			s.Key, s.RestoredAt.UTC().Format(time.RFC3339), VerifyTimeout, strings.Join(append(waiting, lagging...), "; ")))
		return
	}
	d.Requeue = verifyPollAfter(since)
	var restart []string
	for _, pod := range lagging {
		name := strings.SplitN(pod, " ", 2)[0]
		if since >= RestartGrace && !contains(s.RestartedPods, name) {
			restart = append(restart, name)
		}
	}
	if len(restart) > 0 {
		d.RestartPods = restart
		s.RestartedPods = append(s.RestartedPods, restart...)
		s.Reason = ReasonRestartingServers
		s.Message = "restarting " + strings.Join(restart, ", ") + ": they trail the restored state and may serve stale data until restarted"
		return
	}
	s.Reason, s.Message = ReasonSnapshotInstalled, fmt.Sprintf("OpenBao installed %s; waiting for %s",
		s.Key, strings.Join(append(waiting, lagging...), "; "))
}

// assess names the servers not yet serving the restored state: waiting
// (no answer, sealed, autopilot not healthy) and lagging (answering, yet
// trailing the leader: the ones a restart brings up to date). Each entry
// starts with the pod's name.
func assess(o *Servers) (waiting, lagging []string) {
	if o == nil {
		return []string{"the servers could not be read"}, nil
	}
	if o.Problem != "" {
		waiting = append(waiting, "the Raft state: "+o.Problem)
	} else if !o.AutopilotHealthy {
		waiting = append(waiting, "autopilot to report the cluster healthy")
	}
	if len(o.Servers) < o.Replicas {
		waiting = append(waiting, fmt.Sprintf("%d of %d servers answering", len(o.Servers), o.Replicas))
	}
	servers := append([]Server(nil), o.Servers...)
	sort.Slice(servers, func(i, j int) bool { return servers[i].Pod < servers[j].Pod })
	for _, sv := range servers {
		switch {
		case !sv.Answered:
			waiting = append(waiting, sv.Pod+" to answer")
		case !sv.Initialized || sv.Sealed:
			waiting = append(waiting, sv.Pod+" to be unsealed")
		case !sv.LagKnown:
			waiting = append(waiting, sv.Pod+" to report its Raft index")
		case sv.Lag > 0:
			lagging = append(lagging, fmt.Sprintf("%s trails the leader by %d Raft entries", sv.Pod, sv.Lag))
		case !sv.Ready:
			waiting = append(waiting, sv.Pod+" to be Ready again")
		}
	}
	return waiting, lagging
}

func (d *Decision) finish(now time.Time, phase v1alpha1.RestorePhase, reason, msg string) {
	s := &d.Status
	t := metav1.NewTime(now)
	s.Phase, s.Reason, s.Message, s.CompletionTime = phase, reason, msg, &t
	s.Step = ""
	d.Requeue = 0
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
