package backup

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
)

// Reasons of an OpenBaoBackup, besides the preflight's and the
// executor's.
const (
	ReasonWaiting         = "Waiting"
	ReasonJobCreated      = "JobCreated"
	ReasonClusterNotFound = "ClusterNotFound"
	ReasonJobFailed       = "JobFailed"
	ReasonReportInvalid   = "ReportInvalid"
	ReasonSnapshotStored  = "SnapshotStored"
	ReasonJobNameTaken    = "JobNameTaken"
)

// Waits of a backup that cannot go on yet.
const (
	// WaitRetry is how soon a backup held by another operation looks again.
	WaitRetry = 10 * time.Second
	// ReportRetry is how soon a backup whose Job ended looks again for the
	// pod's report, which the cache may not show yet.
	ReportRetry = 2 * time.Second
)

// Job is what was observed of the backup's Job.
type Job struct {
	// Found says it exists; Owned that the backup controls it.
	Found, Owned bool
	// Succeeded or Failed once it ended; then Report is the executor's,
	// ReportRead false while the pod's end has not been seen yet.
	Succeeded, Failed bool
	Report            Report
	ReportRead        bool
	// FailureMessage is the Job's own reason for failing.
	FailureMessage string
}

// Refusal is a permanent refusal to start, found outside the preflight
// (a managed Secret named by the cluster, an image the policy refuses).
type Refusal struct {
	Reason, Message string
}

// Observed is everything Decide looks at.
type Observed struct {
	Now    time.Time
	Backup *v1alpha1.OpenBaoBackup
	// Cluster is nil when it does not exist.
	Cluster *v1alpha1.OpenBaoCluster
	// Refusals stop a backup that has not started, in order, before the
	// preflight is looked at.
	Refusals []Refusal
	// Preflight is the verdict for a backup that has not started.
	Preflight Check
	// Job is nil before the backup started; then Found says it exists.
	Job *Job
}

// Decision is what to do: the new status, and the actions it records.
type Decision struct {
	Status v1alpha1.OpenBaoBackupStatus
	// Start says this pass records the backup's start (Status.JobName):
	// the caller holds it in the Day-2 registry before the write.
	Start bool
	// CreateJob asks for the Job named in Status.JobName, once the status
	// that names it is written. A backup's Job only reads the cluster, so
	// one missing later is created again.
	CreateJob bool
	// ApplyRetention asks for the cluster's retention after a stored
	// snapshot; what it did is added to Status.Message before the write.
	ApplyRetention bool
	// Ended says the backup ends in this pass: it is counted and told
	// once the status is written.
	Ended   bool
	Requeue time.Duration
}

// Decide takes the backup one step further: the preflight, then the Job,
// then its report into the status. A backup that ended or is being
// deleted is left alone by the caller.
func Decide(o Observed) Decision {
	d := Decision{Status: *o.Backup.Status.DeepCopy()}
	switch {
	case d.Status.Phase.Done():
	case o.Cluster == nil:
		d.finish(o.Now, v1alpha1.BackupFailed, ReasonClusterNotFound,
			"OpenBaoCluster "+o.Backup.Spec.ClusterName+" does not exist in this namespace")
	case d.Status.JobName == "":
		d.start(o)
	default:
		d.follow(o)
	}
	return d
}

// start refuses, holds, or names the Job and asks for it.
func (d *Decision) start(o Observed) {
	s, check := &d.Status, o.Preflight
	switch {
	case len(o.Refusals) > 0:
		d.finish(o.Now, v1alpha1.BackupFailed, o.Refusals[0].Reason, o.Refusals[0].Message)
	case !check.OK && check.Wait:
		s.Phase, s.Reason, s.Message = v1alpha1.BackupPending, ReasonWaiting, check.Message
		d.Requeue = WaitRetry
	case !check.OK:
		d.finish(o.Now, v1alpha1.BackupFailed, check.Reason, check.Message)
	default:
		now := metav1.NewTime(o.Now)
		s.Phase, s.JobName, s.StartTime = v1alpha1.BackupRunning, o.Cluster.BackupJobName(o.Now), &now
		s.Reason, s.Message = ReasonJobCreated, "Job "+s.JobName+" runs the executor"
		d.Start, d.CreateJob = true, true
	}
}

// follow waits for the Job and reads its report when it ends.
func (d *Decision) follow(o Observed) {
	j, s := o.Job, &d.Status
	switch {
	case j == nil || !j.Found:
		d.CreateJob = true
		d.Requeue = ReportRetry
	case !j.Owned:
		d.finish(o.Now, v1alpha1.BackupFailed, ReasonJobNameTaken, "Job "+s.JobName+" exists and belongs to something else")
	case !j.Succeeded && !j.Failed:
		// the Job's changes bring the backup back
	case !j.ReportRead:
		d.Requeue = ReportRetry
	case j.Succeeded:
		d.succeeded(o)
	default:
		d.failed(o)
	}
}

// succeeded records a stored snapshot and asks for the retention.
func (d *Decision) succeeded(o Observed) {
	pathPrefix := ""
	if b := o.Cluster.Spec.Backup; b != nil { // removed while the Job ran
		pathPrefix = b.Target.PathPrefix
	}
	report, prefix := o.Job.Report, ObjectPrefix(pathPrefix, o.Cluster.Namespace, o.Cluster.Name)
	if report.Failed() {
		d.finish(o.Now, v1alpha1.BackupFailed, report.Reason, report.Error)
		return
	}
	if _, ok := ParseObjectKey(prefix, report.Key); !ok {
		d.finish(o.Now, v1alpha1.BackupFailed, ReasonReportInvalid,
			fmt.Sprintf("the executor reports key %q, which is not a snapshot under %s", report.Key, prefix))
		return
	}
	msg := fmt.Sprintf("stored and verified %d bytes at Raft index %d", report.Size, report.RaftIndex)
	if report.Canary == "" && report.CanaryError != "" {
		msg += "; no canary: " + report.CanaryError
	}
	d.finish(o.Now, v1alpha1.BackupSucceeded, ReasonSnapshotStored, msg)
	s := &d.Status
	duration := metav1.Duration{Duration: report.DurationValue()}
	s.Key, s.Size, s.SHA256, s.Duration, s.Canary = report.Key, report.Size, report.SHA256, &duration, report.Canary
	d.ApplyRetention = true
}

// failed records a Job that failed, with the executor's reason when it
// left one, else the Job's.
func (d *Decision) failed(o Observed) {
	report := o.Job.Report
	reason, msg := report.Reason, report.Error
	if reason == "" {
		reason, msg = ReasonJobFailed, "the Job failed without a report from the executor"
		if o.Job.FailureMessage != "" {
			msg += ": " + o.Job.FailureMessage
		}
	}
	d.finish(o.Now, v1alpha1.BackupFailed, reason, msg)
	if duration := report.DurationValue(); duration > 0 {
		d.Status.Duration = &metav1.Duration{Duration: duration}
	}
}

func (d *Decision) finish(now time.Time, phase v1alpha1.BackupPhase, reason, msg string) {
	t := metav1.NewMicroTime(now)
	d.Status.Phase, d.Status.Reason, d.Status.Message, d.Status.CompletionTime = phase, reason, msg, &t
	d.Ended, d.Requeue = true, 0
}
