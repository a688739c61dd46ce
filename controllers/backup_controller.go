package controllers

import (
	"context"
	"errors"
	"fmt"
	"io"

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
	"github.com/openbao/operator/internal/day2"
	"github.com/openbao/operator/internal/imagepolicy"
	"github.com/openbao/operator/internal/imageverify"
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
	// PlatformVerification, when set, is the signature every
	// spec.backup.executorImage must carry; the Job runs it by digest.
	PlatformVerification *PlatformVerification
	// ImageVerifier verifies it; nil takes cosign against the registries.
	ImageVerifier imageverify.Verifier
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

	// Operations is the Day-2 registry the reconcilers share: a backup's
	// start is decided and recorded in it in one step. Nil remembers
	// nothing.
	Operations *day2.Registry
}

// Reconcile takes one OpenBaoBackup one step further: it gathers what
// backup.Decide looks at and carries out the decision.
func (r *OpenBaoBackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &v1alpha1.OpenBaoBackup{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if b.Status.Phase.Done() || !b.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if managed, _, err := manages(ctx, r.Scope, b.Namespace); err != nil || !managed {
		// The cluster's status says why; the backup waits for its namespace.
		return ctrl.Result{RequeueAfter: outOfScopeRetry}, err
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("cluster", b.Spec.ClusterName))
	o, ops, err := r.observe(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := backup.Decide(o)
	if d.Start {
		d = r.claim(o, ops)
	}
	if d.ApplyRetention {
		d.Status.Message += "; " + r.applyRetention(ctx, b, o.Cluster, o.Job.Report)
	}
	if err := r.setStatus(ctx, b, d.Status); err != nil {
		if d.Start { // not recorded: the start did not happen
			r.Operations.Release(day2.ClusterOf(o.Cluster), day2.BackupOp(b).Ref)
		}
		return ctrl.Result{}, err
	}
	if d.Ended {
		r.tell(ctx, b, o.Cluster)
	}
	if d.CreateJob {
		return r.createJob(ctx, b, o.Cluster)
	}
	return dueAfter(d.Requeue), nil
}

// observe gathers what the backup's step needs, and, for one that has not
// started, what the cache shows of the cluster's Day-2 operations.
func (r *OpenBaoBackupReconciler) observe(ctx context.Context, b *v1alpha1.OpenBaoBackup) (backup.Observed, day2.Observation, error) {
	o := backup.Observed{Now: r.Clock.Now(), Backup: b}
	c := &v1alpha1.OpenBaoCluster{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.ClusterName}, c)
	switch {
	case apierrors.IsNotFound(err):
		return o, day2.Observation{}, nil
	case err != nil:
		return o, day2.Observation{}, fmt.Errorf("read OpenBaoCluster %s: %w", b.Spec.ClusterName, err)
	}
	o.Cluster = c
	if b.Status.JobName != "" {
		o.Job, err = r.observeJob(ctx, b)
		return o, day2.Observation{}, err
	}
	refused, err := managedReferences(ctx, r.APIReader, r.Client, c)
	if err != nil {
		return o, day2.Observation{}, err
	}
	if len(refused) > 0 {
		o.Refusals = append(o.Refusals, backup.Refusal{Reason: decide.ReasonManagedSecretReferenced,
			Message: "OpenBaoCluster " + c.Name + ": " + refusalMessage(refused) + "; no Job was created"})
	}
	if errs := r.ImagePolicy.CheckCluster(c); len(errs) > 0 {
		o.Refusals = append(o.Refusals, backup.Refusal{Reason: v1alpha1.ReasonImageNotAllowed, Message: errs.ToAggregate().Error()})
	}
	if _, err := pinExecutorImage(ctx, r.ImageVerifier, r.PlatformVerification, r.APIReader, c); imageverify.Retryable(err) {
		return o, day2.Observation{}, err // the registry stood in the way: try again
	} else if err != nil {
		o.Refusals = append(o.Refusals, backup.Refusal{Reason: v1alpha1.ReasonImageVerificationFailed, Message: err.Error() + "; no Job was created"})
	}
	ops, err := observeOperations(ctx, r.Client, c, nil)
	if err != nil {
		return o, ops, err
	}
	o.Preflight = backup.Preflight(backup.PreflightInput{Cluster: c, Status: &c.Status,
		PreUpgrade: b.Labels[v1alpha1.LabelBackupTrigger] == v1alpha1.BackupTriggerPreUpgrade,
		Lock:       r.Operations.Check(day2.ClusterOf(c), day2.BackupOp(b), ops)})
	return o, ops, nil
}

// claim records the start in the Day-2 registry, deciding again in the
// same step: another reconciler may have started an operation in the way
// since the preflight read the registry, and then the backup waits.
func (r *OpenBaoBackupReconciler) claim(o backup.Observed, ops day2.Observation) backup.Decision {
	if v := r.Operations.Start(day2.ClusterOf(o.Cluster), day2.BackupOp(o.Backup), ops); !v.OK() {
		o.Preflight = backup.Check{Wait: true, Reason: v.Reason, Message: v.Message}
	}
	return backup.Decide(o)
}

// createJob creates the Job named in the status, which is written.
func (r *OpenBaoBackupReconciler) createJob(ctx context.Context, b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster) (ctrl.Result, error) {
	if err := r.ensureProvenanceKey(ctx, c); err != nil {
		var foreign errForeignProvenanceKey
		if !errors.As(err, &foreign) {
			return ctrl.Result{}, err
		}
		// The Job's name is recorded, but no Job runs: the backup ends
		// here, failed, as a refusal before the start would have.
		next := *b.Status.DeepCopy()
		now := metav1.NewMicroTime(r.Clock.Now())
		next.Phase, next.Reason, next.CompletionTime = v1alpha1.BackupFailed, ReasonProvenanceKeyNotAdopted, &now
		next.Message = foreign.Error() + "; no Job was created"
		if err := r.setStatus(ctx, b, next); err != nil {
			return ctrl.Result{}, err
		}
		r.tell(ctx, b, c)
		return ctrl.Result{}, nil
	}
	// Verified in observe already (the verifier remembers it); should the
	// tag have moved to an image that fails since, no Job is made and the
	// next pass tries again (Decide asks for the Job while it is missing).
	pinnedCluster, err := pinExecutorImage(ctx, r.ImageVerifier, r.PlatformVerification, r.APIReader, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	job := backup.JobFor(backup.JobInput{Cluster: pinnedCluster, Backup: b, Name: b.Status.JobName, OperatorImage: r.OperatorImage, Env: r.ProxyEnv})
	err = r.Client.Create(ctx, job)
	if apierrors.IsAlreadyExists(err) {
		return ctrl.Result{RequeueAfter: backup.ReportRetry}, nil // the cache has not seen it yet
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("create Job %s: %w", job.Name, err)
	}
	log.FromContext(ctx).Info("backup Job created", "job", job.Name)
	r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "BackupStarted", "CreateJob", "Job %s takes a snapshot of %s", job.Name, c.Name)
	return ctrl.Result{}, nil
}

// observeJob reads the backup's Job and, once it ended, the report.
func (r *OpenBaoBackupReconciler) observeJob(ctx context.Context, b *v1alpha1.OpenBaoBackup) (*backup.Job, error) {
	job := &batchv1.Job{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: b.Status.JobName}, job)
	if apierrors.IsNotFound(err) {
		return &backup.Job{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Job %s: %w", b.Status.JobName, err)
	}
	out := &backup.Job{Found: true, Owned: metav1.IsControlledBy(job, b)}
	out.Succeeded, out.Failed = jobEnded(job)
	if !out.Owned || (!out.Succeeded && !out.Failed) {
		return out, nil
	}
	out.FailureMessage = jobFailure(job)
	out.Report, out.ReportRead, err = jobReport(ctx, r.Client, job, out.Succeeded)
	return out, err
}

// jobFailure is the Job's own reason for failing, if it failed.
func jobFailure(job *batchv1.Job) string {
	for _, cond := range job.Status.Conditions {
		if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
			return cond.Reason + ": " + cond.Message
		}
	}
	return ""
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

// jobReport reads the executor's report of a backup or restore Job, as
// OpenBaoBackupReconciler.report says.
func jobReport(ctx context.Context, reader client.Reader, job *batchv1.Job, succeeded bool) (backup.Report, bool, error) {
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return backup.Report{}, false, fmt.Errorf("list the pods of Job %s: %w", job.Name, err)
	}
	var newest *corev1.ContainerStateTerminated
	for _, p := range pods.Items {
		// The label names the Job, but anyone who may create pods here can
		// set it: only a pod the Job controls carries its executor's report.
		if !metav1.IsControlledBy(&p, job) {
			continue
		}
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
		report = backup.Report{Reason: backup.ReasonReportInvalid, Error: err.Error()}
	} else if err != nil {
		report = backup.Report{}
	}
	return report, true, nil
}

