package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/openbao/operator/api/v1alpha1"
	decide "github.com/openbao/operator/internal/admission"
	"github.com/openbao/operator/internal/day2"
	"github.com/openbao/operator/internal/imagepolicy"
	"github.com/openbao/operator/internal/imageverify"
	"github.com/openbao/operator/internal/restore"
)

// +kubebuilder:rbac:groups=openbao.org,resources=openbaorestores,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=openbao.org,resources=openbaorestores/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=openbao.org,resources=openbaorestores/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=delete
// +kubebuilder:rbac:groups=openbao.org,resources=openbaobackups,verbs=get;list;watch;create

// ServerObserver reads, after a snapshot was installed, whether each
// server of a cluster is healthy and caught up with the leader.
type ServerObserver interface {
	ObserveServers(ctx context.Context, c *v1alpha1.OpenBaoCluster) (*restore.Servers, error)
}

// OpenBaoRestoreReconciler runs each OpenBaoRestore: it gathers what
// restore.Decide looks at (the preflight's inputs, the Job and its report,
// the servers after the restore) and carries out the decision: the status,
// the Job, pod restarts, events, metrics and an audit line.
type OpenBaoRestoreReconciler struct {
	Client client.Client
	// APIReader reads around the cache: the labels of the Secrets the
	// cluster's spec names, which carry no label of the cache, and a Job
	// the cache does not have yet, which must not be taken for a Job that
	// is gone. Nil: Client (SetupWithManager sets the manager's).
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Clock     clock.PassiveClock
	// OperatorImage runs the executor unless spec.backup.executorImage is
	// set.
	OperatorImage string
	Servers       ServerObserver
	// Scope names the namespaces the controller holds rights in; nil: all.
	Scope Scope
	// ProxyEnv is passed to the executor (operator-lib's proxy variables).
	ProxyEnv []corev1.EnvVar
	// ImagePolicy is the platform's image policy, held against
	// spec.backup.executorImage before a Job runs it.
	ImagePolicy imagepolicy.Policy
	// Operations is the Day-2 registry the reconcilers share: a restore's
	// start is decided and recorded in it in one step. Nil remembers
	// nothing.
	Operations *day2.Registry
	// PlatformVerification, when set, is the signature every
	// spec.backup.executorImage must carry; the Job runs it by digest.
	PlatformVerification *PlatformVerification
	// ImageVerifier verifies it; nil takes cosign against the registries.
	ImageVerifier imageverify.Verifier
}

