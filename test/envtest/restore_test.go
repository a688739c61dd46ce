package envtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/restore"
)

// fakeServers plays OpenBao after a restore: each pod's lag, as set.
type fakeServers struct{ lag map[string]uint64 }

func (f *fakeServers) ObserveServers(context.Context, *v1alpha1.OpenBaoCluster) (*restore.Servers, error) {
	out := &restore.Servers{Replicas: len(f.lag), AutopilotHealthy: true}
	for pod, lag := range f.lag {
		out.Servers = append(out.Servers, restore.Server{Pod: pod, Answered: true, Initialized: true, Ready: true, Lag: lag, LagKnown: true})
	}
	return out, nil
}

type restoreRig struct {
	*backupRig
	rr      *controllers.OpenBaoRestoreReconciler
	servers *fakeServers
}

func newRestoreRig(t *testing.T, ns string) *restoreRig {
	rig := &restoreRig{backupRig: newBackupRig(t, ns, "jwtAuthRole: backup\ntarget: {endpoint: \"https://s3.example.com\", bucket: backups}\n",
		at("2025-03-01T09:00:00Z")), servers: &fakeServers{lag: map[string]uint64{"bao-0": 0}}}
	rig.rr = &controllers.OpenBaoRestoreReconciler{Client: k8s, Recorder: rig.events, Clock: rig.clock,
		OperatorImage: "localhost/openbao-operator:test", Servers: rig.servers, Operations: rig.cr.Operations}
	return rig
}

func (r *restoreRig) createRestore(name string, spec v1alpha1.OpenBaoRestoreSpec) {
	r.t.Helper()
	rs := &v1alpha1.OpenBaoRestore{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns}, Spec: spec}
	if err := k8s.Create(context.Background(), rs); err != nil {
		r.t.Fatal(err)
	}
}

func (r *restoreRig) reconcileRestore(name string) ctrl.Result {
	r.t.Helper()
	res, err := r.rr.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: r.ns, Name: name}})
	if err != nil {
		r.t.Fatalf("restore pass of %s: %v", name, err)
	}
	return res
}

func (r *restoreRig) restore(name string) *v1alpha1.OpenBaoRestore {
	r.t.Helper()
	rs := &v1alpha1.OpenBaoRestore{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: name}, rs); err != nil {
		r.t.Fatal(err)
	}
	return rs
}

