package envtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
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
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
	"github.com/openbao/operator/internal/podstate"
)

// TestStandardInitStoresTheTokenOnceThenScalesOut drives the reconciler
// against the real API server (the dry-run create and the Secret are real)
// with a fake OpenBao, playing kubelet for pod-0. sys/init is called once;
// the root token lands in its Secret and nowhere else; the next pass
// renders spec.replicas.
func TestStandardInitStoresTheTokenOnceThenScalesOut(t *testing.T) {
	var logged strings.Builder
	ctx := ctrl.LoggerInto(context.Background(), funcr.New(func(prefix, args string) {
		logged.WriteString(args + "\n")
	}, funcr.Options{Verbosity: 1}))
	createNamespace(t, "boot")
	c := newCluster(t, "boot", `
metadata: {name: boot}
spec: {version: 2.4.0, replicas: 3}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	const token = "s.ROOT-TOKEN-THAT-MUST-NOT-LEAK-7f3a"
	bao := &openbaofake.Client{
		HealthAnswer: openbao.Health{Initialized: false, Sealed: true},
		InitAnswer:   openbao.InitResult{RootToken: openbao.NewToken(token)},
	}
	recorder := events.NewFakeRecorder(100)
	r := reconcilerWith(t, bao, recorder)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	}

	reconcile() // renders one replica; pod-0 does not exist yet
	if got := stsReplicas(t, "boot", "boot"); got != 1 {
		t.Fatalf("before initialization the StatefulSet has %d replicas, want 1", got)
	}
	runningPod0(t, "boot", "boot-0")
	reconcile() // pod-0 runs, its labels are unknown: health, then sys/init
	reconcile() // initialized: the render scales out
	if n := bao.CallCount("Init"); n != 1 {
		t.Fatalf("sys/init called %d times, want 1", n)
	}
	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "boot", Name: c.RootTokenSecretName()}, secret); err != nil {
		t.Fatalf("root-token Secret: %v", err)
	}
	if string(secret.Data[bootstrap.RootTokenDataKey]) != token {
		t.Fatal("the root-token Secret does not hold the token sys/init returned")
	}
	if got := stsReplicas(t, "boot", "boot"); got != 3 {
		t.Fatalf("after initialization the StatefulSet has %d replicas, want 3", got)
	}
	reconcile() // nothing more to initialize
	if n := bao.CallCount("Init"); n != 1 {
		t.Fatalf("sys/init called again (%d calls)", n)
	}
	r.Client = staleStatusCache{k8s}
	reconcile() // a cache that lags the status write must not scale back to one
	if got := stsReplicas(t, "boot", "boot"); got != 3 {
		t.Fatalf("a pass that read a stale uninitialized status left %d replicas, want 3", got)
	}
	assertNoLeak(t, c, recorder, token)
	if n := strings.Count(logged.String(), `"event_type"="openbao.cluster.initialized"`); n != 1 ||
		!strings.Contains(logged.String(), `"audit"=true`) || strings.Contains(logged.String(), token) {
		t.Fatalf("want one audit line of the initialization and no token in the log, got %d in:\n%s", n, logged.String())
	}
	r.Client = k8s
	tokenSecretDeletedAndBack(t, c, secret, reconcile, bao, recorder)
}

// tokenSecretDeletedAndBack deletes the root-token Secret of an
// initialized cluster: OpenBaoInitialized must say so, with an Event, and
// nothing is initialized again; the Secret back, the condition says where
// the token is again.
func tokenSecretDeletedAndBack(t *testing.T, c *v1alpha1.OpenBaoCluster, secret *corev1.Secret, reconcile func(),
	bao *openbaofake.Client, recorder *events.FakeRecorder) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	reconcile()
	cond, err := condition(ctx, c, v1alpha1.ConditionOpenBaoInitialized)
	if err != nil || cond.Status != metav1.ConditionTrue || cond.Reason != bootstrap.ReasonRootTokenSecretMissing {
		t.Fatalf("OpenBaoInitialized %+v (%v) with the token Secret deleted, want True RootTokenSecretMissing", cond, err)
	}
	assertEvents(t, recorder, bootstrap.ReasonRootTokenSecretMissing)
	if n := bao.CallCount("Init"); n != 1 {
		t.Fatalf("sys/init called %d times, want 1", n)
	}
	back := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret.Name, Namespace: secret.Namespace, Labels: secret.Labels},
		Data: secret.Data}
	if err := k8s.Create(ctx, back); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if cond, err = condition(ctx, c, v1alpha1.ConditionOpenBaoInitialized); err != nil || cond.Reason != bootstrap.ReasonInitialized {
		t.Fatalf("OpenBaoInitialized %+v (%v) with the Secret back, want Initialized", cond, err)
	}
}

// staleStatusCache reads clusters as a lagging cache would just after the
// status write that marked them initialized.
type staleStatusCache struct{ client.Client }

func (s staleStatusCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := s.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if c, ok := obj.(*v1alpha1.OpenBaoCluster); ok {
		c.Status.Initialized = false
	}
	return nil
}

func runningPod0(t *testing.T, ns, name string) {
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
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: podstate.ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// reconcilerWith is a reconciler whose OpenBao client is bao.
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

// assertNoLeak fails when the token appears in the cluster's status, its
// conditions or any event the reconciler emitted.
func assertNoLeak(t *testing.T, c *v1alpha1.OpenBaoCluster, recorder *events.FakeRecorder, token string) {
	t.Helper()
	latest := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), latest); err != nil {
		t.Fatal(err)
	}
	statusYAML, _ := yaml.Marshal(latest.Status)
	if strings.Contains(string(statusYAML), token) {
		t.Fatal("the root token appears in the cluster's status")
	}
	if !latest.Status.Initialized {
		t.Error("status.initialized is false after initialization")
	}
	for {
		select {
		case e := <-recorder.Events:
			if strings.Contains(e, token) {
				t.Fatalf("the root token appears in an event: %q", e)
			}
		default:
			return
		}
	}
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
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	started := metav1.Now()
	c.Status.InitializationStarted = &started
	if err := k8s.Status().Update(ctx, c); err != nil {
		t.Fatal(err)
	}
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

// TestAClusterInitializedBySomeoneElseIsASecurityEvent: pod-0 answers
// initialized, yet this operator recorded no sys/init call and holds no
// token. Whoever got there first has the root token: the cluster stays
// uninitialized in status and at one server, Degraded with an Event, and
// sys/init is never called. A token stored by a person is the proof that
// turns it into an adoption.
func TestAClusterInitializedBySomeoneElseIsASecurityEvent(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "stolen")
	c := newCluster(t, "stolen", `
metadata: {name: boot}
spec: {version: 2.4.0, replicas: 3}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	runningPod0(t, "stolen", "boot-0")
	bao := &openbaofake.Client{HealthAnswer: openbao.Health{Initialized: true}}
	rec := events.NewFakeRecorder(20)
	r := reconcilerWith(t, bao, rec)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	for pass := 1; pass <= 2; pass++ {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
	}
	latest := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(ctx, req.NamespacedName, latest); err != nil {
		t.Fatal(err)
	}
	if d := findDegraded(latest); d == nil || d.Status != metav1.ConditionTrue || d.Reason != bootstrap.ReasonInitializedElsewhere {
		t.Fatalf("Degraded %+v, want True InitializedElsewhere", d)
	}
	if latest.Status.Initialized || stsReplicas(t, "stolen", "boot") != 1 || bao.CallCount("Init") != 0 {
		t.Fatalf("initialized %v, %d replicas, %d sys/init calls: want a held bootstrap",
			latest.Status.Initialized, stsReplicas(t, "stolen", "boot"), bao.CallCount("Init"))
	}
	assertEvents(t, rec, bootstrap.ReasonInitializedElsewhere)

	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "boot-root-token", Namespace: "stolen"},
		StringData: map[string]string{"token": "s.stored-by-a-person"}}
	if err := k8s.Create(ctx, token); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, req.NamespacedName, latest); err != nil {
		t.Fatal(err)
	}
	if !latest.Status.Initialized || stsReplicas(t, "stolen", "boot") != 3 {
		t.Fatalf("with the token stored: initialized %v, %d replicas; want adopted and scaled out",
			latest.Status.Initialized, stsReplicas(t, "stolen", "boot"))
	}
}

// TestThePassThatInitializesScalesOut: the chart renders from the status
// the pass builds, so the pass whose bootstrap step initializes the
// cluster applies spec.replicas itself, without waiting for another pass.
func TestThePassThatInitializesScalesOut(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "onepass")
	c := newCluster(t, "onepass", `
metadata: {name: boot}
spec: {version: 2.4.0, replicas: 3}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	bao := &openbaofake.Client{
		HealthAnswer: openbao.Health{Initialized: false, Sealed: true},
		InitAnswer:   openbao.InitResult{RootToken: openbao.NewToken("s.one-pass-token")},
	}
	r := reconcilerWith(t, bao, &events.FakeRecorder{})
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	runningPod0(t, "onepass", "boot-0")
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := bao.CallCount("Init"); n != 1 {
		t.Fatalf("sys/init called %d times in the second pass, want 1", n)
	}
	if got := stsReplicas(t, "onepass", "boot"); got != 3 {
		t.Fatalf("the pass that initialized the cluster left %d replicas, want 3", got)
	}
}
