package envtest_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/objectstore/memstore"
	"github.com/openbao/operator/internal/podstate"
)

// The backup tests drive both reconcilers by hand against the real API
// server with a fake clock, a fake store, and the test playing the kubelet
// and the Job controller.

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// backupRig holds one cluster's reconcilers under a fake clock.
type backupRig struct {
	t       *testing.T
	ns      string
	cluster *v1alpha1.OpenBaoCluster
	clock   *clocktesting.FakeClock
	events  *events.FakeRecorder
	cr      *controllers.OpenBaoClusterReconciler
	br      *controllers.OpenBaoBackupReconciler
	store   *memstore.Store
}

// newBackupRig creates a one-server cluster and makes it Running: the
// status says initialized with the operator's identity set up, pod-0 is the ready active server, the
// StatefulSet counts it ready.
func newBackupRig(t *testing.T, ns, backupSpec string, now time.Time) *backupRig {
	t.Helper()
	ctx := context.Background()
	createNamespace(t, ns)
	rig := &backupRig{t: t, ns: ns, clock: clocktesting.NewFakeClock(now), events: events.NewFakeRecorder(200), store: memstore.New()}
	rig.cluster = newCluster(t, ns, "metadata: {name: bao}\nspec:\n  version: 2.4.0\n  replicas: 1\n  backup:\n"+indent(backupSpec, "    "))
	if err := k8s.Create(ctx, rig.cluster); err != nil {
		t.Fatal(err)
	}
	rig.cluster.Status.Initialized, rig.cluster.Status.IdentityConfigured, rig.cluster.Status.IdentityRevision = true, true, identity.Revision
	if err := k8s.Status().Update(ctx, rig.cluster); err != nil {
		t.Fatal(err)
	}
	var err error
	if rig.cr, err = newReconciler(k8s, k8s, rig.events); err != nil {
		t.Fatal(err)
	}
	rig.cr.Clock = rig.clock
	rig.br = &controllers.OpenBaoBackupReconciler{Client: k8s, APIReader: k8s, Recorder: rig.events, Clock: rig.clock,
		OperatorImage: "localhost/openbao-operator:test", Operations: rig.cr.Operations,
		NewStore: func(context.Context, objectstore.Config) (objectstore.Store, error) { return rig.store, nil }}
	rig.reconcile() // renders the StatefulSet
	activePod(t, ns, "bao-0")
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, sts); err != nil {
		t.Fatal(err)
	}
	sts.Status.Replicas, sts.Status.ReadyReplicas = 1, 1
	if err := k8s.Status().Update(ctx, sts); err != nil {
		t.Fatal(err)
	}
	rig.reconcile()
	if p := rig.get().Status.Phase; p != v1alpha1.PhaseRunning {
		t.Fatalf("the cluster is %s, not Running", p)
	}
	return rig
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// activePod plays kubelet and OpenBao's service registration for a ready
// active server.
func activePod(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			"app.kubernetes.io/name": "openbao", "app.kubernetes.io/instance": "bao", v1alpha1.LabelCluster: "bao",
			podstate.LabelActive: "true", podstate.LabelInitialized: "true", podstate.LabelSealed: "false",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: podstate.ContainerName, Image: "openbao"}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podstate.ContainerName, Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

func (r *backupRig) reconcile() ctrl.Result {
	r.t.Helper()
	res, err := r.cr.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(r.cluster)})
	if err != nil {
		r.t.Fatalf("cluster pass: %v", err)
	}
	return res
}

func (r *backupRig) reconcileBackup(name string) ctrl.Result {
	r.t.Helper()
	res, err := r.br.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: r.ns, Name: name}})
	if err != nil {
		r.t.Fatalf("backup pass of %s: %v", name, err)
	}
	return res
}

func (r *backupRig) get() *v1alpha1.OpenBaoCluster {
	r.t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(r.cluster), c); err != nil {
		r.t.Fatal(err)
	}
	return c
}

func (r *backupRig) backups() []v1alpha1.OpenBaoBackup {
	r.t.Helper()
	list := &v1alpha1.OpenBaoBackupList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(r.ns)); err != nil {
		r.t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

func (r *backupRig) backup(name string) *v1alpha1.OpenBaoBackup {
	r.t.Helper()
	b := &v1alpha1.OpenBaoBackup{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: name}, b); err != nil {
		r.t.Fatal(err)
	}
	return b
}

func names(bs []v1alpha1.OpenBaoBackup) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Name)
	}
	return out
}

