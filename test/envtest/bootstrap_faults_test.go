package envtest_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
)

// TestAFailedInitIsReportedAndPaced: sys/init answers 500, a fault a real
// server cannot be brought to on cue. The failure is told (InitFailed, a
// Warning Event), no token Secret appears, the cluster stays at one server,
// and sys/init is not called again until the backoff has passed; then it
// is, and the cluster initializes. The start of each call is recorded
// before it is sent, and cleared once OpenBao answered with an error: a
// definite answer is no lost initialization, and must never lead to a
// reset later.
func TestAFailedInitIsReportedAndPaced(t *testing.T) {
	ctx := context.Background()
	c := bootCluster(t, "initfail")
	fake := &openbaofake.Client{
		HealthAnswer: openbao.Health{Initialized: false, Sealed: true},
		InitErr:      &openbao.StatusError{Op: "sys/init", Code: http.StatusInternalServerError},
	}
	bao := &startRecordedCheck{Client: fake, t: t, cluster: c}
	rec := events.NewFakeRecorder(20)
	r := reconcilerWith(t, fake, rec)
	r.OpenBao = func(openbao.Options) (openbao.Client, error) { return bao, nil }
	clock := clocktesting.NewFakeClock(time.Now())
	r.Clock = clock
	reconcile := reconcileFunc(t, ctx, r, c)
	reconcile()
	runningPod0(t, "initfail", "boot-0")
	reconcile() // sys/init fails
	assertInitHeld(t, c, bootstrap.ReasonInitFailed)
	assertEvents(t, rec, bootstrap.ReasonInitFailed)
	if bao.recordedBefore != 1 {
		t.Fatalf("status.initializationStarted recorded before %d of 1 sys/init call(s)", bao.recordedBefore)
	}
	if started := latestCluster(t, c).Status.InitializationStarted; started != nil {
		t.Fatalf("status.initializationStarted %v kept after OpenBao answered sys/init with 500", started)
	}

	clock.Step(bootstrap.InitBackoffBase / 2)
	reconcile() // within the backoff
	assertInitHeld(t, c, bootstrap.ReasonInitBackoff)
	if n := fake.CallCount("Init"); n != 1 {
		t.Fatalf("sys/init called %d times within the backoff, want 1", n)
	}

	fake.InitErr, fake.InitAnswer = nil, openbao.InitResult{RootToken: openbao.NewToken("s.after-the-backoff")}
	clock.Step(bootstrap.InitBackoffBase)
	reconcile() // the backoff has passed
	if n := fake.CallCount("Init"); n != 2 || bao.recordedBefore != 2 || !latestCluster(t, c).Status.Initialized ||
		stsReplicas(t, "initfail", "boot") != 3 {
		t.Fatalf("after the backoff: %d sys/init calls, initialized %v, %d replicas; want 2, true, 3",
			n, latestCluster(t, c).Status.Initialized, stsReplicas(t, "initfail", "boot"))
	}
}

// startRecordedCheck counts the sys/init calls sent while the cluster's
// status.initializationStarted was already written.
type startRecordedCheck struct {
	*openbaofake.Client
	t              *testing.T
	cluster        *v1alpha1.OpenBaoCluster
	recordedBefore int
}

func (s *startRecordedCheck) Init(ctx context.Context, req openbao.InitRequest) (openbao.InitResult, error) {
	if latestCluster(s.t, s.cluster).Status.InitializationStarted != nil {
		s.recordedBefore++
	}
	return s.Client.Init(ctx, req)
}

// assertInitHeld checks an uninitialized cluster held at one server, with
// no token Secret and OpenBaoInitialized False for reason.
func assertInitHeld(t *testing.T, c *v1alpha1.OpenBaoCluster, reason string) {
	t.Helper()
	cond, err := condition(context.Background(), c, v1alpha1.ConditionOpenBaoInitialized)
	if err != nil || cond.Status != metav1.ConditionFalse || cond.Reason != reason {
		t.Fatalf("OpenBaoInitialized %+v (%v), want False %s", cond, err, reason)
	}
	if latestCluster(t, c).Status.Initialized || stsReplicas(t, c.Namespace, c.Name) != 1 {
		t.Fatal("a cluster whose sys/init failed is marked initialized or scaled out")
	}
	err = k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: c.RootTokenSecretName()}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("root-token Secret after a failed sys/init: %v, want none", err)
	}
}
