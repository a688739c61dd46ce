package envtest_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/autopilot"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/values"
)

// The bootstrap paths against a real bao 2.4.0 for pod-0 (realbao_test.go):
// what sys/health and sys/init answer, and the token they hand out, are
// OpenBao's own. Faults (a sys/init that fails or hangs) stay with the fake.

// TestStandardInitStoresTheTokenOnceThenScalesOut: sys/init is called once,
// by the pass that then scales out; the root token lands in its Secret and
// works, and reaches no status, Event or log line; the bootstrap autopilot
// values are in force; later passes, including one that reads a stale
// status, neither initialize again nor scale back.
func TestStandardInitStoresTheTokenOnceThenScalesOut(t *testing.T) {
	requireBao(t)
	t.Parallel() // mostly waiting on bao: elections, sys/init
	var logged strings.Builder
	ctx := ctrl.LoggerInto(context.Background(), funcr.New(func(prefix, args string) {
		logged.WriteString(args + "\n")
	}, funcr.Options{Verbosity: 1}))
	c := bootCluster(t, "boot")
	rec := events.NewFakeRecorder(100)
	r, inits := realReconciler(t, rec)
	reconcile := reconcileFunc(t, ctx, r, c)

	reconcile() // TLS, unseal key, config; one replica; pod-0 does not exist yet
	if got := stsReplicas(t, "boot", "boot"); got != 1 {
		t.Fatalf("before initialization the StatefulSet has %d replicas, want 1", got)
	}
	bao := startPod0(t, c)
	reconcile() // pod-0 runs, no labels: sys/health, sys/init, then the render scales out
	if n := inits.Load(); n != 1 {
		t.Fatalf("sys/init called %d times, want 1", n)
	}
	if got := stsReplicas(t, "boot", "boot"); got != 3 {
		t.Fatalf("the pass that initialized the cluster left %d replicas, want 3", got)
	}
	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "boot", Name: c.RootTokenSecretName()}, secret); err != nil {
		t.Fatalf("root-token Secret: %v", err)
	}
	token := string(secret.Data[bootstrap.RootTokenDataKey])
	assertRootTokenWorks(t, bao, token, c.Spec.Replicas)

	reconcile() // nothing more to initialize
	if n := inits.Load(); n != 1 {
		t.Fatalf("sys/init called again (%d calls)", n)
	}
	r.Client = staleStatusCache{k8s}
	reconcile() // a cache that lags the status write must not scale back to one
	if got := stsReplicas(t, "boot", "boot"); got != 3 {
		t.Fatalf("a pass that read a stale uninitialized status left %d replicas, want 3", got)
	}
	assertNoLeak(t, c, rec, token)
	if strings.Contains(bao.Log(), token) {
		t.Fatal("the root token appears in OpenBao's log")
	}
	if n := strings.Count(logged.String(), `"event_type"="openbao.cluster.initialized"`); n != 1 ||
		!strings.Contains(logged.String(), `"audit"=true`) || strings.Contains(logged.String(), token) {
		t.Fatalf("want one audit line of the initialization and no token in the log, got %d in:\n%s", n, logged.String())
	}
	r.Client = k8s
	tokenSecretDeletedAndBack(t, c, secret, reconcile, inits, rec)
}

// assertRootTokenWorks reads, with the stored token, what only the root
// token can read on a fresh cluster: the Raft configuration (pod-0 the one
// voter) and the autopilot values the operator set for the bootstrap.
func assertRootTokenWorks(t *testing.T, bao *podServer, token string, replicas int32) {
	t.Helper()
	ctx := context.Background()
	if !strings.HasPrefix(token, "s.") {
		t.Fatalf("the root-token Secret holds no OpenBao token (%d bytes)", len(token))
	}
	root := bao.client(t, openbao.NewToken(token))
	raft, err := root.RaftConfiguration(ctx)
	if err != nil || len(raft.Voters()) != 1 {
		t.Fatalf("Raft configuration with the stored token: voters %v, %v; want pod-0 alone", raft.Voters(), err)
	}
	got, err := root.AutopilotConfiguration(ctx)
	want := autopilot.For(replicas, values.AutopilotOverrides(bao.cluster), autopilot.PhaseBootstrap)
	if err != nil || autopilot.NeedsUpdate(got, want) {
		t.Fatalf("autopilot after init: %+v (%v), want the bootstrap values %+v", got, err, want)
	}
}