// drainEvents returns the events recorded so far.
func (r *backupRig) drainEvents() string {
	var out []string
	for {
		select {
		case e := <-r.events.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// finishBackup marks a backup as the OpenBaoBackup reconciler would once its
// Job ended.
func (r *backupRig) finishBackup(name string, phase v1alpha1.BackupPhase) {
	r.t.Helper()
	b := r.backup(name)
	now := metav1.NewMicroTime(r.clock.Now())
	b.Status.Phase, b.Status.CompletionTime = phase, &now
	b.Status.Key = backup.ObjectKey(backup.ObjectPrefix("", r.ns, "bao"), r.clock.Now(), "00000000")
	if err := k8s.Status().Update(context.Background(), b); err != nil {
		r.t.Fatal(err)
	}
}

const scheduledSpec = `
schedule: "*/5 * * * *"
jwtAuthRole: backup
target: {endpoint: "https://s3.example.com", bucket: backups}
`

// TestTheScheduleTakesEachSlotOnceUnderAFakeClock drives the cluster
// reconciler through a clock: the first slot after the schedule is read,
// never twice (also after a restart), a slot skipped while a backup runs
// or an upgrade is under way (with an event saying why), and slots missed
// while the operator was down taken as one catch-up.
func TestTheScheduleTakesEachSlotOnceUnderAFakeClock(t *testing.T) {
	rig := newBackupRig(t, "backup-schedule", scheduledSpec, at("2025-01-01T10:02:30Z"))
	st := rig.get().Status.Backup
	if st == nil || !st.NextScheduledBackup.Time.Equal(at("2025-01-01T10:05:00Z")) || len(rig.backups()) != 0 {
		t.Fatalf("after the first pass: status %+v, backups %v", st, names(rig.backups()))
	}
	rig.clock.SetTime(at("2025-01-01T10:04:00Z"))
	if res := rig.reconcile(); res.RequeueAfter <= 0 || res.RequeueAfter > time.Minute {
		t.Errorf("a minute before the slot the pass comes back after %s", res.RequeueAfter)
	}

	rig.clock.SetTime(at("2025-01-01T10:05:00Z"))
	rig.reconcile()
	if got := names(rig.backups()); strings.Join(got, ",") != "bao-20250101-100500" {
		t.Fatalf("at the slot: backups %v", got)
	}
	b := rig.backup("bao-20250101-100500")
	if b.Labels[v1alpha1.LabelBackupTrigger] != "schedule" || b.Spec.ClusterName != "bao" {
		t.Errorf("scheduled backup %+v", b.ObjectMeta)
	}
	c := rig.get()
	if !c.Status.Backup.NextScheduledBackup.Time.Equal(at("2025-01-01T10:10:00Z")) ||
		!meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionBackingUp) {
		t.Errorf("status %+v, conditions %v", c.Status.Backup, c.Status.Conditions)
	}
	if ev := rig.drainEvents(); !strings.Contains(ev, "BackupScheduled") {
		t.Errorf("events: %s", ev)
	}

	// A restarted operator: new reconcilers, no memory, the same status.
	rig.cr, _ = newReconciler(k8s, k8s, rig.events)
	rig.cr.Clock = rig.clock
	rig.clock.SetTime(at("2025-01-01T10:05:40Z"))
	rig.reconcile()
	if n := len(rig.backups()); n != 1 {
		t.Fatalf("after a restart within the slot: %d backups", n)
	}

	rig.clock.SetTime(at("2025-01-01T10:10:00Z"))
	rig.reconcile()
	if ev := rig.drainEvents(); len(rig.backups()) != 1 || !strings.Contains(ev, "BackupSkipped") || !strings.Contains(ev, backup.ReasonBackupInProgress) {
		t.Fatalf("a slot while a backup runs: backups %v, events %s", names(rig.backups()), ev)
	}

	// The operator is down from 10:12 to 12:47: one backup, for 12:45.
	rig.finishBackup("bao-20250101-100500", v1alpha1.BackupSucceeded)
	rig.clock.SetTime(at("2025-01-01T12:47:10Z"))
	rig.reconcile()
	if got := names(rig.backups()); strings.Join(got, ",") != "bao-20250101-100500,bao-20250101-124500" {
		t.Fatalf("after the outage: %v", got)
	}
	if ev := rig.drainEvents(); !strings.Contains(ev, "30 earlier slots") {
		t.Errorf("the catch-up does not say what it stands for: %s", ev)
	}
	if c := rig.get(); c.Status.Backup.LastBackupName != "bao-20250101-100500" ||
		!c.Status.Backup.NextScheduledBackup.Time.Equal(at("2025-01-01T12:50:00Z")) {
		t.Errorf("status %+v", c.Status.Backup)
	}

	// An upgrade under way skips the slot.
	rig.finishBackup("bao-20250101-124500", v1alpha1.BackupSucceeded)
	c = rig.get()
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionUpgrading, Status: metav1.ConditionTrue,
		Reason: "RollingServers", Message: "test", ObservedGeneration: c.Generation})
	if err := k8s.Status().Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	rig.clock.SetTime(at("2025-01-01T12:50:00Z"))
	rig.reconcile()
	if ev := rig.drainEvents(); len(rig.backups()) != 2 || !strings.Contains(ev, backup.ReasonUpgradeInProgress) {
		t.Fatalf("a slot during an upgrade: %v, events %s", names(rig.backups()), ev)
	}
}

