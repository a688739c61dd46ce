package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/admission"
)

// TestAClusterNamingAnOperatorManagedSecretIsHeldWithNothingApplied: the
// webhook was away when these clusters were stored. One names another
// cluster's root token as its store credentials, one a Secret carrying
// the operator's label as the seal key to copy. The controller holds each
// Degraded (ManagedSecretReferenced, naming the field) and applies
// nothing: no child, no seal key copied.
func TestAClusterNamingAnOperatorManagedSecretIsHeldWithNothingApplied(t *testing.T) {
	ctx := context.Background()
	labelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "renamed-key", Namespace: managedNamespace,
		Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}},
		Data: map[string][]byte{"key": []byte("0123456789abcdef0123456789abcdef")}}
	if err := k8s.Create(ctx, labelled); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, spec, field, why string }{
		{"steal-token", `backup: {jwtAuthRole: backup, executorImage: "evil.example/exec:1", target: {endpoint: "https://s3.example.com", bucket: backups, credentialsSecretRef: {name: prod-root-token}}}`,
			"spec.backup.target.credentialsSecretRef", "ends in -root-token"},
		{"steal-key", `bootstrap: {fromBackup: {target: {endpoint: "https://s3.example.com", bucket: backups}, latest: true, unsealKeySecretRef: {name: renamed-key}}}`,
			"spec.bootstrap.fromBackup.unsealKeySecretRef", "carries app.kubernetes.io/managed-by=openbao-operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, managedNamespace, fmt.Sprintf("metadata: {name: %s}\nspec: {version: 2.4.0, %s}", tc.name, tc.spec))
			if err := k8s.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			eventually(t, wait, "Degraded ManagedSecretReferenced", func() error {
				latest := &v1alpha1.OpenBaoCluster{}
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), latest); err != nil {
					return err
				}
				d := findDegraded(latest)
				if d == nil || d.Status != metav1.ConditionTrue || d.Reason != admission.ReasonManagedSecretReferenced {
					return fmt.Errorf("Degraded %+v", d)
				}
				for _, want := range []string{tc.field, admission.RuleManagedSecret, tc.why} {
					if !strings.Contains(d.Message, want) {
						t.Fatalf("Degraded's message does not say %q: %s", want, d.Message)
					}
				}
				return nil
			})
			time.Sleep(time.Second) // a pass that would apply has had its chance
			children, err := childrenOf(ctx, managedNamespace, c.Name)
			if err != nil || len(children) != 0 {
				t.Errorf("children of a held cluster: %v %v", children, err)
			}
			for _, obj := range []client.Object{&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: c.StatefulSetName()}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.UnsealKeySecretName()}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.TLSCASecretName()}}} {
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: obj.GetName()}, obj); !apierrors.IsNotFound(err) {
					t.Errorf("%T %s exists for a held cluster (%v)", obj, obj.GetName(), err)
				}
			}
		})
	}
}

// TestABackupOfAClusterNamingAManagedSecretFailsWithoutAJob: the backup
// and restore controllers ask the same rule before they mount the
// cluster's store credentials into a Job.
func TestABackupOfAClusterNamingAManagedSecretFailsWithoutAJob(t *testing.T) {
	ctx := context.Background()
	ns := "refs-refused"
	createNamespace(t, ns)
	r := &controllers.OpenBaoBackupReconciler{Client: k8s, APIReader: k8s, Recorder: &events.FakeRecorder{},
		Clock: clocktesting.NewFakeClock(time.Now())}
	c := newCluster(t, ns, `metadata: {name: bao}
spec: {version: 2.4.0, backup: {jwtAuthRole: backup, executorImage: "evil.example/exec:1", target: {endpoint: "https://s3.example.com", bucket: backups, credentialsSecretRef: {name: prod-root-token}}}}`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "now", Namespace: ns}, Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: "bao"}}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)}); err != nil {
		t.Fatal(err)
	}
	rs := &v1alpha1.OpenBaoRestore{ObjectMeta: metav1.ObjectMeta{Name: "latest", Namespace: ns},
		Spec: v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao", Source: v1alpha1.RestoreSource{Latest: true}}}
	if err := k8s.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	rr := &controllers.OpenBaoRestoreReconciler{Client: k8s, APIReader: k8s, Recorder: &events.FakeRecorder{},
		Clock: clocktesting.NewFakeClock(time.Now())}
	if _, err := rr.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rs)}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
		t.Fatal(err)
	}
	if rs.Status.Phase != v1alpha1.RestoreFailed || rs.Status.Reason != admission.ReasonManagedSecretReferenced || rs.Status.JobName != "" ||
		!strings.Contains(rs.Status.Message, "spec.backup.target.credentialsSecretRef") {
		t.Errorf("restore status %+v, want Failed %s naming the field, no Job", rs.Status, admission.ReasonManagedSecretReferenced)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	if b.Status.Phase != v1alpha1.BackupFailed || b.Status.Reason != admission.ReasonManagedSecretReferenced || b.Status.JobName != "" ||
		!strings.Contains(b.Status.Message, "spec.backup.target.credentialsSecretRef") {
		t.Errorf("backup status %+v, want Failed %s naming the field, no Job", b.Status, admission.ReasonManagedSecretReferenced)
	}
	jobs := &batchv1.JobList{}
	if err := k8s.List(ctx, jobs, client.InNamespace(ns)); err != nil || len(jobs.Items) != 0 {
		t.Errorf("jobs %v %v", len(jobs.Items), err)
	}
}
