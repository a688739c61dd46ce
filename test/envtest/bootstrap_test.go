package envtest_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
	"github.com/openbao/operator/internal/podstate"
)

func runningPod0(t *testing.T, ns, name string) { t.Helper(); runningPodAt(t, ns, name, "") }

// runningPodAt plays the kubelet for a pod whose container runs, at the
// address ip (none when empty).
func runningPodAt(t *testing.T, ns, name, ip string) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			"app.kubernetes.io/name": "openbao", "app.kubernetes.io/instance": "boot", v1alpha1.LabelCluster: "boot",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: podstate.ContainerName, Image: "openbao"}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	if ip != "" {
		pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: podstate.ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// reconcilerWith is a reconciler whose OpenBao client is bao: a fake, for
// states a real server cannot be brought to on cue (bootstrap_realbao_test.go
// has the paths a real one can).
func reconcilerWith(t *testing.T, bao *openbaofake.Client, rec recorder.EventRecorder) *controllers.OpenBaoClusterReconciler {
	t.Helper()
	r, err := newReconciler(k8s, k8s, rec)
	if err != nil {
		t.Fatal(err)
	}
	r.OpenBao = func(openbao.Options) (openbao.Client, error) { return bao, nil }
	return r
}

func stsReplicas(t *testing.T, ns, name string) int32 {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, sts); err != nil {
		t.Fatal(err)
	}
	return *sts.Spec.Replicas
}

// TestAnInitCutShortStaysReported: the operator recorded the start of
// sys/init and stopped before storing the token; OpenBao finished. Every
// later pass must report RootTokenLost (phase Degraded), mark the cluster
// initialized so it scales out, and never call sys/init again.
func TestAnInitCutShortStaysReported(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "lost")
	c := newCluster(t, "lost", `
metadata: {name: boot}
spec: {version: 2.4.0, replicas: 3}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	started := metav1.Now()
	c.Status.InitializationStarted = &started
	if err := k8s.Status().Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	runningPod0(t, "lost", "boot-0")
	pod := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "lost", Name: "boot-0"}, pod); err != nil {
		t.Fatal(err)
	}
	pod.Labels[podstate.LabelInitialized] = "true"
	if err := k8s.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	bao := &openbaofake.Client{HealthAnswer: openbao.Health{Initialized: true}}
	r := reconcilerWith(t, bao, &events.FakeRecorder{})
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	for pass := 1; pass <= 3; pass++ {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
		latest := &v1alpha1.OpenBaoCluster{}
		if err := k8s.Get(ctx, req.NamespacedName, latest); err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(latest.Status.Conditions, v1alpha1.ConditionOpenBaoInitialized)
		if cond == nil || cond.Reason != bootstrap.ReasonRootTokenLost || latest.Status.Phase != v1alpha1.PhaseDegraded {
			t.Fatalf("pass %d: condition %+v phase %s, want RootTokenLost and Degraded", pass, cond, latest.Status.Phase)
		}
		if !latest.Status.Initialized {
			t.Fatalf("pass %d: not marked initialized", pass)
		}
	}
	if n := bao.CallCount("Init"); n != 0 {
		t.Fatalf("sys/init called %d times on an initialized cluster", n)
	}
}