// TestARestoreRunsItsJobHoldsBackupsAndRolloutsAndRecordsItsOutcome drives
// the restore reconciler by hand against the real API server: the Job
// runs `restore` under the backup identity; while it runs a backup and a
// second restore wait and a due rollout is held; its report moves it to
// verification, where a server that trails the restored state is
// restarted; then it succeeds, with events, a metric and the condition,
// and the held backup starts.
func TestARestoreRunsItsJobHoldsBackupsAndRolloutsAndRecordsItsOutcome(t *testing.T) {
	rig := newRestoreRig(t, "restore-flow")
	ctx := context.Background()
	rig.createRestore("r1", v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao", Source: v1alpha1.RestoreSource{Latest: true}, PreRestoreSnapshot: ptr.To(false)})
	rig.reconcileRestore("r1")
	rs := rig.restore("r1")
	if rs.Status.Phase != v1alpha1.RestoreRunning || rs.Status.Step != v1alpha1.RestoreStepRestoring || rs.Status.JobName != "restore-bao-r1" {
		t.Fatalf("status %+v", rs.Status)
	}
	job := &batchv1.Job{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: rig.ns, Name: rs.Status.JobName}, job); err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	args := strings.Join(pod.Containers[0].Args, " ")
	if !metav1.IsControlledBy(job, rs) || pod.ServiceAccountName != "bao-restore-serviceaccount" || !strings.HasPrefix(args, "restore ") ||
		!strings.Contains(args, "--latest=true") || !strings.Contains(args, "--jwt-role=restore") || *pod.SecurityContext.RunAsNonRoot != true {
		t.Fatalf("job %s", mustYAML(t, job))
	}

	// While it runs: a backup and another restore wait, a due rollout is held.
	createBackup(t, rig.ns, "b1")
	rig.reconcileBackup("b1")
	if s := rig.backup("b1").Status; s.Phase != v1alpha1.BackupPending || s.Reason != "Waiting" || !strings.Contains(s.Message, "restore r1") {
		t.Fatalf("a backup beside a restore: %+v", s)
	}
	rig.createRestore("r2", v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao", Source: v1alpha1.RestoreSource{Key: "x.snap"}, PreRestoreSnapshot: ptr.To(false)})
	rig.reconcileRestore("r2")
	if s := rig.restore("r2").Status; s.Phase != v1alpha1.RestorePending || s.Reason != restore.ReasonRestoreInProgress {
		t.Fatalf("a second restore beside the first: %+v", s)
	}
	setUpdateRevision(t, rig.backupRig, "bao-new")
	rig.reconcile()
	if c := rig.get(); !meta.IsStatusConditionPresentAndEqual(c.Status.Conditions, v1alpha1.ConditionUpgrading, metav1.ConditionFalse) ||
		meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionUpgrading).Reason != v1alpha1.ReasonRestoreInProgress ||
		c.Status.Upgrade != nil || c.Status.Phase != v1alpha1.PhaseRestoring {
		t.Fatalf("a due rollout beside a restore: %+v", c.Status)
	}
	if r := meta.FindStatusCondition(rig.get().Status.Conditions, v1alpha1.ConditionReady); r == nil || r.Reason != v1alpha1.ReasonRestoreInProgress {
		t.Fatalf("a cluster a restore holds: Ready %+v", r)
	}

	rig.clock.Step(30 * time.Second)
	endJob(t, job, 0, backup.Report{Key: "restore-flow/bao/20250301T080000Z-00000001.snap", Size: 8, SHA256: strings.Repeat("ab", 32), RaftIndex: 42})
	rig.reconcileRestore("r1")
	if s := rig.restore("r1").Status; s.Step != v1alpha1.RestoreStepVerifying || s.RaftIndex != 42 || s.RestoredAt == nil {
		t.Fatalf("after the Job: %+v", s)
	}
	checkVerification(t, rig)

	activePod(t, rig.ns, "bao-0")           // the StatefulSet's new pod
	setUpdateRevision(t, rig.backupRig, "") // the rollout is out of this test's scope
	rig.reconcile()
	if p := rig.get().Status.Phase; p != v1alpha1.PhaseRunning {
		t.Fatalf("the cluster is %s after its restore ended, not Running", p)
	}
	rig.reconcileBackup("b1")
	if s := rig.backup("b1").Status; s.Phase != v1alpha1.BackupRunning {
		t.Fatalf("the held backup did not start after the restore: %+v", s)
	}
}

// checkVerification: bao-0 trails the restored state; after the grace it
// is restarted once; caught up, the restore succeeds.
func checkVerification(t *testing.T, rig *restoreRig) {
	t.Helper()
	ctx := context.Background()
	rig.servers.lag["bao-0"] = 7
	rig.reconcileRestore("r1")
	if s := rig.restore("r1").Status; s.Phase != v1alpha1.RestoreRunning || len(s.RestartedPods) != 0 {
		t.Fatalf("within the grace: %+v", s)
	}
	rig.clock.Step(restore.RestartGrace)
	rig.reconcileRestore("r1")
	if s := rig.restore("r1").Status; s.Reason != restore.ReasonRestartingServers || strings.Join(s.RestartedPods, ",") != "bao-0" {
		t.Fatalf("after the grace: %+v", s)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: rig.ns, Name: "bao-0"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the trailing server's pod was not deleted: %v", err)
	}
	rig.servers.lag["bao-0"] = 0
	rig.clock.Step(5 * time.Second)
	rig.reconcileRestore("r1")
	rs := rig.restore("r1")
	cond := meta.FindStatusCondition(rs.Status.Conditions, v1alpha1.ConditionRestoreComplete)
	if rs.Status.Phase != v1alpha1.RestoreSucceeded || rs.Status.Reason != restore.ReasonRestored || rs.Status.CompletionTime == nil ||
		cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != rs.Generation {
		t.Fatalf("status %+v", rs.Status)
	}
	// Ready, for kubectl wait and GitOps health checks, says the same.
	if ready := meta.FindStatusCondition(rs.Status.Conditions, v1alpha1.ConditionReady); ready == nil ||
		ready.Status != metav1.ConditionTrue || ready.Reason != restore.ReasonRestored || rs.Status.ObservedGeneration != rs.Generation {
		t.Fatalf("a restored restore is not Ready: %+v", rs.Status.Conditions)
	}
	if metric(t, "openbao_restore_phase", rig.ns) != 2 {
		t.Error("openbao_restore_phase is not 2 (succeeded)")
	}
	if events := rig.drainEvents(); !strings.Contains(events, "RestoreSucceeded") || !strings.Contains(events, "ServerRestarted") {
		t.Errorf("events:\n%s", events)
	}
}