// TestTheScheduleKeepsItsHistoryLimit: finished scheduled backups beyond
// historyLimit are deleted, oldest first; on-demand ones are the user's.
func TestTheScheduleKeepsItsHistoryLimit(t *testing.T) {
	rig := newBackupRig(t, "backup-history", scheduledSpec+"historyLimit: 2\n", at("2025-01-01T10:00:30Z"))
	manual := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "manual", Namespace: rig.ns},
		Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: "bao"}}
	if err := k8s.Create(context.Background(), manual); err != nil {
		t.Fatal(err)
	}
	rig.clock.SetTime(at("2025-01-01T10:00:59Z"))
	rig.finishBackup("manual", v1alpha1.BackupFailed)
	for i := 1; i <= 4; i++ {
		rig.clock.SetTime(at("2025-01-01T10:00:00Z").Add(time.Duration(5*i) * time.Minute))
		rig.reconcile()
		name := "bao-" + rig.clock.Now().UTC().Format("20060102-150405")
		rig.finishBackup(name, v1alpha1.BackupSucceeded)
	}
	rig.reconcile()
	if got := strings.Join(names(rig.backups()), ","); got != "bao-20250101-101500,bao-20250101-102000,manual" {
		t.Fatalf("history %s", got)
	}
}

func TestTheReportedJobRunsTheExecutorAndItsReportEndsTheBackup(t *testing.T) {
	rig := newBackupRig(t, "backup-ondemand", `
tokenSecretRef: {name: backup-token}
target:
  endpoint: "https://s3.example.com"
  bucket: backups
  credentialsSecretRef: {name: store-credentials}
retention: {maxCount: 2}
`, at("2025-02-01T08:00:00Z"))
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "store-credentials", Namespace: rig.ns},
		StringData: map[string]string{backup.AccessKeyIDKey: "AKID", backup.SecretAccessKeyKey: "SECRET-NEVER-SHOWN"}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	prefix := backup.ObjectPrefix("", rig.ns, "bao")
	createBackup(t, rig.ns, "manual-1")
	rig.reconcileBackup("manual-1")
	b := rig.backup("manual-1")
	// The operator created the provenance key before the Job; old
	// snapshots are signed with it, as its executor signed them.
	prover := provenanceOf(t, rig.ns, "bao")
	for i, age := range []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour} {
		rig.store.Add(prover.SignedObjectKey(prefix, rig.clock.Now().Add(-age), fmt.Sprintf("0000000%d", i)), []byte("old"), rig.clock.Now())
	}
	other := backup.ObjectKey(backup.ObjectPrefix("", rig.ns, "other"), rig.clock.Now().Add(-time.Hour), "00000009")
	rig.store.Add(other, []byte("another cluster's"), rig.clock.Now())
	// The fault retention guards against: a far-future name planted under
	// the prefix, which must neither take a place among maxCount nor go.
	// (The 99991231T000000Z-xxxxxxxx.snap, and one with a hex id,
	// which the executor's name form admits.)
	planted, plantedHex := prefix+"99991231T000000Z-xxxxxxxx.snap", prefix+"99991231T000000Z-0badf00d.snap"
	rig.store.Add(planted, []byte("planted"), rig.clock.Now())
	rig.store.Add(plantedHex, []byte("planted"), rig.clock.Now())
	if b.Status.Phase != v1alpha1.BackupRunning || b.Status.JobName != "backup-bao-20250201-080000" {
		t.Fatalf("status %+v", b.Status)
	}
	job := &batchv1.Job{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: rig.ns, Name: b.Status.JobName}, job); err != nil {
		t.Fatal(err)
	}
	if aud := projectedTokenAudience(job); aud != "" {
		t.Errorf("a backup Job with the user's token also mounts a ServiceAccount token for %q", aud)
	}
	if !metav1.IsControlledBy(job, b) || job.Spec.Template.Spec.ServiceAccountName != "bao-backup-serviceaccount" ||
		job.Spec.Template.Spec.Containers[0].Image != "localhost/openbao-operator:test" {
		t.Errorf("job %s", mustYAML(t, job))
	}
	createBackup(t, rig.ns, "manual-2") // waits for the first
	rig.reconcileBackup("manual-2")
	if s := rig.backup("manual-2").Status; s.Phase != v1alpha1.BackupPending || s.JobName != "" {
		t.Fatalf("a second backup of the cluster started beside the first: %+v", s)
	}

	key := prover.SignedObjectKey(prefix, rig.clock.Now(), "abcdef01")
	rig.store.Add(key, []byte("snapshot"), rig.clock.Now())
	rig.clock.Step(7 * time.Second)
	const canary = "2025-02-01T08:00:00.123456789Z"
	endJob(t, job, 0, backup.Report{Key: key, Size: 8, SHA256: strings.Repeat("ab", 32), Duration: "6.5s", RaftIndex: 42, Canary: canary})
	rig.reconcileBackup("manual-1")
	b = rig.backup("manual-1")
	if b.Status.Phase != v1alpha1.BackupSucceeded || b.Status.Key != key || b.Status.Size != 8 || b.Status.Duration.Duration != 6500*time.Millisecond ||
		b.Status.Canary != canary {
		t.Fatalf("status %+v", b.Status)
	}
	want := []string{other, prover.SignedObjectKey(prefix, at("2025-02-01T07:00:00Z"), "00000000"), key, planted, plantedHex}
	sort.Strings(want)
	if left := rig.store.Keys(); strings.Join(left, ",") != strings.Join(want, ",") {
		t.Errorf("after retention (maxCount 2) the store holds %v", left)
	}
	if !strings.Contains(b.Status.Message, "ignored 2 object(s)") || !strings.Contains(b.Status.Message, plantedHex) {
		t.Errorf("the backup's message does not report the planted object: %q", b.Status.Message)
	}
	rig.reconcile()
	st := rig.get().Status.Backup
	if st.LastBackupKey != key || st.LastBackupSize != 8 || st.ConsecutiveFailures != 0 || metric(t, "openbao_backup_success_total", rig.ns) != 1 ||
		metric(t, "openbao_backup_last_success_timestamp", rig.ns) != float64(rig.clock.Now().Unix()) {
		t.Errorf("cluster status %+v", st)
	}
	checkFailureAndRecovery(t, rig, prefix)
	if text := rig.drainEvents() + string(mustYAML(t, rig.get().Status)) + string(mustYAML(t, rig.backups())); strings.Contains(text, "SECRET-NEVER-SHOWN") {
		t.Error("the store's secret shows in events or status")
	}
}