// Reconcile takes one OpenBaoRestore one step further. The restore holds
// a finalizer from its first pass until it has ended, so that deleting it
// mid-restore leaves its holds on backups and rollouts in place until the
// outcome is known.
func (r *OpenBaoRestoreReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rs := &v1alpha1.OpenBaoRestore{}
	if err := r.Client.Get(ctx, req.NamespacedName, rs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if rs.Status.Phase.Done() {
		return ctrl.Result{}, r.release(ctx, rs)
	}
	if managed, _, err := manages(ctx, r.Scope, rs.Namespace); err != nil || !managed {
		if err == nil && !rs.DeletionTimestamp.IsZero() {
			// The operator holds no rights there to follow the Job.
			log.FromContext(ctx).Info("restore let go unfinished: its namespace is not provisioned", "restore", rs.Name)
			return ctrl.Result{}, r.release(ctx, rs)
		}
		// The cluster's status says why; the restore waits for its namespace.
		return ctrl.Result{RequeueAfter: outOfScopeRetry}, err
	}
	if err := r.hold(ctx, rs); err != nil {
		return ctrl.Result{}, err
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("cluster", rs.Spec.ClusterName))
	o, ops, err := r.observe(ctx, rs)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := restore.Decide(o)
	if d.CreateJob {
		d = r.claim(o, ops)
	}
	wasVerifying := rs.Status.Step == v1alpha1.RestoreStepVerifying
	if err := r.writeStatus(ctx, rs, d.Status); err != nil {
		if d.CreateJob { // not recorded: the start did not happen
			r.Operations.Release(day2.ClusterOf(o.Cluster), day2.RestoreOp(rs).Ref)
		}
		return ctrl.Result{}, err
	}
	if d.CreateBackup {
		if err := r.createBackup(ctx, rs); err != nil {
			return ctrl.Result{}, err
		}
	}
	if d.CreateJob { // the decision is recorded: the only pass that creates its Job
		if d, err = r.createJob(ctx, rs, o.Cluster, d); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.restartPods(ctx, rs, d.RestartPods); err != nil {
		return ctrl.Result{}, err
	}
	r.tell(ctx, rs, o)
	r.tellIgnored(rs, o, wasVerifying)
	if d.Release {
		return ctrl.Result{}, r.release(ctx, rs)
	}
	return dueAfter(d.Requeue), nil
}

// hold puts the finalizer on a restore that has not ended, before it can
// start (a restore being deleted cannot take one, and starts nothing).
func (r *OpenBaoRestoreReconciler) hold(ctx context.Context, rs *v1alpha1.OpenBaoRestore) error {
	if !rs.DeletionTimestamp.IsZero() || controllerutil.ContainsFinalizer(rs, v1alpha1.RestoreFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(rs.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(rs, v1alpha1.RestoreFinalizer)
	if err := r.Client.Patch(ctx, rs, patch); err != nil {
		return fmt.Errorf("add finalizer %s: %w", v1alpha1.RestoreFinalizer, err)
	}
	return nil
}

// release removes the finalizer of a restore that has ended (or that the
// operator can no longer follow); optimistic locking makes a stale cache
// fail the removal instead of releasing a restore that is still running.
func (r *OpenBaoRestoreReconciler) release(ctx context.Context, rs *v1alpha1.OpenBaoRestore) error {
	if !controllerutil.ContainsFinalizer(rs, v1alpha1.RestoreFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(rs.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(rs, v1alpha1.RestoreFinalizer)
	if err := r.Client.Patch(ctx, rs, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer %s: %w", v1alpha1.RestoreFinalizer, err)
	}
	return nil
}

// claim records the start in the Day-2 registry, deciding again in the
// same step: another reconciler may have started an operation in the way
// since the preflight read the registry, and then the restore is held.
func (r *OpenBaoRestoreReconciler) claim(o restore.Observed, ops day2.Observation) restore.Decision {
	if v := r.Operations.Start(day2.ClusterOf(o.Cluster), day2.RestoreOp(o.Restore), ops); !v.OK() {
		o.Preflight = restore.Check{Reason: v.Reason, Message: v.Message}
	}
	return restore.Decide(o)
}

// observe gathers what the restore's step needs, and, for one that has
// not started, what the cache shows of the cluster's Day-2 operations.
func (r *OpenBaoRestoreReconciler) observe(ctx context.Context, rs *v1alpha1.OpenBaoRestore) (restore.Observed, day2.Observation, error) {
	o := restore.Observed{Now: r.Clock.Now(), Restore: rs, Deleting: !rs.DeletionTimestamp.IsZero()}
	var ops day2.Observation
	c := &v1alpha1.OpenBaoCluster{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: rs.Namespace, Name: rs.Spec.ClusterName}, c)
	switch {
	case apierrors.IsNotFound(err):
		return o, ops, nil
	case err != nil:
		return o, ops, fmt.Errorf("read OpenBaoCluster %s: %w", rs.Spec.ClusterName, err)
	}
	o.Cluster = c
	switch {
	case rs.Status.JobName == "":
		if o.Preflight, ops, err = r.preflight(ctx, c, rs); err == nil && rs.WantsPreRestoreSnapshot() {
			o.PreRestore, err = r.observeBackup(ctx, rs)
		}
	case rs.Status.Step == v1alpha1.RestoreStepVerifying:
		if !o.Deleting { // a restore deleted while verifying ends without asking them
			o.Servers = r.observeServers(ctx, c)
		}
	default:
		o.Job, err = r.observeJob(ctx, rs)
	}
	return o, ops, err
}

func (r *OpenBaoRestoreReconciler) preflight(ctx context.Context, c *v1alpha1.OpenBaoCluster,
	rs *v1alpha1.OpenBaoRestore) (restore.Check, day2.Observation, error) {
	if refused, err := managedReferences(ctx, r.APIReader, r.Client, c); err != nil || len(refused) > 0 {
		return restore.Check{Permanent: true, Reason: decide.ReasonManagedSecretReferenced,
			Message: "OpenBaoCluster " + c.Name + ": " + refusalMessage(refused)}, day2.Observation{}, err
	}
	if errs := r.ImagePolicy.CheckCluster(c); len(errs) > 0 {
		return restore.Check{Permanent: true, Reason: v1alpha1.ReasonImageNotAllowed,
			Message: "OpenBaoCluster " + c.Name + ": " + errs.ToAggregate().Error()}, day2.Observation{}, nil
	}
	if _, err := pinExecutorImage(ctx, r.ImageVerifier, r.PlatformVerification, r.APIReader, c); err != nil {
		return restore.Check{Permanent: !imageverify.Retryable(err), Reason: v1alpha1.ReasonImageVerificationFailed,
			Message: "OpenBaoCluster " + c.Name + ": " + err.Error()}, day2.Observation{}, nil
	}
	ops, err := observeOperations(ctx, r.Client, c, nil)
	if err != nil {
		return restore.Check{}, ops, err
	}
	lock := r.Operations.Check(day2.ClusterOf(c), day2.RestoreOp(rs), ops)
	return restore.Preflight(restore.PreflightInput{Cluster: c, Restore: rs, Lock: lock}), ops, nil
}

func (r *OpenBaoRestoreReconciler) observeJob(ctx context.Context, rs *v1alpha1.OpenBaoRestore) (*restore.Job, error) {
	job := &batchv1.Job{}
	key := types.NamespacedName{Namespace: rs.Namespace, Name: rs.Status.JobName}
	err := r.Client.Get(ctx, key, job)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		err = r.APIReader.Get(ctx, key, job) // the cache may not have seen it yet
	}
	if apierrors.IsNotFound(err) {
		left, err := r.podsLeft(ctx, rs)
		return &restore.Job{PodsLeft: left}, err
	}
	if err != nil {
		return nil, fmt.Errorf("read Job %s: %w", rs.Status.JobName, err)
	}
	out := &restore.Job{Found: true, Owned: metav1.IsControlledBy(job, rs)}
	out.Succeeded, out.Failed = jobEnded(job)
	if !out.Succeeded && !out.Failed {
		return executorSucceeded(ctx, r.Client, job, out)
	}
	for _, cond := range job.Status.Conditions {
		if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
			out.FailureMessage = cond.Reason + ": " + cond.Message
		}
	}
	out.Report, out.ReportRead, err = jobReport(ctx, r.Client, job, out.Succeeded)
	return out, err
}

// executorSucceeded reads the restore's success from its pod, a second or
// more before the Job controller marks the Job Complete (it counts the
// pod, removes its tracking finalizer, then writes the condition), so that
// verification starts as soon as the install returned. Only a success:
// the executor exited 0 with a report of one, after OpenBao confirmed the
// install, and the Job runs no other pod (backoffLimit 0). A failure
// waits for the Job's own end, as does a report that cannot be read.
func executorSucceeded(ctx context.Context, reader client.Reader, job *batchv1.Job, out *restore.Job) (*restore.Job, error) {
	report, read, err := jobReport(ctx, reader, job, true)
	if err != nil || !read || report.Failed() {
		return out, err
	}
	out.Succeeded, out.Report, out.ReportRead = true, report, true
	return out, nil
}

// observeBackup reads the restore's pre-restore OpenBaoBackup.
func (r *OpenBaoRestoreReconciler) observeBackup(ctx context.Context, rs *v1alpha1.OpenBaoRestore) (*restore.Backup, error) {
	b := &v1alpha1.OpenBaoBackup{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: rs.Namespace, Name: rs.PreRestoreBackupName()}, b)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read OpenBaoBackup %s: %w", rs.PreRestoreBackupName(), err)
	}
	ours := b.Labels[v1alpha1.LabelRestore] == rs.Name && b.Labels[v1alpha1.LabelBackupTrigger] == v1alpha1.BackupTriggerPreRestore &&
		b.Spec.ClusterName == rs.Spec.ClusterName
	return &restore.Backup{Found: true, Ours: ours, Phase: b.Status.Phase, Key: b.Status.Key, Reason: b.Status.Reason,
		Message: b.Status.Message}, nil
}

// createBackup asks for the pre-restore snapshot recorded in status; the
// OpenBaoBackup reconciler takes it like any other backup.
func (r *OpenBaoRestoreReconciler) createBackup(ctx context.Context, rs *v1alpha1.OpenBaoRestore) error {
	b := &v1alpha1.OpenBaoBackup{
		ObjectMeta: metav1.ObjectMeta{Name: rs.Status.PreRestoreBackup, Namespace: rs.Namespace, Labels: map[string]string{
			v1alpha1.LabelCluster: rs.Spec.ClusterName, v1alpha1.LabelBackupTrigger: v1alpha1.BackupTriggerPreRestore,
			v1alpha1.LabelRestore: rs.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		}},
		Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: rs.Spec.ClusterName},
	}
	err := r.Client.Create(ctx, b)
	if apierrors.IsAlreadyExists(err) {
		return nil // the cache has not seen it yet
	}
	if err != nil {
		return fmt.Errorf("create OpenBaoBackup %s: %w", b.Name, err)
	}
	log.FromContext(ctx).Info("pre-restore snapshot requested", "backup", b.Name, "restore", rs.Name)
	r.Recorder.Eventf(rs, nil, corev1.EventTypeNormal, "PreRestoreSnapshot", "CreateBackup",
		"OpenBaoBackup %s takes a snapshot of %s before the restore", b.Name, rs.Spec.ClusterName)
	return nil
}