// setUpdateRevision plays the StatefulSet controller: after a template
// change the current revision is one the pod does not run, which makes a
// rollout due; "" makes none due.
func setUpdateRevision(t *testing.T, rig *backupRig, revision string) {
	t.Helper()
	ctx := context.Background()
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: rig.ns, Name: "bao"}, sts); err != nil {
		t.Fatal(err)
	}
	sts.Status.ObservedGeneration, sts.Status.UpdateRevision = sts.Generation, revision
	if err := k8s.Status().Update(ctx, sts); err != nil {
		t.Fatal(err)
	}
}

// TestARestoreRefusedByOpenBaoFailsSayingNothingChanged: the executor's
// SealMismatch ends the restore Failed with its message, a Warning event
// and a False Complete condition.
func TestARestoreRefusedByOpenBaoFailsSayingNothingChanged(t *testing.T) {
	rig := newRestoreRig(t, "restore-refused")
	rig.createRestore("r1", v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao", Source: v1alpha1.RestoreSource{Key: "team-b/other/x.snap"}, PreRestoreSnapshot: ptr.To(false)})
	rig.reconcileRestore("r1")
	job := &batchv1.Job{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: rig.ns, Name: "restore-bao-r1"}, job); err != nil {
		t.Fatal(err)
	}
	endJob(t, job, 1, backup.Report{Reason: restore.ReasonSealMismatch, Error: restore.SealMismatchMessage})
	rig.reconcileRestore("r1")
	rs := rig.restore("r1")
	cond := meta.FindStatusCondition(rs.Status.Conditions, v1alpha1.ConditionRestoreComplete)
	if rs.Status.Phase != v1alpha1.RestoreFailed || rs.Status.Reason != restore.ReasonSealMismatch ||
		!strings.Contains(rs.Status.Message, "Nothing was changed") || cond == nil || cond.Status != metav1.ConditionFalse {
		t.Fatalf("status %+v", rs.Status)
	}
	// Not Ready, and Stalled: kstatus reads a failed restore as Failed.
	ready := meta.FindStatusCondition(rs.Status.Conditions, v1alpha1.ConditionReady)
	stalled := meta.FindStatusCondition(rs.Status.Conditions, v1alpha1.ConditionStalled)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != restore.ReasonSealMismatch ||
		stalled == nil || stalled.Status != metav1.ConditionTrue {
		t.Fatalf("a failed restore: %+v", rs.Status.Conditions)
	}
	if events := rig.drainEvents(); !strings.Contains(events, "Warning RestoreFailed") {
		t.Errorf("events:\n%s", events)
	}
}

// TestInvalidRestoresAreRejectedNamingTheField checks the admission rules.
func TestInvalidRestoresAreRejectedNamingTheField(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "invalid-restores")
	for i, tc := range []struct{ name, spec, field, phrase string }{
		{"neither key nor latest", `{clusterName: bao, source: {}}`, "spec.source", "set exactly one of source.key, source.latest: true and source.bootstrap: true"},
		{"latest: false alone", `{clusterName: bao, source: {latest: false}}`, "spec.source", "set exactly one of source.key, source.latest: true and source.bootstrap: true"},
		{"both key and latest", `{clusterName: bao, source: {key: a.snap, latest: true}}`, "spec.source", "set exactly one of source.key, source.latest: true and source.bootstrap: true"},
		{"latest and bootstrap", `{clusterName: bao, source: {latest: true, bootstrap: true}}`, "spec.source", "set exactly one of source.key, source.latest: true and source.bootstrap: true"},
		{"a digest that is not 64 hex digits", `{clusterName: bao, source: {latest: true}, expectedSHA256: ABC}`, "spec.expectedSHA256", "should match"},
		{"a key climbing up", `{clusterName: bao, source: {key: "a/../b.snap"}}`, "spec.source.key", "without . or .. segments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := rawCluster(t, "invalid-restores", "metadata: {name: r-"+itoa(i)+"}\nspec: "+tc.spec)
			u.SetKind(v1alpha1.RestoreKind)
			err := k8s.Create(ctx, u)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.phrase) {
				t.Fatalf("create: got %v, want Invalid naming %s with %q", err, tc.field, tc.phrase)
			}
		})
	}
}

