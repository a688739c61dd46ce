package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/day2"
	"github.com/openbao/operator/internal/identity"
)

// TestADrillCopyTheAPIRefusesIsShownInTheCondition: when the API server
// refuses the drill copy (here a CRD rule, as it once refused every copy
// of a cluster that revokes its root token), BackupVerified says so with
// the refusal, instead of a drill that never starts and says nothing.
func TestADrillCopyTheAPIRefusesIsShownInTheCondition(t *testing.T) {
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "ns", UID: "u1"},
		Spec: v1alpha1.OpenBaoClusterSpec{Backup: &v1alpha1.BackupSpec{Target: v1alpha1.BackupTarget{Bucket: "b"},
			Verify: &v1alpha1.BackupVerify{Enabled: true}}},
		Status: v1alpha1.OpenBaoClusterStatus{IdentityConfigured: true, IdentityRevision: identity.Revision,
			Backup: &v1alpha1.BackupStatus{LastBackupName: "b1"}}}
	b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: "ns"},
		Status: v1alpha1.OpenBaoBackupStatus{Phase: v1alpha1.BackupSucceeded, Key: "p/ns/bao/k.snap"}}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	refusal := apierrors.NewInvalid(schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: v1alpha1.Kind}, c.DrillCopyName(),
		field.ErrorList{field.Invalid(field.NewPath("spec"), "", "a rule the copy breaks")})
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(c, b).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if obj.GetLabels()[v1alpha1.LabelDrillOf] != "" {
				return refusal
			}
			return cl.Create(ctx, obj, opts...)
		},
	}).Build()
	r := &OpenBaoClusterReconciler{Client: cl, Operations: &day2.Registry{}}
	p := &pass{cluster: c, status: c.Status.DeepCopy(), now: time.Now()}
	if err := r.reconcileDrill(context.Background(), p); err == nil {
		t.Fatal("a refused copy passed as created")
	}
	cond := meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionBackupVerified)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != backup.ReasonDrillCopyRefused ||
		!strings.Contains(cond.Message, "a rule the copy breaks") {
		t.Fatalf("BackupVerified %+v, want False with %s and the API's answer", cond, backup.ReasonDrillCopyRefused)
	}
}