// observeServers asks the servers; a failure to ask is an observation
// (the decision waits), not an error of the pass.
func (r *OpenBaoRestoreReconciler) observeServers(ctx context.Context, c *v1alpha1.OpenBaoCluster) *restore.Servers {
	if r.Servers == nil {
		return &restore.Servers{Problem: "this operator cannot reach OpenBao"}
	}
	s, err := r.Servers.ObserveServers(ctx, c)
	if err != nil {
		return &restore.Servers{Problem: err.Error()}
	}
	return s
}

// createJob creates the Job of the decision just recorded in status, once.
// An error after which the Job may exist is returned, and the next pass
// follows the Job or finds it gone (OutcomeUnknown); a refusal by the API
// server, after which it cannot exist, takes the decision back.
func (r *OpenBaoRestoreReconciler) createJob(ctx context.Context, rs *v1alpha1.OpenBaoRestore, c *v1alpha1.OpenBaoCluster,
	d restore.Decision) (restore.Decision, error) {
	pinnedCluster, err := pinExecutorImage(ctx, r.ImageVerifier, r.PlatformVerification, r.APIReader, c)
	if err != nil {
		// No Job was made: the decision is taken back, as for a refusal.
		r.Operations.Release(day2.ClusterOf(c), day2.RestoreOp(rs).Ref)
		d = restore.JobNotCreated(rs.Status, "its executor image was not verified: "+err.Error())
		return d, r.writeStatus(ctx, rs, d.Status)
	}
	job := restore.JobFor(pinnedCluster, rs, r.OperatorImage, r.ProxyEnv)
	err = r.Client.Create(ctx, job)
	switch {
	case apierrors.IsAlreadyExists(err):
		return d, nil // the next pass checks whose it is
	case refused(err):
		r.Operations.Release(day2.ClusterOf(c), day2.RestoreOp(rs).Ref)
		d = restore.JobNotCreated(rs.Status, err.Error())
		return d, r.writeStatus(ctx, rs, d.Status)
	case err != nil:
		return d, fmt.Errorf("create Job %s: %w", job.Name, err)
	}
	log.FromContext(ctx).Info("restore Job created", "job", job.Name)
	r.Recorder.Eventf(rs, nil, corev1.EventTypeNormal, "RestoreStarted", "CreateJob", "Job %s restores a snapshot into %s", job.Name, c.Name)
	return d, nil
}