// TestDeletingARunningRestoreKeepsItsHoldsUntilTheJobHasEnded: a restore
// deleted while its Job may be posting the snapshot stays (its finalizer)
// and keeps a backup waiting; once the Job has ended it goes, and the
// backup starts.
func TestDeletingARunningRestoreKeepsItsHoldsUntilTheJobHasEnded(t *testing.T) {
	rig := newRestoreRig(t, "restore-deleted")
	ctx := context.Background()
	rig.createRestore("r1", v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao", Source: v1alpha1.RestoreSource{Latest: true}, PreRestoreSnapshot: ptr.To(false)})
	rig.reconcileRestore("r1")
	rs := rig.restore("r1")
	if rs.Status.JobName == "" || !controllerutil.ContainsFinalizer(rs, v1alpha1.RestoreFinalizer) {
		t.Fatalf("a started restore without its Job or finalizer: %v %+v", rs.Finalizers, rs.Status)
	}
	job := &batchv1.Job{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: rig.ns, Name: rs.Status.JobName}, job); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, rs); err != nil {
		t.Fatal(err)
	}
	rig.reconcileRestore("r1")
	rs = rig.restore("r1")
	if rs.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(rs, v1alpha1.RestoreFinalizer) || rs.Status.Reason != restore.ReasonAwaitingOutcome {
		t.Fatalf("deleted mid-restore: finalizers %v, status %+v", rs.Finalizers, rs.Status)
	}
	createBackup(t, rig.ns, "b1")
	rig.reconcileBackup("b1")
	if s := rig.backup("b1").Status; s.Phase != v1alpha1.BackupPending || !strings.Contains(s.Message, "restore r1") {
		t.Fatalf("a backup beside a deleted restore whose Job runs: %+v", s)
	}

	endJob(t, job, 0, backup.Report{Key: "restore-deleted/bao/20250301T080000Z-00000001.snap", Size: 8, SHA256: strings.Repeat("ab", 32), RaftIndex: 42})
	rig.reconcileRestore("r1")
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(rs), &v1alpha1.OpenBaoRestore{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the deleted restore stayed after its Job ended: %v", err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}); err != nil {
		t.Fatalf("the Job: %v", err)
	}
	rig.reconcileBackup("b1")
	if s := rig.backup("b1").Status; s.Phase != v1alpha1.BackupRunning {
		t.Fatalf("the backup did not start once the deleted restore went: %+v", s)
	}
}

