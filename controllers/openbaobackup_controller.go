package controllers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/openbao/operator/api/v1alpha1"
	decide "github.com/openbao/operator/internal/admission"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/children"
	"github.com/openbao/operator/internal/imagepolicy"
	"github.com/openbao/operator/internal/objectstore"
)

// OpenBaoBackupReconciler runs each OpenBaoBackup: a preflight, then a Job
// that runs the executor, then the Job's report into the status, metrics
// and events, and, after a success, the cluster's retention.
type OpenBaoBackupReconciler struct {
	Client client.Client
	// APIReader reads the user's Secrets (store credentials and CA), which
	// carry no label of ours.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Clock     clock.PassiveClock
	// OperatorImage runs the executor unless spec.backup.executorImage is
	// set.
	OperatorImage string
	// ImagePolicy is the platform's image policy, held against
	// spec.backup.executorImage before a Job runs it.
	ImagePolicy imagepolicy.Policy
	// NewStore opens the backup target for retention; nil is
	// open.OperatorStore. It is given the target's own credentials only,
	// never the operator's ambient identity.
	NewStore func(context.Context, objectstore.Config) (objectstore.Store, error)
	// Scope names the namespaces the controller holds rights in; nil: all.
	Scope Scope
	// ProxyEnv is passed to the executor (operator-lib's proxy variables).
	ProxyEnv []corev1.EnvVar
	// Random draws provenance keys; nil is crypto/rand.
	Random io.Reader

	mu sync.Mutex
	// started remembers, per cluster, the backup this process started
	// whose end it has not seen: a cache that lags the status write must
	// not let a second backup of the cluster start beside it.
	started map[types.NamespacedName]string
}

// Waits of a backup that cannot go on yet.
const (
	backupWaitRetry = 10 * time.Second
	reportRetry     = 2 * time.Second
)

// Reasons of OpenBaoBackups, besides the preflight's and the executor's.
const (
	ReasonWaiting         = "Waiting"
	ReasonJobCreated      = "JobCreated"
	ReasonClusterNotFound = "ClusterNotFound"
	ReasonJobFailed       = "JobFailed"
	ReasonReportInvalid   = "ReportInvalid"
	ReasonBackupStored    = "SnapshotStored"
	ReasonJobNameTaken    = "JobNameTaken"
)

// Reconcile takes one OpenBaoBackup one step further.
func (r *OpenBaoBackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &v1alpha1.OpenBaoBackup{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if b.Status.Phase.Done() || !b.DeletionTimestamp.IsZero() {
		r.forgetStarted(b)
		return ctrl.Result{}, nil
	}
	if managed, _, err := manages(ctx, r.Scope, b.Namespace); err != nil || !managed {
		// The cluster's status says why; the backup waits for its namespace.
		return ctrl.Result{RequeueAfter: outOfScopeRetry}, err
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("cluster", b.Spec.ClusterName))
	c := &v1alpha1.OpenBaoCluster{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.ClusterName}, c)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.finish(ctx, b, nil, v1alpha1.BackupFailed, ReasonClusterNotFound,
			"OpenBaoCluster "+b.Spec.ClusterName+" does not exist in this namespace")
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read OpenBaoCluster %s: %w", b.Spec.ClusterName, err)
	}
	if b.Status.JobName == "" {
		return r.start(ctx, b, c)
	}
	return r.follow(ctx, b, c)
}