// refused says the API server answered a create with a refusal, so the
// object was not stored: a client error other than a timeout.
func refused(err error) bool {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return false
	}
	code := status.Status().Code
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout
}

// podsLeft names the pods of the restore's Job, read around the cache,
// that have not ended: a Job deleted mid-run may leave its pod running.
func (r *OpenBaoRestoreReconciler) podsLeft(ctx context.Context, rs *v1alpha1.OpenBaoRestore) ([]string, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.InNamespace(rs.Namespace), client.MatchingLabels{batchv1.JobNameLabel: rs.Status.JobName}); err != nil {
		return nil, fmt.Errorf("list the pods of Job %s: %w", rs.Status.JobName, err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p.Name)
		}
	}
	return out, nil
}

// restartPods deletes the server pods that trail the restored state; the
// StatefulSet starts them again, and they load it from Raft.
func (r *OpenBaoRestoreReconciler) restartPods(ctx context.Context, rs *v1alpha1.OpenBaoRestore, pods []string) error {
	for _, name := range pods {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name}}
		if err := r.Client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("restart pod %s after the restore: %w", name, err)
		}
		log.FromContext(ctx).Info("restarted a server that trailed the restored state", "audit", true,
			"event_type", "openbao.restore.pod_restarted", "pod", name, "restore", rs.Name)
		r.Recorder.Eventf(rs, nil, corev1.EventTypeNormal, "ServerRestarted", "RestartPod", "restarted %s: it trailed the restored state", name)
	}
	return nil
}

