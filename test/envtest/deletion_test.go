package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/secrets"
)

// TestDeletionPolicyDecidesWhatOutlivesTheCluster deletes a cluster under
// each policy and checks, once the finalizer let it go, what is left: the
// policy in force at deletion applies to every child at once, also when it
// was switched after the Secrets were created.
func TestDeletionPolicyDecidesWhatOutlivesTheCluster(t *testing.T) {
	for _, tc := range []struct {
		name, created, atDeletion string
		volume, ca, key, token    bool
	}{
		{"retain", "Retain", "Retain", true, true, true, true},
		{"deletepvcs", "DeletePVCs", "DeletePVCs", false, false, true, true},
		{"deleteall", "DeleteAll", "DeleteAll", false, false, false, false},
		{"switched-to-retain", "DeleteAll", "Retain", true, true, true, true},
		{"switched-to-deleteall", "Retain", "DeleteAll", false, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := "del-" + tc.name
			createNamespace(t, ns)
			c := newCluster(t, ns, fmt.Sprintf("metadata: {name: bao}\nspec: {version: 2.4.0, deletionPolicy: %s}\n", tc.created))
			if err := k8s.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			r, err := newReconciler(k8s, k8s, &events.FakeRecorder{})
			if err != nil {
				t.Fatal(err)
			}
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
			if _, err := r.Reconcile(ctx, req); err != nil {
				t.Fatal(err)
			}
			createVolumeClaim(t, ns, "data-bao-0")
			latest := &v1alpha1.OpenBaoCluster{}
			if err := k8s.Get(ctx, req.NamespacedName, latest); err != nil {
				t.Fatal(err)
			}
			token := secrets.New(latest, secrets.Spec{Name: latest.RootTokenSecretName(), Lifetime: secrets.WithData,
				Data: map[string][]byte{"token": []byte("s.x")}})
			if err := k8s.Create(ctx, token); err != nil {
				t.Fatal(err)
			}
			if tc.atDeletion != tc.created {
				latest.Spec.DeletionPolicy = v1alpha1.DeletionPolicy(tc.atDeletion)
				if err := k8s.Update(ctx, latest); err != nil {
					t.Fatal(err)
				}
			}
			if err := k8s.Delete(ctx, latest); err != nil {
				t.Fatal(err)
			}
			for pass := 0; pass < 3; pass++ {
				if _, err := r.Reconcile(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			if err := k8s.Get(ctx, req.NamespacedName, &v1alpha1.OpenBaoCluster{}); !apierrors.IsNotFound(err) {
				t.Fatalf("the cluster is still there after the finalizer ran: %v", err)
			}
			for what, want := range map[string]bool{
				"PersistentVolumeClaim/data-bao-0": tc.volume, "Secret/bao-tls-ca": tc.ca,
				"Secret/bao-unseal-key": tc.key, "Secret/bao-root-token": tc.token,
			} {
				if got := exists(t, ns, what); got != want {
					t.Errorf("%s exists=%v, want %v under %s", what, got, want, tc.atDeletion)
				}
			}
		})
	}
}

func createVolumeClaim(t *testing.T, ns, name string) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			v1alpha1.LabelAppName: v1alpha1.AppName, v1alpha1.LabelAppInstance: "bao"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := k8s.Create(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
}

// exists says whether "Kind/name" is in ns and not being deleted.
func exists(t *testing.T, ns, what string) bool {
	t.Helper()
	var obj client.Object
	var name string
	if _, err := fmt.Sscanf(what, "PersistentVolumeClaim/%s", &name); err == nil {
		obj = &corev1.PersistentVolumeClaim{}
	} else if _, err := fmt.Sscanf(what, "Secret/%s", &name); err == nil {
		obj = &corev1.Secret{}
	} else {
		t.Fatalf("unknown object %s", what)
	}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return obj.GetDeletionTimestamp() == nil
}

// TestDeletionNeverTakesAVolumeThatMayBeAnothers injects what the claim
// labels cannot tell apart: a Helm-installed OpenBao release "bao" (its
// StatefulSet, and its claim data-bao-0 labelled app.kubernetes.io/name=
// openbao, app.kubernetes.io/instance=bao, as the OpenBao chart labels
// them), and a claim data-bao-0 kept from before the cluster existed.
// A cluster "bao" under DeleteAll, created beside them and deleted,
// deletes neither claim and says why in an event; only once a cluster
// has adopted the older claim's data (status.initialized) does the claim
// go with it. Before, both claims were deleted: deleting an OpenBaoCluster
// was a way to delete volumes its author could not delete.
func TestDeletionNeverTakesAVolumeThatMayBeAnothers(t *testing.T) {
	for _, tc := range []struct {
		name               string
		helmRelease, older bool
		initialized        bool
		kept               bool
	}{
		{"another release's StatefulSet of the same name", true, false, true, true},
		{"a claim older than a cluster that never adopted it", false, true, false, true},
		{"a claim older than a cluster that adopted its data", false, true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := "del-other-" + strings.ReplaceAll(strings.Fields(tc.name)[1], "'", "")
			if tc.initialized && tc.older {
				ns += "-adopted"
			}
			createNamespace(t, ns)
			if tc.helmRelease {
				createHelmStatefulSet(t, ns, "bao")
			}
			if tc.older {
				createVolumeClaim(t, ns, "data-bao-0")
				time.Sleep(1100 * time.Millisecond) // creation timestamps have whole seconds
			}
			c := newCluster(t, ns, "metadata: {name: bao}\nspec: {version: 2.4.0, deletionPolicy: DeleteAll}\n")
			if err := k8s.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			rec := events.NewFakeRecorder(100)
			r, err := newReconciler(k8s, k8s, rec)
			if err != nil {
				t.Fatal(err)
			}
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
			if _, err := r.Reconcile(ctx, req); err != nil {
				t.Fatal(err)
			}
			if !tc.older {
				createVolumeClaim(t, ns, "data-bao-0")
			}
			if tc.initialized {
				latest := &v1alpha1.OpenBaoCluster{}
				if err := k8s.Get(ctx, req.NamespacedName, latest); err != nil {
					t.Fatal(err)
				}
				latest.Status.Initialized = true
				if err := k8s.Status().Update(ctx, latest); err != nil {
					t.Fatal(err)
				}
			}
			if err := k8s.Delete(ctx, c); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := r.Reconcile(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			if err := k8s.Get(ctx, req.NamespacedName, &v1alpha1.OpenBaoCluster{}); !apierrors.IsNotFound(err) {
				t.Fatalf("the cluster is still there after the finalizer ran: %v", err)
			}
			if got := exists(t, ns, "PersistentVolumeClaim/data-bao-0"); got != tc.kept {
				t.Fatalf("data-bao-0 exists=%v, want %v", got, tc.kept)
			}
			if tc.kept {
				assertEvents(t, rec, "VolumeKept")
			}
		})
	}
}

// createHelmStatefulSet plays a Helm-installed OpenBao release: its
// StatefulSet carries the same pod selector labels as the operator's.
func createHelmStatefulSet(t *testing.T, ns, release string) {
	t.Helper()
	labels := map[string]string{v1alpha1.LabelAppName: v1alpha1.AppName, v1alpha1.LabelAppInstance: release}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: release, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "openbao", Image: "openbao/openbao:2.4.0"}}},
			},
		},
	}
	if err := k8s.Create(context.Background(), sts); err != nil {
		t.Fatal(err)
	}
}