// start runs the preflight and, if it passes, records the Job's name and
// start in the status before creating the Job, so that a retried pass
// creates the same Job, never a second one.
func (r *OpenBaoBackupReconciler) start(ctx context.Context, b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster) (ctrl.Result, error) {
	if refused, err := managedReferences(ctx, r.APIReader, r.Client, c); err != nil || len(refused) > 0 {
		if err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.finish(ctx, b, c, v1alpha1.BackupFailed, decide.ReasonManagedSecretReferenced,
			"OpenBaoCluster "+c.Name+": "+refusalMessage(refused)+"; no Job was created")
	}
	backups, err := listClusterBackups(ctx, r.Client, b.Namespace, c.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	restores, err := runningRestores(ctx, r.Client, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	check := backup.Preflight(backup.Observed{Cluster: c, Status: &c.Status, Running: r.running(c, b, backups),
		PreUpgrade: b.Labels[v1alpha1.LabelBackupTrigger] == v1alpha1.BackupTriggerPreUpgrade, Restores: restores})
	switch {
	case !check.OK && (check.Reason == backup.ReasonBackupInProgress || check.Reason == backup.ReasonRestoreInProgress):
		return ctrl.Result{RequeueAfter: backupWaitRetry}, r.setStatus(ctx, b, func(s *v1alpha1.OpenBaoBackupStatus) {
			s.Phase, s.Reason, s.Message = v1alpha1.BackupPending, ReasonWaiting, check.Message
		})
	case !check.OK:
		return ctrl.Result{}, r.finish(ctx, b, c, v1alpha1.BackupFailed, check.Reason, check.Message)
	}
	if errs := r.ImagePolicy.CheckCluster(c); len(errs) > 0 {
		return ctrl.Result{}, r.finish(ctx, b, c, v1alpha1.BackupFailed, v1alpha1.ReasonImageNotAllowed, errs.ToAggregate().Error())
	}
	now := metav1.NewTime(r.Clock.Now())
	jobName := c.BackupJobName(now.Time)
	if err := r.setStatus(ctx, b, func(s *v1alpha1.OpenBaoBackupStatus) {
		s.Phase, s.JobName, s.StartTime = v1alpha1.BackupRunning, jobName, &now
		s.Reason, s.Message = ReasonJobCreated, "Job "+jobName+" runs the executor"
	}); err != nil {
		return ctrl.Result{}, err
	}
	r.markStarted(c, b)
	return r.createJob(ctx, b, c)
}

func (r *OpenBaoBackupReconciler) createJob(ctx context.Context, b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster) (ctrl.Result, error) {
	if err := r.ensureProvenanceKey(ctx, c); err != nil {
		var foreign errForeignProvenanceKey
		if errors.As(err, &foreign) {
			return ctrl.Result{}, r.finish(ctx, b, c, v1alpha1.BackupFailed, ReasonProvenanceKeyNotAdopted, foreign.Error()+"; no Job was created")
		}
		return ctrl.Result{}, err
	}
	job := backup.JobFor(backup.JobInput{Cluster: c, Backup: b, Name: b.Status.JobName, OperatorImage: r.OperatorImage, Env: r.ProxyEnv})
	err := r.Client.Create(ctx, job)
	if apierrors.IsAlreadyExists(err) {
		return ctrl.Result{RequeueAfter: reportRetry}, nil // the cache has not seen it yet
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("create Job %s: %w", job.Name, err)
	}
	log.FromContext(ctx).Info("backup Job created", "job", job.Name)
	r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "BackupStarted", "CreateJob", "Job %s takes a snapshot of %s", job.Name, c.Name)
	return ctrl.Result{}, nil
}

// follow waits for the Job and reads its report when it ends.
func (r *OpenBaoBackupReconciler) follow(ctx context.Context, b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster) (ctrl.Result, error) {
	job := &batchv1.Job{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: b.Status.JobName}, job)
	if apierrors.IsNotFound(err) {
		return r.createJob(ctx, b, c)
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read Job %s: %w", b.Status.JobName, err)
	}
	if !metav1.IsControlledBy(job, b) {
		return ctrl.Result{}, r.finish(ctx, b, c, v1alpha1.BackupFailed, ReasonJobNameTaken,
			"Job "+job.Name+" exists and belongs to something else")
	}
	succeeded, failed := jobEnded(job)
	if !succeeded && !failed {
		return ctrl.Result{}, nil // the Job's changes bring the backup back
	}
	report, found, err := r.report(ctx, job, succeeded)
	if err != nil || !found {
		return ctrl.Result{RequeueAfter: reportRetry}, err
	}
	if succeeded {
		return ctrl.Result{}, r.succeeded(ctx, b, c, report)
	}
	return ctrl.Result{}, r.failed(ctx, b, c, job, report)
}

// jobEnded reads the Job's terminal condition.
func jobEnded(job *batchv1.Job) (succeeded, failed bool) {
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			succeeded = true
		case batchv1.JobFailed:
			failed = true
		}
	}
	return succeeded, failed
}