// checkFailureAndRecovery: the waiting backup runs and fails; the cluster
// counts one failure; a third succeeds and the count is back to zero.
func checkFailureAndRecovery(t *testing.T, rig *backupRig, prefix string) {
	t.Helper()
	ctx := context.Background()
	rig.reconcileBackup("manual-2")
	b := rig.backup("manual-2")
	job := &batchv1.Job{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: rig.ns, Name: b.Status.JobName}, job); err != nil {
		t.Fatalf("the waiting backup did not start: %v (%+v)", err, b.Status)
	}
	rig.clock.Step(20 * time.Second)
	endJob(t, job, 1, backup.Report{Reason: "StoreFailed", Error: "object store stat: connection refused", Duration: "12s"})
	rig.reconcileBackup("manual-2")
	if s := rig.backup("manual-2").Status; s.Phase != v1alpha1.BackupFailed || s.Reason != "StoreFailed" {
		t.Fatalf("status %+v", s)
	}
	rig.reconcile()
	if st := rig.get().Status.Backup; st.ConsecutiveFailures != 1 || !strings.Contains(st.LastFailureReason, "connection refused") ||
		metric(t, "openbao_backup_failure_total", rig.ns) != 1 {
		t.Fatalf("after a failure: %+v", st)
	}
	rig.clock.Step(time.Minute)
	createBackup(t, rig.ns, "manual-3")
	rig.reconcileBackup("manual-3")
	b = rig.backup("manual-3")
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: rig.ns, Name: b.Status.JobName}, job); err != nil {
		t.Fatal(err)
	}
	key := backup.ObjectKey(prefix, rig.clock.Now(), "abcdef02")
	endJob(t, job, 0, backup.Report{Key: key, Size: 9, SHA256: strings.Repeat("cd", 32), Duration: "5s",
		CanaryError: "writing openbao-operator/canary was refused (HTTP 403)"})
	rig.reconcileBackup("manual-3")
	if s := rig.backup("manual-3").Status; s.Phase != v1alpha1.BackupSucceeded || s.Canary != "" ||
		!strings.Contains(s.Message, "no canary: writing openbao-operator/canary was refused (HTTP 403)") {
		t.Fatalf("a backup without a canary: %+v", s)
	}
	rig.reconcile()
	if st := rig.get().Status.Backup; st.ConsecutiveFailures != 0 || st.LastBackupKey != key {
		t.Fatalf("after recovering: %+v", st)
	}
}