// writeStatus writes next when it differs, with the Complete, Ready and
// Stalled conditions.
func (r *OpenBaoRestoreReconciler) writeStatus(ctx context.Context, rs *v1alpha1.OpenBaoRestore, next v1alpha1.OpenBaoRestoreStatus) error {
	value := metav1.ConditionFalse
	if next.Phase == v1alpha1.RestoreSucceeded {
		value = metav1.ConditionTrue
	}
	if next.Reason != "" {
		meta.SetStatusCondition(&next.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionRestoreComplete, Status: value, Reason: next.Reason, Message: truncate(next.Message),
			ObservedGeneration: rs.Generation, LastTransitionTime: metav1.NewTime(r.Clock.Now()),
		})
	}
	oneShotConditions(&next.Conditions, rs.Generation, metav1.NewTime(r.Clock.Now()), next.Phase == v1alpha1.RestoreSucceeded,
		next.Phase == v1alpha1.RestoreFailed, string(next.Phase), next.Reason, next.Message)
	next.ObservedGeneration = rs.Generation
	next.Message = truncate(next.Message)
	if equality.Semantic.DeepEqual(&rs.Status, &next) {
		return nil
	}
	previous := rs.Status.DeepCopy()
	rs.Status = next
	if err := r.Client.Status().Update(ctx, rs); err != nil {
		rs.Status = *previous
		return fmt.Errorf("write the status of OpenBaoRestore %s: %w", rs.Name, err)
	}
	return nil
}