// TestAClusterInitializedBySomeoneElseIsASecurityEvent: pod-0 answers
// initialized, yet this operator recorded no sys/init call and holds no
// token. Whoever got there first has the root token: the cluster stays
// uninitialized in status and at one server, Degraded with an Event, and
// sys/init is never called. The token stored by a person is the proof that
// turns it into an adoption, and the Degraded condition goes.
func TestAClusterInitializedBySomeoneElseIsASecurityEvent(t *testing.T) {
	requireBao(t)
	t.Parallel() // mostly waiting on bao: elections, sys/init
	ctx := context.Background()
	c := bootCluster(t, "stolen")
	rec := events.NewFakeRecorder(20)
	r, inits := realReconciler(t, rec)
	reconcile := reconcileFunc(t, ctx, r, c)
	reconcile()
	bao := startPod0(t, c)
	token := initByHand(t, bao)
	for range 2 {
		reconcile()
	}
	latest := latestCluster(t, c)
	if d := findDegraded(latest); d == nil || d.Status != metav1.ConditionTrue || d.Reason != bootstrap.ReasonInitializedElsewhere {
		t.Fatalf("Degraded %+v, want True InitializedElsewhere", d)
	}
	if latest.Status.Initialized || stsReplicas(t, "stolen", "boot") != 1 || inits.Load() != 0 {
		t.Fatalf("initialized %v, %d replicas, %d sys/init calls: want a held bootstrap",
			latest.Status.Initialized, stsReplicas(t, "stolen", "boot"), inits.Load())
	}
	assertEvents(t, rec, bootstrap.ReasonInitializedElsewhere)

	storeRootToken(t, c, token)
	reconcile()
	assertAdopted(t, c, inits)
}

// TestAClusterWithItsTokenStoredIsAdopted: pod-0 is initialized and its
// root token is in the Secret (this operator stored it and lost the status
// write, or a person moved a cluster under it): the first pass that sees it
// marks it initialized and scales out, with no sys/init and no Degraded.
func TestAClusterWithItsTokenStoredIsAdopted(t *testing.T) {
	requireBao(t)
	t.Parallel() // mostly waiting on bao: elections, sys/init
	ctx := context.Background()
	c := bootCluster(t, "adopt")
	rec := events.NewFakeRecorder(20)
	r, inits := realReconciler(t, rec)
	reconcile := reconcileFunc(t, ctx, r, c)
	reconcile()
	bao := startPod0(t, c)
	storeRootToken(t, c, initByHand(t, bao))
	reconcile()
	assertAdopted(t, c, inits)
	if d := findDegraded(latestCluster(t, c)); d != nil && d.Status == metav1.ConditionTrue {
		t.Fatalf("Degraded %+v on an adopted cluster", d)
	}
}

func assertAdopted(t *testing.T, c *v1alpha1.OpenBaoCluster, inits *atomic.Int32) {
	t.Helper()
	latest := latestCluster(t, c)
	cond, err := condition(context.Background(), c, v1alpha1.ConditionOpenBaoInitialized)
	if err != nil || cond.Status != metav1.ConditionTrue || cond.Reason != bootstrap.ReasonInitialized {
		t.Fatalf("OpenBaoInitialized %+v (%v), want True Initialized", cond, err)
	}
	if !latest.Status.Initialized || latest.Status.SelfInitialized || stsReplicas(t, c.Namespace, c.Name) != 3 || inits.Load() != 0 {
		t.Fatalf("initialized %v (self %v), %d replicas, %d sys/init calls: want adopted and scaled out without sys/init",
			latest.Status.Initialized, latest.Status.SelfInitialized, stsReplicas(t, c.Namespace, c.Name), inits.Load())
	}
	if d := findDegraded(latest); d != nil && d.Status == metav1.ConditionTrue {
		t.Fatalf("Degraded %+v after adoption", d)
	}
}

// initByHand calls sys/init on pod-0 before the operator does, as a
// stranger with network access to port 8200 could, and returns the token.
func initByHand(t *testing.T, bao *podServer) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := bao.client(t, openbao.Token{}).Init(ctx, openbao.InitRequest{})
	if err != nil {
		t.Fatalf("sys/init by hand: %v", err)
	}
	return res.RootToken.Reveal()
}

func storeRootToken(t *testing.T, c *v1alpha1.OpenBaoCluster, token string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.RootTokenSecretName(), Namespace: c.Namespace},
		StringData: map[string]string{bootstrap.RootTokenDataKey: token}}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// bootCluster creates cluster boot (3 replicas) in a new namespace.
func bootCluster(t *testing.T, ns string) *v1alpha1.OpenBaoCluster {
	t.Helper()
	createNamespace(t, ns)
	c := newCluster(t, ns, `
metadata: {name: boot}
spec: {version: 2.4.0, replicas: 3}
`)
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

func reconcileFunc(t *testing.T, ctx context.Context, r interface {
	Reconcile(context.Context, ctrl.Request) (ctrl.Result, error)
}, c *v1alpha1.OpenBaoCluster) func() {
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	return func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	}
}

func latestCluster(t *testing.T, c *v1alpha1.OpenBaoCluster) *v1alpha1.OpenBaoCluster {
	t.Helper()
	latest := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), latest); err != nil {
		t.Fatal(err)
	}
	return latest
}

// tokenSecretDeletedAndBack deletes the root-token Secret of an
// initialized cluster: OpenBaoInitialized must say so, with an Event, and
// nothing is initialized again; the Secret back, the condition says where
// the token is again.
func tokenSecretDeletedAndBack(t *testing.T, c *v1alpha1.OpenBaoCluster, secret *corev1.Secret, reconcile func(),
	inits *atomic.Int32, recorder *events.FakeRecorder) {
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
	if n := inits.Load(); n != 1 {
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