func createBackup(t *testing.T, ns, name string) {
	t.Helper()
	b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: "bao"}}
	if err := k8s.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// endJob plays the Job controller and the kubelet: the executor's pod
// ended with the report as its termination message, and the Job with it.
func endJob(t *testing.T, job *batchv1.Job, exitCode int32, report backup.Report) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x1", Namespace: job.Namespace, Labels: map[string]string{
			batchv1.JobNameLabel: job.Name, v1alpha1.LabelCluster: "bao", v1alpha1.LabelComponent: v1alpha1.ComponentBackup},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: job.Spec.Template.Spec,
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	if exitCode != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: backup.ExecutorName, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Message: string(report.Encode()), FinishedAt: metav1.Now()}}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	cond := batchv1.JobComplete
	if exitCode != 0 {
		cond = batchv1.JobFailed
	}
	now := metav1.Now()
	job.Status.StartTime = &now
	job.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	if exitCode != 0 {
		failure := batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: now,
			Reason: "PodFailurePolicy", Message: "the executor failed"}
		job.Status.Conditions[0].Reason, job.Status.Conditions[0].Message = failure.Reason, failure.Message
		job.Status.Conditions = append([]batchv1.JobCondition{failure}, job.Status.Conditions...)
		job.Status.Failed = 1
	} else {
		job.Status.Conditions = append([]batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now}}, job.Status.Conditions...)
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &now
	}
	if err := k8s.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
}

// TestAnOnDemandBackupFailsFastWhenItCannotRun: no cluster, a cluster that
// is not Running or has no backup settings: the backup fails at once with
// the preflight's reason, and no Job is made.
func TestAnOnDemandBackupFailsFastWhenItCannotRun(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "backup-refused")
	r := &controllers.OpenBaoBackupReconciler{Client: k8s, APIReader: k8s, Recorder: &events.FakeRecorder{},
		Clock: clocktesting.NewFakeClock(time.Now())}
	initializing := newCluster(t, "backup-refused", "metadata: {name: bao}\nspec:\n  version: 2.4.0\n  backup:\n"+indent(scheduledSpec, "    "))
	plain := newCluster(t, "backup-refused", "metadata: {name: plain}\nspec: {version: 2.4.0}")
	for _, c := range []*v1alpha1.OpenBaoCluster{initializing, plain} {
		if err := k8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]struct{ cluster, reason string }{
		"b-missing": {"missing", backup.ReasonClusterNotFound},
		"b-init":    {"bao", backup.ReasonClusterNotRunning},
		"b-plain":   {"plain", backup.ReasonBackupNotConfigured},
	} {
		b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "backup-refused"}, Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: want.cluster}}
		if err := k8s.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)}); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			t.Fatal(err)
		}
		if b.Status.Phase != v1alpha1.BackupFailed || b.Status.Reason != want.reason || b.Status.JobName != "" || b.Status.CompletionTime == nil {
			t.Errorf("%s: %+v", name, b.Status)
		}
	}
	jobs := &batchv1.JobList{}
	if err := k8s.List(ctx, jobs, client.InNamespace("backup-refused")); err != nil || len(jobs.Items) != 0 {
		t.Errorf("jobs %v %v", len(jobs.Items), err)
	}
}