// tell counts the backup that just ended (its status is written) and
// tells of it: a backup ends once, so each is counted once in this
// process.
func (r *OpenBaoBackupReconciler) tell(ctx context.Context, b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster) {
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
}

func eventType(p v1alpha1.BackupPhase) string {
	if p == v1alpha1.BackupSucceeded {
		return corev1.EventTypeNormal
	}
	return corev1.EventTypeWarning
}

// setStatus writes next when it differs.
func (r *OpenBaoBackupReconciler) setStatus(ctx context.Context, b *v1alpha1.OpenBaoBackup, next v1alpha1.OpenBaoBackupStatus) error {
	next.Message = truncate(next.Message)
	next.ObservedGeneration = b.Generation
	next.SizeText = ""
	if next.Size > 0 {
		next.SizeText = humanBytes(next.Size)
	}
	oneShotConditions(&next.Conditions, b.Generation, metav1.NewTime(r.Clock.Now()), next.Phase == v1alpha1.BackupSucceeded,
		next.Phase == v1alpha1.BackupFailed, string(next.Phase), next.Reason, next.Message)
	if equality.Semantic.DeepEqual(&b.Status, &next) {
		return nil
	}
	previous := b.Status.DeepCopy()
	b.Status = next
	if err := r.Client.Status().Update(ctx, b); err != nil {
		b.Status = *previous
		return fmt.Errorf("write the status of OpenBaoBackup %s: %w", b.Name, err)
	}
	return nil
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