// report reads the executor's report from the termination message of the
// Job's pod that ended as the Job did (the newest such). found is false
// while the cache has not seen that pod end yet; a failed Job whose pods
// left no report (killed at the deadline) has an empty one.
func (r *OpenBaoBackupReconciler) report(ctx context.Context, job *batchv1.Job, succeeded bool) (backup.Report, bool, error) {
	return jobReport(ctx, r.Client, job, succeeded)
}

// jobReport reads the executor's report of a backup or restore Job, as
// OpenBaoBackupReconciler.report says.
func jobReport(ctx context.Context, reader client.Reader, job *batchv1.Job, succeeded bool) (backup.Report, bool, error) {
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return backup.Report{}, false, fmt.Errorf("list the pods of Job %s: %w", job.Name, err)
	}
	var newest *corev1.ContainerStateTerminated
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			t := s.State.Terminated
			if s.Name != backup.ExecutorName || t == nil || (t.ExitCode == 0) != succeeded {
				continue
			}
			if newest == nil || t.FinishedAt.After(newest.FinishedAt.Time) {
				newest = t
			}
		}
	}
	if newest == nil {
		return backup.Report{}, !succeeded, nil
	}
	report, err := backup.ParseReport(newest.Message)
	if err != nil && succeeded {
		report = backup.Report{Reason: ReasonReportInvalid, Error: err.Error()}
	} else if err != nil {
		report = backup.Report{}
	}
	return report, true, nil
}

// succeeded records a stored snapshot and applies the retention.
func (r *OpenBaoBackupReconciler) succeeded(ctx context.Context, b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster, report backup.Report) error {
	if report.Failed() {
		return r.finish(ctx, b, c, v1alpha1.BackupFailed, report.Reason, report.Error)
	}
	prefix := objectPrefix(c)
	if _, ok := backup.ParseObjectKey(prefix, report.Key); !ok {
		return r.finish(ctx, b, c, v1alpha1.BackupFailed, ReasonReportInvalid,
			fmt.Sprintf("the executor reports key %q, which is not a snapshot under %s", report.Key, prefix))
	}
	msg := fmt.Sprintf("stored and verified %d bytes at Raft index %d", report.Size, report.RaftIndex)
	if report.Canary == "" && report.CanaryError != "" {
		msg += "; no canary: " + report.CanaryError
	}
	msg += "; " + r.applyRetention(ctx, b, c, report)
	duration := metav1.Duration{Duration: report.DurationValue()}
	return r.finishWith(ctx, b, c, func(s *v1alpha1.OpenBaoBackupStatus) {
		s.Phase, s.Reason, s.Message = v1alpha1.BackupSucceeded, ReasonBackupStored, msg
		s.Key, s.Size, s.SHA256, s.Duration = report.Key, report.Size, report.SHA256, &duration
		s.Canary = report.Canary
	})
}

// failed records a Job that failed, with the executor's reason when it
// left one, else the Job's.
func (r *OpenBaoBackupReconciler) failed(ctx context.Context, b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster,
	job *batchv1.Job, report backup.Report) error {
	reason, msg := report.Reason, report.Error
	if reason == "" {
		reason, msg = ReasonJobFailed, "the Job failed without a report from the executor"
		for _, cond := range job.Status.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
				msg = fmt.Sprintf("the Job failed without a report from the executor: %s: %s", cond.Reason, cond.Message)
			}
		}
	}
	duration := metav1.Duration{Duration: report.DurationValue()}
	return r.finishWith(ctx, b, c, func(s *v1alpha1.OpenBaoBackupStatus) {
		s.Phase, s.Reason, s.Message = v1alpha1.BackupFailed, reason, msg
		if duration.Duration > 0 {
			s.Duration = &duration
		}
	})
}

// finish ends a backup with a phase and a reason.
func (r *OpenBaoBackupReconciler) finish(ctx context.Context, b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster,
	phase v1alpha1.BackupPhase, reason, msg string) error {
	return r.finishWith(ctx, b, c, func(s *v1alpha1.OpenBaoBackupStatus) { s.Phase, s.Reason, s.Message = phase, reason, msg })
}

