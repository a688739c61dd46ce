package envtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/podstate"
)

// TestARetainedClusterCreatedAgainIsNeverWiped: the documented way back for
// a cluster under deletionPolicy Retain is to create the OpenBaoCluster
// again. Its pod-0 starts on the old volume (here a real bao 2.4.0,
// initialized before the cluster existed, whose root token Secret is gone:
// a cluster formed from a backup, or a Secret someone deleted). Until it
// unseals, service registration labels it openbao-initialized=false, the
// fault this test injects; then the label turns true.
//
// The operator must never take that label for "not initialized": no
// sys/init, no initializationStarted, and so no reset that deletes the
// volume. Every claim keeps its UID; the cluster stays at one server,
// Degraded RetainedData with what to do; a root token stored by the user
// adopts the data, and the scale-up deletes none of the older volumes. On
// main before this change, the label led to sys/init (refused), a
// recorded start, then a reset deleting data-boot-0.
func TestARetainedClusterCreatedAgainIsNeverWiped(t *testing.T) {
	requireBao(t)
	t.Parallel() // mostly waiting on bao: elections, sys/init
	ctx := context.Background()
	createNamespace(t, "retained")
	claims := []*corev1.PersistentVolumeClaim{
		dataClaim(t, "retained", "data-boot-0"), dataClaim(t, "retained", "data-boot-1"), dataClaim(t, "retained", "data-boot-2"),
	}
	time.Sleep(1100 * time.Millisecond) // the cluster comes back in a later second than its volumes
	c := newCluster(t, "retained", `
metadata: {name: boot}
spec: {version: 2.4.0, replicas: 3}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(100)
	r, inits := realReconciler(t, rec)
	reconcile := reconcileFunc(t, ctx, r, c)
	reconcile()
	bao := startPod0(t, c)
	token := initByHand(t, bao) // the earlier cluster's data; its token is nobody's Secret now

	pod := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "retained", Name: c.PodName(0)}, pod); err != nil {
		t.Fatal(err)
	}
	setPodLabel(t, pod, podstate.LabelInitialized, "false") // sealed, as service registration says
	for range 2 {
		reconcile()
	}
	setPodLabel(t, pod, podstate.LabelInitialized, "true") // unsealed
	for range 3 {
		reconcile()
	}

	latest := latestCluster(t, c)
	if n := inits.Load(); n != 0 || latest.Status.InitializationStarted != nil || latest.Status.BootstrapReset != nil {
		t.Fatalf("sys/init called %d times, initializationStarted %v, bootstrapReset %+v: want none on retained data",
			n, latest.Status.InitializationStarted, latest.Status.BootstrapReset)
	}
	assertClaimsKept(t, claims)
	if latest.Status.Initialized || stsReplicas(t, "retained", "boot") != 1 {
		t.Fatalf("initialized %v with %d replicas, want a held bootstrap at one server", latest.Status.Initialized, stsReplicas(t, "retained", "boot"))
	}
	d := findDegraded(latest)
	if d == nil || d.Status != metav1.ConditionTrue || d.Reason != bootstrap.ReasonRetainedData ||
		!strings.Contains(d.Message, c.RootTokenSecretName()) || !strings.Contains(d.Message, "data-boot-0") {
		t.Fatalf("Degraded %+v, want True RetainedData naming the volume and Secret %s", d, c.RootTokenSecretName())
	}
	assertNoEventWith(t, rec, bootstrap.ReasonResettingLostInitialization, "StaleVolumeDeleted")

	// The user stores the token of that data: it is adopted. The scale-up
	// meets data-boot-1 and -2, older than the cluster: it deletes neither
	// (they hold the retained cluster's data, or are stale: the operator
	// cannot tell) and waits, Degraded ScaleUpBlocked. Here it cannot even
	// read the membership (adopted data carries no identity of this
	// operator's); membership's unit tests hold the rule for when it can.
	storeRootToken(t, c, token)
	for range 2 {
		reconcile()
	}
	latest = latestCluster(t, c)
	if !latest.Status.Initialized || inits.Load() != 0 {
		t.Fatalf("initialized %v after %d sys/init calls, want adopted without sys/init", latest.Status.Initialized, inits.Load())
	}
	d = findDegraded(latest)
	if d == nil || d.Reason != v1alpha1.ReasonScaleUpBlocked || stsReplicas(t, "retained", "boot") != 1 {
		t.Fatalf("Degraded %+v with %d replicas, want ScaleUpBlocked at one server", d, stsReplicas(t, "retained", "boot"))
	}
	assertClaimsKept(t, claims)
	assertNoEventWith(t, rec, bootstrap.ReasonResettingLostInitialization, "StaleVolumeDeleted")
	assertRootTokenReadsRaft(t, bao, token)
}

// assertClaimsKept fails when a claim is gone, replaced or being deleted.
func assertClaimsKept(t *testing.T, claims []*corev1.PersistentVolumeClaim) {
	t.Helper()
	for _, want := range claims {
		got := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(want), got); err != nil || got.UID != want.UID || got.DeletionTimestamp != nil {
			t.Fatalf("claim %s: %v, UID %s (want %s), deletion %v: retained data touched", want.Name, err, got.UID, want.UID, got.DeletionTimestamp)
		}
	}
}

// assertNoEventWith fails on an emitted Event with any of the reasons.
func assertNoEventWith(t *testing.T, rec *events.FakeRecorder, reasons ...string) {
	t.Helper()
	for {
		select {
		case e := <-rec.Events:
			for _, reason := range reasons {
				if strings.Contains(e, reason) {
					t.Fatalf("Event %q", e)
				}
			}
		default:
			return
		}
	}
}

// assertRootTokenReadsRaft proves the adopted data is the earlier
// cluster's: its own root token still reads its Raft configuration.
func assertRootTokenReadsRaft(t *testing.T, bao *podServer, token string) {
	t.Helper()
	raft, err := bao.client(t, openbao.NewToken(token)).RaftConfiguration(context.Background())
	if err != nil || len(raft.Voters()) != 1 {
		t.Fatalf("the earlier cluster's token on the adopted data: voters %v, %v", raft.Voters(), err)
	}
}
