package controllers

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/restore"
)

// TestARestoreSeesItsExecutorsSuccessBeforeTheJobsEnd: the executor's pod
// ended with exit 0 and a report of a success while the Job controller has
// not yet marked the Job Complete: the restore reads the success then (and
// verifies from there on); a failure, or a report it cannot read, waits
// for the Job's own end.
func TestARestoreSeesItsExecutorsSuccessBeforeTheJobsEnd(t *testing.T) {
	rs := &v1alpha1.OpenBaoRestore{ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: "ns", UID: "ru"},
		Status: v1alpha1.OpenBaoRestoreStatus{JobName: "bao-restore-r1", Step: v1alpha1.RestoreStepRestoring}}
	ok := backup.Report{Key: "p/ns/bao/k.snap", Size: 10, SHA256: strings.Repeat("a", 64), RaftIndex: 7}
	failedReport := backup.Report{Reason: restore.ReasonDigestMismatch, Error: "another digest"}
	for name, tc := range map[string]struct {
		exit    int32
		message string
		// forged: a pod with the Job's label that the Job does not control.
		forged bool
		want   bool
	}{
		"a success is read from the pod":                     {0, string(ok.Encode()), false, true},
		"a failure waits for the Job":                        {1, string(failedReport.Encode()), false, false},
		"an unreadable report waits for the Job":             {0, "not a report", false, false},
		"a pod with the Job's label but not its is not read": {0, string(ok.Encode()), true, false},
	} {
		t.Run(name, func(t *testing.T) {
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: rs.Status.JobName, Namespace: "ns", UID: "ju",
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, v1alpha1.GroupVersion.WithKind("OpenBaoRestore"))}}}
			var owners []metav1.OwnerReference
			if !tc.forged {
				owners = []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rs.Status.JobName + "-x", Namespace: "ns",
				Labels: map[string]string{batchv1.JobNameLabel: job.Name}, OwnerReferences: owners},
				Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: backup.ExecutorName,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: tc.exit, Message: tc.message}}}}}}
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			if err := v1alpha1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			r := &OpenBaoRestoreReconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(job, pod).Build()}
			j, err := r.observeJob(context.Background(), rs)
			if err != nil {
				t.Fatal(err)
			}
			if j.Succeeded != tc.want || j.Failed || (tc.want && (!j.ReportRead || j.Report.Key != ok.Key || j.Report.RaftIndex != 7)) {
				t.Fatalf("observed %+v, want succeeded %v", j, tc.want)
			}
			d := restore.Decide(restore.Observed{Restore: rs, Cluster: &v1alpha1.OpenBaoCluster{}, Job: j})
			if (d.Status.Step == v1alpha1.RestoreStepVerifying) != tc.want || d.Status.Phase.Done() {
				t.Fatalf("decided %s/%s %s", d.Status.Phase, d.Status.Step, d.Status.Reason)
			}
		})
	}
}

// TestARestoreWakesWhenItsExecutorEnds: the pod watch passes only the
// update in which the executor container ends, and maps it to the
// restore its labels name.
func TestARestoreWakesWhenItsExecutorEnds(t *testing.T) {
	pod := func(terminated bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "j-x", Namespace: "ns", Labels: map[string]string{
			v1alpha1.LabelComponent: v1alpha1.ComponentBackup, v1alpha1.LabelRestore: "r1", batchv1.JobNameLabel: "j"}}}
		s := corev1.ContainerStatus{Name: backup.ExecutorName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
		if terminated {
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{s}
		return p
	}
	for name, tc := range map[string]struct {
		before, after bool
		want          bool
	}{
		"the executor ends":          {false, true, true},
		"an ended executor's update": {true, true, false},
		"a running executor":         {false, false, false},
	} {
		if got := executorEnded.Update(ctrlevent.UpdateEvent{ObjectOld: pod(tc.before), ObjectNew: pod(tc.after)}); got != tc.want {
			t.Errorf("%s: passed %v", name, got)
		}
	}
	if reqs := restoreOfExecutorPod(context.Background(), pod(true)); len(reqs) != 1 || reqs[0].Name != "r1" || reqs[0].Namespace != "ns" {
		t.Errorf("mapped to %v", reqs)
	}
}