// TestARestoreWhoseJobIsDeletedMidRunNeverCreatesItAgain injects the
// fault: the executor Job is deleted while it runs. While a pod it left
// still runs the restore waits; then it fails saying the outcome is
// unknown, and no pass creates a second Job that would post the snapshot
// again. The Job the API server accepted runs one pod, once.
func TestARestoreWhoseJobIsDeletedMidRunNeverCreatesItAgain(t *testing.T) {
	rig := newRestoreRig(t, "restore-job-deleted")
	ctx := context.Background()
	rig.createRestore("r1", v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao", Source: v1alpha1.RestoreSource{Latest: true}, PreRestoreSnapshot: ptr.To(false)})
	rig.reconcileRestore("r1")
	key := client.ObjectKey{Namespace: rig.ns, Name: "restore-bao-r1"}
	job := &batchv1.Job{}
	if err := k8s.Get(ctx, key, job); err != nil {
		t.Fatal(err)
	}
	if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 || job.Spec.PodFailurePolicy == nil ||
		job.Spec.PodFailurePolicy.Rules[0].Action != batchv1.PodFailurePolicyActionFailJob {
		t.Fatalf("the Job may run a second pod:\n%s", mustYAML(t, job.Spec))
	}
	// A pod of the Job, still running, and the Job deleted (no garbage
	// collector here: the pod stays, as it does until the collector runs).
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x1", Namespace: rig.ns,
		Labels:          map[string]string{batchv1.JobNameLabel: job.Name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: job.Spec.Template.Spec}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	rig.reconcileRestore("r1")
	if s := rig.restore("r1").Status; s.Phase != v1alpha1.RestoreRunning || !strings.Contains(s.Message, pod.Name) {
		t.Fatalf("a restore whose Job is gone but whose pod runs: %+v", s)
	}
	noJob(t, key)
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		rig.reconcileRestore("r1")
		noJob(t, key)
	}
	rs := rig.restore("r1")
	if s := rs.Status; s.Phase != v1alpha1.RestoreFailed || s.Reason != restore.ReasonOutcomeUnknown || !strings.Contains(s.Message, "Check the data") {
		t.Fatalf("a restore whose Job is gone: %+v", s)
	}
	if controllerutil.ContainsFinalizer(rs, v1alpha1.RestoreFinalizer) {
		t.Error("a restore that ended keeps its finalizer")
	}
	if events := rig.drainEvents(); !strings.Contains(events, "Warning RestoreFailed") {
		t.Errorf("events:\n%s", events)
	}
}

func noJob(t *testing.T, key client.ObjectKey) {
	t.Helper()
	if err := k8s.Get(context.Background(), key, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Job %s was created again: %v", key.Name, err)
	}
}

// TestARestoreTakesItsPreRestoreSnapshotFirst: by default (no
// spec.preRestoreSnapshot) the restore asks for an OpenBaoBackup of the
// cluster and creates no Job until that backup is stored; then it starts,
// with the snapshot's key in its status.
func TestARestoreTakesItsPreRestoreSnapshotFirst(t *testing.T) {
	rig := newRestoreRig(t, "restore-snapshot-first")
	ctx := context.Background()
	rig.createRestore("r1", v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao", Source: v1alpha1.RestoreSource{Latest: true}})
	rig.reconcileRestore("r1")
	rs := rig.restore("r1")
	name := rs.PreRestoreBackupName()
	if s := rs.Status; s.Phase != v1alpha1.RestorePending || s.Reason != restore.ReasonTakingPreRestoreSnapshot || s.PreRestoreBackup != name || s.JobName != "" {
		t.Fatalf("status %+v", s)
	}
	b := rig.backup(name)
	if b.Labels[v1alpha1.LabelBackupTrigger] != v1alpha1.BackupTriggerPreRestore || b.Labels[v1alpha1.LabelRestore] != "r1" || b.Spec.ClusterName != "bao" {
		t.Fatalf("pre-restore backup %+v", b.ObjectMeta)
	}
	rig.reconcileBackup(name)
	if s := rig.backup(name).Status; s.Phase != v1alpha1.BackupRunning {
		t.Fatalf("the pre-restore backup does not run beside its waiting restore: %+v", s)
	}
	rig.reconcileRestore("r1")
	if s := rig.restore("r1").Status; s.Phase != v1alpha1.RestorePending || s.Reason != restore.ReasonTakingPreRestoreSnapshot || s.JobName != "" {
		t.Fatalf("while the snapshot is taken: %+v", s)
	}
	noJob(t, client.ObjectKey{Namespace: rig.ns, Name: "restore-bao-r1"})

	rig.finishBackup(name, v1alpha1.BackupSucceeded)
	rig.reconcileRestore("r1")
	rs = rig.restore("r1")
	key := rig.backup(name).Status.Key
	if s := rs.Status; s.Phase != v1alpha1.RestoreRunning || s.PreRestoreKey != key || key == "" || !strings.Contains(s.Message, key) {
		t.Fatalf("once the snapshot is stored: %+v", s)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: rig.ns, Name: rs.Status.JobName}, &batchv1.Job{}); err != nil {
		t.Fatalf("the restore Job: %v", err)
	}
}
