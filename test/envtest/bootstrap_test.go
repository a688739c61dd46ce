package envtest_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
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

// TestAnInitCutShortIsResetOnce: the operator recorded the start of
// sys/init and stopped before storing the token; OpenBao finished. Nobody
// holds a credential, so the next operator records the reset, deletes
// pod-0 and its volume claim by UID (never a newer pod-0), keeps the
// cluster at one server meanwhile, and initializes the empty pod-0 that
// replaces them, once.
func TestAnInitCutShortIsResetOnce(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "lost")
	c := newCluster(t, "lost", `
metadata: {name: boot}
spec: {version: 2.4.0, replicas: 3}
`)
	createWithInitStarted(t, c)
	oldPod := initializedPod0(t, "lost")
	oldClaim := dataClaim(t, "lost", "data-boot-0")
	bao := &openbaofake.Client{HealthAnswer: openbao.Health{Initialized: true},
		InitAnswer: openbao.InitResult{RootToken: openbao.NewToken("s.RESET-TOKEN-3c9e")}, InitMarksInitialized: true}
	rec := events.NewFakeRecorder(50)
	r := reconcilerWith(t, bao, rec)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	reconcileCluster(t, r, req)

	latest := getCluster(t, req.NamespacedName)
	reset := latest.Status.BootstrapReset
	if reset == nil || reset.PodUID != oldPod.UID || reset.ClaimUID != oldClaim.UID ||
		reset.LostInitializationStarted == nil || latest.Status.InitializationStarted != nil {
		t.Fatalf("reset not recorded with the old pod, claim and init start: %+v (initializationStarted %v)", reset, latest.Status.InitializationStarted)
	}
	assertInitializedCondition(t, latest, bootstrap.ReasonResettingLostInitialization, false)
	assertEventWith(t, rec, bootstrap.ReasonResettingLostInitialization)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(oldPod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("old pod-0 not deleted: %v", err)
	}
	claim := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(oldClaim), claim); err != nil || claim.DeletionTimestamp == nil {
		t.Fatalf("old claim not being deleted: %v", err)
	}

	// The claim is still terminating: the reset goes on, nothing starts.
	newPod := initializedPod0(t, "lost")
	reconcileCluster(t, r, req)
	assertInitializedCondition(t, getCluster(t, req.NamespacedName), bootstrap.ReasonResettingLostInitialization, false)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(newPod), &corev1.Pod{}); err != nil {
		t.Fatalf("a pod-0 created after the reset was deleted: %v", err)
	}
	if n := bao.CallCount("Init"); n != 0 || stsReplicas(t, "lost", "boot") != 1 {
		t.Fatalf("sys/init called %d times, replicas %d, while the old volume exists", n, stsReplicas(t, "lost", "boot"))
	}

	// The claim goes (the StatefulSet's new pod-0 runs on a new one) and
	// OpenBao answers uninitialized: initialized again, once.
	claim.Finalizers = nil
	if err := k8s.Update(ctx, claim); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	bao.HealthAnswer = openbao.Health{Initialized: false, Sealed: true}
	setPodLabel(t, newPod, podstate.LabelInitialized, "false")
	for pass := 0; pass < 3; pass++ {
		reconcileCluster(t, r, req)
	}
	latest = getCluster(t, req.NamespacedName)
	if n := bao.CallCount("Init"); n != 1 || !latest.Status.Initialized || latest.Status.BootstrapReset == nil {
		t.Fatalf("after the reset: sys/init called %d times, initialized %v, reset %+v", n, latest.Status.Initialized, latest.Status.BootstrapReset)
	}
	assertInitializedCondition(t, latest, bootstrap.ReasonInitialized, true)
}

// createWithInitStarted creates the cluster with the start of a sys/init
// recorded, as an operator killed inside the call leaves it.
func createWithInitStarted(t *testing.T, c *v1alpha1.OpenBaoCluster) {
	t.Helper()
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	started := metav1.Now()
	c.Status.InitializationStarted = &started
	if err := k8s.Status().Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

func initializedPod0(t *testing.T, ns string) *corev1.Pod {
	t.Helper()
	runningPod0(t, ns, "boot-0")
	pod := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "boot-0"}, pod); err != nil {
		t.Fatal(err)
	}
	setPodLabel(t, pod, podstate.LabelInitialized, "true")
	return pod
}

func setPodLabel(t *testing.T, pod *corev1.Pod, key, value string) {
	t.Helper()
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Labels[key] = value
	if err := k8s.Patch(context.Background(), pod, patch); err != nil {
		t.Fatal(err)
	}
}

