package envtest_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/internal/values"
)

// TestSelfInitRequestsLiveInASecretUntilInitialized: the requests may carry
// credentials, so they go to Secret <cluster>-self-init, never to the
// ConfigMap; the Secret exists before the StatefulSet (OpenBao reads the
// file only as it starts) and is deleted once OpenBao initialized itself.
func TestSelfInitRequestsLiveInASecretUntilInitialized(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "selfinit")
	c := newCluster(t, "selfinit", `
metadata: {name: boot}
spec:
  version: 2.4.0
  replicas: 3
  selfInit:
    enabled: true
    requests:
    - {name: userpass, operation: update, path: sys/auth/userpass, data: {type: userpass}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	r, err := newReconciler(k8s, k8s, &events.FakeRecorder{})
	if err != nil {
		t.Fatal(err)
	}
	bao := &openbaofake.Client{}
	r.OpenBao = func(openbao.Options) (openbao.Client, error) { return bao, nil }
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	secret, sts, cm := &corev1.Secret{}, &appsv1.StatefulSet{}, &corev1.ConfigMap{}
	for name, obj := range map[string]client.Object{c.SelfInitSecretName(): secret, c.StatefulSetName(): sts, c.ConfigMapName(): cm} {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "selfinit", Name: name}, obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if !strings.Contains(string(secret.Data[values.SelfInitFile]), "sys/auth/userpass") {
		t.Fatalf("Secret %s lacks the request:\n%s", secret.Name, secret.Data[values.SelfInitFile])
	}
	if _, ok := cm.Data[values.SelfInitFile]; ok {
		t.Fatalf("ConfigMap %s carries the self-init requests", cm.Name)
	}
	// etcd revisions order the writes: the Secret came first.
	if revision(t, secret) > revision(t, sts) {
		t.Fatal("the StatefulSet was written before the self-init Secret")
	}

	runningPod0(t, "selfinit", "boot-0")
	pod := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "selfinit", Name: "boot-0"}, pod); err != nil {
		t.Fatal(err)
	}
	pod.Labels[podstate.LabelInitialized] = "true" // OpenBao initialized itself
	bao.HealthAnswer = openbao.Health{Initialized: true}
	if err := k8s.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	for range 2 { // adopt, then render and tidy for an initialized cluster
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	err = k8s.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("Secret %s after initialization: %v, want it deleted", secret.Name, err)
	}
}

func revision(t *testing.T, obj client.Object) int64 {
	t.Helper()
	n, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q of %s: %v", obj.GetResourceVersion(), obj.GetName(), err)
	}
	return n
}