func mustYAML(t *testing.T, v any) []byte {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// metric reads a backup metric of the cluster bao in namespace ns.
func metric(t *testing.T, name, ns string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelsAre(m, ns, "bao") {
				if m.Counter != nil {
					return m.Counter.GetValue()
				}
				return m.Gauge.GetValue()
			}
		}
	}
	return -1
}

func labelsAre(m *dto.Metric, ns, name string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	return len(got) == 2 && got["namespace"] == ns && got["name"] == name
}

// provenanceOf reads the provenance key the operator created for cluster
// ns/name and checks it is the operator's, without an owner (it outlives
// the cluster, as its data does), and never rewritten.
func provenanceOf(t *testing.T, ns, name string) backup.Prover {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + v1alpha1.SuffixBackupProvenance}, s); err != nil {
		t.Fatalf("the provenance key: %v", err)
	}
	if s.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue || len(s.OwnerReferences) != 0 || s.Immutable == nil || !*s.Immutable ||
		len(s.Data[backup.ProvenanceDataKey]) != backup.ProvenanceKeyBytes {
		t.Fatalf("the provenance Secret: labels %v, owners %v, immutable %v, %d bytes", s.Labels, s.OwnerReferences, s.Immutable,
			len(s.Data[backup.ProvenanceDataKey]))
	}
	return backup.NewProver(s.Data[backup.ProvenanceDataKey], ns, name)
}

// TestABackupNeverAdoptsAProvenanceKeyItDidNotWrite: a Secret of the
// provenance key's name that the operator did not write (no managed-by
// label) is neither used nor replaced: the backup fails, naming it, and no
// Job mounts it.
func TestABackupNeverAdoptsAProvenanceKeyItDidNotWrite(t *testing.T) {
	rig := newBackupRig(t, "backup-foreign-key", scheduledSpec, at("2025-02-01T08:00:00Z"))
	ctx := context.Background()
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bao" + v1alpha1.SuffixBackupProvenance, Namespace: rig.ns},
		Data: map[string][]byte{backup.ProvenanceDataKey: []byte("0123456789abcdef0123456789abcdef")}}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	createBackup(t, rig.ns, "manual-1")
	rig.reconcileBackup("manual-1")
	b := rig.backup("manual-1")
	if b.Status.Phase != v1alpha1.BackupFailed || b.Status.Reason != controllers.ReasonProvenanceKeyNotAdopted ||
		!strings.Contains(b.Status.Message, foreign.Name) {
		t.Fatalf("status %+v", b.Status)
	}
	jobs := &batchv1.JobList{}
	if err := k8s.List(ctx, jobs, client.InNamespace(rig.ns)); err != nil || len(jobs.Items) != 0 {
		t.Errorf("jobs %d %v", len(jobs.Items), err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(foreign), foreign); err != nil || len(foreign.Labels) != 0 {
		t.Errorf("the foreign Secret was changed: %v %v", foreign.Labels, err)
	}
}

// projectedTokenAudience is the audience of the ServiceAccount token a
// Job's pod mounts, "" when it mounts none.
func projectedTokenAudience(job *batchv1.Job) string {
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil {
				return src.ServiceAccountToken.Audience
			}
		}
	}
	return ""
}

// TestABackupJobLogsInWithTheBackupRolesOwnAccountAndAudience: at identity
// revision 3 the backup Job runs under the backup ServiceAccount with a
// token for the backup role's own audience, which no other role accepts.
func TestABackupJobLogsInWithTheBackupRolesOwnAccountAndAudience(t *testing.T) {
	rig := newBackupRig(t, "backup-audience", "jwtAuthRole: backup\ntarget: {endpoint: \"https://s3.example.com\", bucket: backups}\n",
		at("2025-02-01T08:00:00Z"))
	createBackup(t, rig.ns, "manual-1")
	rig.reconcileBackup("manual-1")
	b := rig.backup("manual-1")
	job := &batchv1.Job{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: rig.ns, Name: b.Status.JobName}, job); err != nil {
		t.Fatalf("the backup's Job (status %+v): %v", b.Status, err)
	}
	if aud := projectedTokenAudience(job); aud != "openbao-operator:"+rig.ns+"/bao:backup" {
		t.Errorf("the backup Job's token is for audience %q, want the backup role's own", aud)
	}
	if sa := job.Spec.Template.Spec.ServiceAccountName; sa != "bao-backup-serviceaccount" {
		t.Errorf("the backup Job runs as %s", sa)
	}
}