// dataClaim creates a volume claim as the StatefulSet would, with the
// protection finalizer the volume controller keeps while a pod uses it.
func dataClaim(t *testing.T, ns, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Finalizers: []string{"kubernetes.io/pvc-protection"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := k8s.Create(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	return claim
}

func reconcileCluster(t *testing.T, r *controllers.OpenBaoClusterReconciler, req ctrl.Request) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
}

func getCluster(t *testing.T, key client.ObjectKey) *v1alpha1.OpenBaoCluster {
	t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(context.Background(), key, c); err != nil {
		t.Fatal(err)
	}
	return c
}

func assertInitializedCondition(t *testing.T, c *v1alpha1.OpenBaoCluster, reason string, initialized bool) {
	t.Helper()
	cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionOpenBaoInitialized)
	if cond == nil || cond.Reason != reason || (cond.Status == metav1.ConditionTrue) != initialized || c.Status.Initialized != initialized {
		t.Fatalf("condition %+v, status.initialized %v; want reason %s, initialized %v", cond, c.Status.Initialized, reason, initialized)
	}
}

func assertEventWith(t *testing.T, rec *events.FakeRecorder, reason string) {
	t.Helper()
	for {
		select {
		case e := <-rec.Events:
			if strings.Contains(e, reason) {
				return
			}
		default:
			t.Fatalf("no Event with reason %s", reason)
		}
	}
}

// TestAnInitCutShortOfAClusterFormedFromABackup: a cluster of
// spec.bootstrap.fromBackup is initialized empty first, and restored only
// once status says it is initialized. An operator killed inside that
// sys/init (the e2e's drill copy, Degraded RetainedData for good) left
// empty data as any cluster's: it is reset once like any other. Once a
// restore of the cluster exists, its data may be a restored snapshot:
// never wiped, RetainedData says what to do.
func TestAnInitCutShortOfAClusterFormedFromABackup(t *testing.T) {
	for _, tc := range []struct {
		name, ns    string
		restoreMade bool
		want        string
	}{
		{"before any restore it is reset", "lost-fb", false, bootstrap.ReasonResettingLostInitialization},
		{"with a restore of it it is kept", "kept-fb", true, bootstrap.ReasonRetainedData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			createNamespace(t, tc.ns)
			seal := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "source-seal", Namespace: tc.ns},
				Data: map[string][]byte{"key": []byte(strings.Repeat("k", 32))}}
			if err := k8s.Create(ctx, seal); err != nil {
				t.Fatal(err)
			}
			c := newCluster(t, tc.ns, `
metadata: {name: boot}
spec:
  version: 2.4.0
  replicas: 3
  bootstrap: {fromBackup: {target: {endpoint: "https://s3.example.com", bucket: backups}, latest: true, unsealKeySecretRef: {name: source-seal}}}
`)
			createWithInitStarted(t, c)
			if tc.restoreMade {
				rs := &v1alpha1.OpenBaoRestore{ObjectMeta: metav1.ObjectMeta{Name: "boot-from-backup", Namespace: tc.ns},
					Spec: v1alpha1.OpenBaoRestoreSpec{ClusterName: "boot", Source: v1alpha1.RestoreSource{Bootstrap: true}}}
				if err := k8s.Create(ctx, rs); err != nil {
					t.Fatal(err)
				}
			}
			oldPod := initializedPod0(t, tc.ns)
			dataClaim(t, tc.ns, "data-boot-0")
			bao := &openbaofake.Client{HealthAnswer: openbao.Health{Initialized: true}}
			rec := events.NewFakeRecorder(50)
			r := reconcilerWith(t, bao, rec)
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
			reconcileCluster(t, r, req)

			latest := getCluster(t, req.NamespacedName)
			assertInitializedCondition(t, latest, tc.want, false)
			err := k8s.Get(ctx, client.ObjectKeyFromObject(oldPod), &corev1.Pod{})
			if tc.restoreMade {
				if err != nil || latest.Status.BootstrapReset != nil {
					t.Fatalf("pod-0 of a cluster with a restore was wiped: %v, reset %+v", err, latest.Status.BootstrapReset)
				}
				assertNoEventWith(t, rec, bootstrap.ReasonResettingLostInitialization, "StaleVolumeDeleted")
				return
			}
			if latest.Status.BootstrapReset == nil || !apierrors.IsNotFound(err) {
				t.Fatalf("the lost initialization was not reset: reset %+v, old pod-0 %v", latest.Status.BootstrapReset, err)
			}
		})
	}
}