// finishWith writes the final status, then counts it and tells of it: a
// backup ends once, so each is counted once in this process.
func (r *OpenBaoBackupReconciler) finishWith(ctx context.Context, b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster,
	mutate func(*v1alpha1.OpenBaoBackupStatus)) error {
	now := metav1.NewMicroTime(r.Clock.Now())
	if err := r.setStatus(ctx, b, func(s *v1alpha1.OpenBaoBackupStatus) {
		mutate(s)
		s.Message = truncate(s.Message)
		s.CompletionTime = &now
	}); err != nil {
		return err
	}
	r.forgetStarted(b)
	ns, name := b.Namespace, b.Spec.ClusterName
	if d := b.Status.Duration; d != nil {
		backupLastDuration.WithLabelValues(ns, name).Set(d.Seconds())
	}
	if b.Status.Phase == v1alpha1.BackupSucceeded {
		backupSuccesses.WithLabelValues(ns, name).Inc()
		log.FromContext(ctx).Info("backup succeeded", "key", b.Status.Key, "size", b.Status.Size, "sha256", b.Status.SHA256)
		r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "BackupSucceeded", "Backup", "%s", b.Status.Message)
	} else {
		backupFailures.WithLabelValues(ns, name).Inc()
		log.FromContext(ctx).Info("backup failed", "reason", b.Status.Reason, "message", b.Status.Message)
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "BackupFailed", "Backup", "%s: %s", b.Status.Reason, b.Status.Message)
	}
	if c != nil {
		r.Recorder.Eventf(c, b, eventType(b.Status.Phase), "Backup"+string(b.Status.Phase), "Backup",
			"OpenBaoBackup %s: %s", b.Name, b.Status.Reason)
	}
	return nil
}

func eventType(p v1alpha1.BackupPhase) string {
	if p == v1alpha1.BackupSucceeded {
		return corev1.EventTypeNormal
	}
	return corev1.EventTypeWarning
}

// setStatus changes the status with mutate and writes it when it changed.
func (r *OpenBaoBackupReconciler) setStatus(ctx context.Context, b *v1alpha1.OpenBaoBackup, mutate func(*v1alpha1.OpenBaoBackupStatus)) error {
	next := b.Status.DeepCopy()
	mutate(next)
	if equality.Semantic.DeepEqual(&b.Status, next) {
		return nil
	}
	b.Status = *next
	if err := r.Client.Status().Update(ctx, b); err != nil {
		return fmt.Errorf("write the status of OpenBaoBackup %s: %w", b.Name, err)
	}
	return nil
}

// running names the cluster's other backups under way: those the cache
// shows with a Job, and the one this process started last, until it ends.
func (r *OpenBaoBackupReconciler) running(c *v1alpha1.OpenBaoCluster, b *v1alpha1.OpenBaoBackup, backups []v1alpha1.OpenBaoBackup) []string {
	var out []string
	for _, o := range backups {
		if o.Name != b.Name && o.Status.JobName != "" && !o.Status.Phase.Done() {
			out = append(out, o.Name)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if started := r.started[client.ObjectKeyFromObject(c)]; started != "" && started != b.Name && !contains(out, started) {
		for _, o := range backups {
			if o.Name == started && !o.Status.Phase.Done() {
				out = append(out, started)
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (r *OpenBaoBackupReconciler) markStarted(c *v1alpha1.OpenBaoCluster, b *v1alpha1.OpenBaoBackup) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started == nil {
		r.started = map[types.NamespacedName]string{}
	}
	r.started[client.ObjectKeyFromObject(c)] = b.Name
}

func (r *OpenBaoBackupReconciler) forgetStarted(b *v1alpha1.OpenBaoBackup) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.ClusterName}
	if r.started[key] == b.Name {
		delete(r.started, key)
	}
}

// SetupWithManager watches OpenBaoBackups and the Jobs they own (package
// children lists them).
func (r *OpenBaoBackupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.OpenBaoBackup{})
	for _, k := range children.WatchedBy(children.BackupReconciler, children.ByOwner) {
		b = b.Owns(k.New())
	}
	// One at a time: backups of one cluster must not start side by side.
	return b.WithOptions(controllerOptions(1)).Complete(r)
}
