package envtest_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/values"
)

// TestSelfInitRequestsLiveInASecretUntilInitialized: the requests may carry
// credentials, so they go to Secret <cluster>-self-init, never to the
// ConfigMap; the Secret exists before the StatefulSet (OpenBao reads the
// file only as it starts) and is deleted once OpenBao initialized itself.
// A real bao for pod-0 runs the requests from that Secret; the reconciler
// learns from its sys/health that it initialized itself and adopts it
// without calling sys/init.
func TestSelfInitRequestsLiveInASecretUntilInitialized(t *testing.T) {
	requireBao(t)
	t.Parallel() // mostly waiting on bao: elections, sys/init
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
	r, inits := realReconciler(t, &events.FakeRecorder{})
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

	startPod0(t, c) // bao reads the requests from the operator's Secret and runs them
	eventually(t, 30*time.Second, "self-initialized and adopted", func() error {
		if _, err := r.Reconcile(ctx, req); err != nil {
			return err
		}
		if st := latestCluster(t, c).Status; !st.Initialized || !st.SelfInitialized {
			return fmt.Errorf("status initialized %v, selfInitialized %v", st.Initialized, st.SelfInitialized)
		}
		return nil
	})
	if n := inits.Load(); n != 0 {
		t.Fatalf("sys/init called %d times on a self-initializing cluster", n)
	}
	cond, err := condition(ctx, c, v1alpha1.ConditionOpenBaoInitialized)
	if err != nil || cond.Reason != bootstrap.ReasonSelfInitialized {
		t.Fatalf("OpenBaoInitialized %+v (%v), want SelfInitialized", cond, err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil { // render and tidy for an initialized cluster
		t.Fatal(err)
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
