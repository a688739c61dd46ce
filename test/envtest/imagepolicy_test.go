package envtest_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/imagepolicy"
)

// TestTheWebhookHoldsThePlatformsImagePolicy: under
// --allowed-image-repositories=quay.io/openbao, a tenant's cluster whose
// servers or backup executor would run an image from elsewhere is refused,
// naming the field and the policy, and nothing is stored; the default
// image (quay.io/openbao/openbao) and the operator's own executor pass.
func TestTheWebhookHoldsThePlatformsImagePolicy(t *testing.T) {
	policy, err := imagepolicy.Parse("quay.io/openbao")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := startWebhookServerWith(t, controllers.Platform{Images: policy})
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "images"}}); err != nil {
		t.Fatal(err)
	}
	refused := map[string]struct{ spec, field string }{
		"servers from another registry":  {`image: "evil.example/openbao"`, "spec.image"},
		"servers from a look-alike path": {`image: "quay.io/openbao-evil/openbao"`, "spec.image"},
		"an executor from elsewhere": {`backup: {jwtAuthRole: backup, executorImage: "evil.example/exec:1", ` +
			`target: {endpoint: "https://s3.example.com", bucket: backups}}`, "spec.backup.executorImage"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			cl := newCluster(t, "images", "metadata: {name: refused}\nspec: {version: 2.4.0, "+tc.spec+"}")
			err := c.Create(ctx, cl)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) ||
				!strings.Contains(err.Error(), "quay.io/openbao") || !strings.Contains(err.Error(), "--allowed-image-repositories") {
				t.Fatalf("create: %v, want Invalid naming %s and the policy", err, tc.field)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(cl), &v1alpha1.OpenBaoCluster{}); !apierrors.IsNotFound(err) {
				t.Fatalf("a refused cluster was stored: %v", err)
			}
		})
	}
	allowed := newCluster(t, "images", "metadata: {name: allowed}\nspec: {version: 2.4.0}")
	if err := c.Create(ctx, allowed); err != nil {
		t.Fatalf("the default image under the policy: %v", err)
	}
	allowed.Spec.Image = "evil.example/openbao"
	if err := c.Update(ctx, allowed); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.image") {
		t.Fatalf("an update to an image from elsewhere: %v, want Invalid on spec.image", err)
	}
}

// TestAClusterWithAnImageThePlatformDoesNotAllowIsHeld: a cluster stored
// while the webhook was away (or before the policy was tightened) is held
// by the controller: Degraded ImageNotAllowed naming the field, and
// nothing applied, no Secret written.
func TestAClusterWithAnImageThePlatformDoesNotAllowIsHeld(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "imagepolicy")
	c := newCluster(t, "imagepolicy", `
metadata: {name: bao}
spec: {version: 2.4.0, image: "evil.example/openbao"}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(20)
	r, err := newReconciler(k8s, k8s, rec)
	if err != nil {
		t.Fatal(err)
	}
	if r.ImagePolicy, err = imagepolicy.Parse("quay.io/openbao"); err != nil {
		t.Fatal(err)
	}
	reconcile := reconcileFunc(t, ctx, r, c)
	reconcile()
	d := findDegraded(latestCluster(t, c))
	if d == nil || d.Status != metav1.ConditionTrue || d.Reason != v1alpha1.ReasonImageNotAllowed ||
		!strings.Contains(d.Message, "spec.image") || !strings.Contains(d.Message, "evil.example/openbao") {
		t.Fatalf("Degraded %+v, want True ImageNotAllowed naming spec.image", d)
	}
	for _, obj := range []client.Object{&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: c.StatefulSetName()}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.TLSCASecretName()}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.UnsealKeySecretName()}}} {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "imagepolicy", Name: obj.GetName()}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s exists for a held cluster (%v)", obj, obj.GetName(), err)
		}
	}
	assertEvents(t, rec, v1alpha1.ReasonImageNotAllowed)

	latest := latestCluster(t, c)
	latest.Spec.Image = ""
	if err := k8s.Update(ctx, latest); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if got := stsReplicas(t, "imagepolicy", c.StatefulSetName()); got != 1 {
		t.Fatalf("the cluster back on an allowed image: %d replicas, want the bootstrap's 1", got)
	}
}
