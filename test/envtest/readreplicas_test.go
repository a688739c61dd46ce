package envtest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
	"github.com/openbao/operator/internal/podstate"
)

// TestReadReplicasStartAfterInitAndLeaveRaftBeforeTheirPods: the read
// StatefulSet appears only in the pass after the cluster is initialized,
// with a config.hcl that joins as a non-voter; scaling it 2 → 0 removes
// each read replica from Raft before the StatefulSet drops its pod, holds
// while a removal fails (the fault it guards against), never touches a
// voter, and removing spec.readReplicas prunes the read objects only once
// no read replica runs.
func TestReadReplicasStartAfterInitAndLeaveRaftBeforeTheirPods(t *testing.T) {
	ctx := context.Background()
	ns := "readreplicas"
	createNamespace(t, ns)
	c := newCluster(t, ns, `
metadata: {name: bao}
spec: {version: 2.4.0, replicas: 3, readReplicas: {replicas: 2}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	bao := &openbaofake.Client{
		HealthAnswer: openbao.Health{Initialized: true}, LoginToken: openbao.NewToken("s.upgrade-role-token"), LoginTTL: 15 * 60e9,
		LeaderAnswer:         openbao.Leader{RaftCommittedIndex: 100},
		AutopilotStateAnswer: openbao.AutopilotState{Healthy: true, FailureTolerance: 1, Servers: map[string]openbao.AutopilotServer{}},
	}
	for _, id := range []string{"bao-0", "bao-1", "bao-2"} {
		bao.AutopilotStateAnswer.Servers[id] = openbao.AutopilotServer{ID: id, Status: "voter", Healthy: true, LastIndex: 98, ContactKnown: true}
	}
	r, err := newReconciler(k8s, k8s, events.NewFakeRecorder(200))
	if err != nil {
		t.Fatal(err)
	}
	r.OpenBao = func(openbao.Options) (openbao.Client, error) { return bao, nil }
	pass := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	}
	readReplicas := func() (int32, bool) {
		t.Helper()
		sts := &appsv1.StatefulSet{}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.ReadStatefulSetName()}, sts)
		if apierrors.IsNotFound(err) {
			return 0, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return *sts.Spec.Replicas, true
	}

	pass()
	if _, exists := readReplicas(); exists {
		t.Fatal("the read StatefulSet exists before the cluster is initialized")
	}
	latest := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), latest); err != nil {
		t.Fatal(err)
	}
	latest.Status = v1alpha1.OpenBaoClusterStatus{Initialized: true, IdentityConfigured: true, CurrentVersion: "2.4.0"}
	if err := k8s.Status().Update(ctx, latest); err != nil {
		t.Fatal(err)
	}
	pass()
	if n, exists := readReplicas(); !exists || n != 2 {
		t.Fatalf("once initialized: read StatefulSet exists %v with %d replicas, want 2", exists, n)
	}
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.ReadConfigMapName()}, cm); err != nil ||
		!strings.Contains(strings.Join(strings.Fields(cm.Data["config.hcl"]), " "), "retry_join_as_non_voter = true") {
		t.Fatalf("read replicas' config.hcl (%v):\n%s", err, cm.Data["config.hcl"])
	}

	for _, id := range []string{"bao-read-0", "bao-read-1"} {
		bao.AutopilotStateAnswer.Servers[id] = openbao.AutopilotServer{ID: id, Status: "non-voter", Healthy: true, LastIndex: 98, ContactKnown: true}
	}
	setReadReplicas(t, c, func(r *v1alpha1.ReadReplicasSpec) { r.Replicas = 0 })
	bao.RemovePeerErr = errors.New("injected: the leader refused the removal")
	pass()
	if n, _ := readReplicas(); n != 2 {
		t.Fatalf("with the removal failing: %d read replicas, want 2 kept", n)
	}
	bao.RemovePeerErr = nil
	pass()
	if n, _ := readReplicas(); n != 1 || !slices.Equal(bao.RemovedPeers, []string{"bao-read-1"}) {
		t.Fatalf("first step: %d read replicas, removed %v; want 1, [bao-read-1]", n, bao.RemovedPeers)
	}
	delete(bao.AutopilotStateAnswer.Servers, "bao-read-1")
	pass()
	if n, _ := readReplicas(); n != 0 || !slices.Equal(bao.RemovedPeers, []string{"bao-read-1", "bao-read-0"}) {
		t.Fatalf("second step: %d read replicas, removed %v; want 0, [bao-read-1 bao-read-0]", n, bao.RemovedPeers)
	}
	delete(bao.AutopilotStateAnswer.Servers, "bao-read-0")
	if got := stsReplicas(t, ns, "bao"); got != 3 {
		t.Fatalf("the voters' StatefulSet went to %d", got)
	}

	setReadReplicas(t, c, nil)
	pass()
	if _, exists := readReplicas(); exists || len(bao.RemovedPeers) != 2 {
		t.Fatalf("spec.readReplicas removed: read StatefulSet exists %v, removed %v; want it pruned, no voter removed", exists, bao.RemovedPeers)
	}
}

// setReadReplicas changes spec.readReplicas (nil change removes it).
func setReadReplicas(t *testing.T, c *v1alpha1.OpenBaoCluster, change func(*v1alpha1.ReadReplicasSpec)) {
	t.Helper()
	latest := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), latest); err != nil {
		t.Fatal(err)
	}
	if change == nil {
		latest.Spec.ReadReplicas = nil
	} else {
		change(latest.Spec.ReadReplicas)
	}
	if err := k8s.Update(context.Background(), latest); err != nil {
		t.Fatal(err)
	}
}

// TestDeletionWaitsForTheReadReplicasToStop: the deletion policy runs only
// once the servers have stopped, and the read replicas are servers too: a
// running read replica holds the finalizer (and, under DeleteAll, the
// unseal key and the root token) until its pod is gone.
func TestDeletionWaitsForTheReadReplicasToStop(t *testing.T) {
	ctx := context.Background()
	ns := "readreplicas-delete"
	createNamespace(t, ns)
	c := newCluster(t, ns, `
metadata: {name: bao}
spec: {version: 2.4.0, replicas: 3, deletionPolicy: DeleteAll, readReplicas: {replicas: 1}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	r, err := newReconciler(k8s, k8s, events.NewFakeRecorder(200))
	if err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: c.ReadPodName(0), Namespace: ns, Labels: c.ReadPodSelectorLabels()},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "openbao", Image: "openbao"}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	latest := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(ctx, req.NamespacedName, latest); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, latest); err != nil {
		t.Fatal(err)
	}
	for pass := 0; pass < 3; pass++ {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if err := k8s.Get(ctx, req.NamespacedName, &v1alpha1.OpenBaoCluster{}); err != nil || !exists(t, ns, "Secret/bao-unseal-key") {
		t.Fatalf("with a read replica running: cluster %v, unseal key kept %v; want both kept", err, exists(t, ns, "Secret/bao-unseal-key"))
	}
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, req.NamespacedName, &v1alpha1.OpenBaoCluster{}); !apierrors.IsNotFound(err) || exists(t, ns, "Secret/bao-unseal-key") {
		t.Fatalf("once the read replica stopped: cluster %v, unseal key still there %v; want both gone", err, exists(t, ns, "Secret/bao-unseal-key"))
	}
}

// TestAVersionRollsTheReadReplicasBeforeTheVoters: 2.4.0 → 2.4.1 with a
// read replica. The read StatefulSet (no partition) takes the new template
// in the same apply as the voters'; while its controller has not rolled
// the read replica, no voter is released and the cluster says why; once
// the read replica runs the new template, Ready, unsealed and caught up,
// the voters' rollout starts.
func TestAVersionRollsTheReadReplicasBeforeTheVoters(t *testing.T) {
	ctx := context.Background()
	ro := newRollout(t, "rollout-read", 3)
	c := ro.cluster()
	c.Spec.ReadReplicas = &v1alpha1.ReadReplicasSpec{Replicas: 1}
	if err := k8s.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	ro.pass()
	readSTS := func(rolled bool) {
		t.Helper()
		sts := &appsv1.StatefulSet{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ro.ns, Name: "bao-read"}, sts); err != nil {
			t.Fatal(err)
		}
		image := sts.Spec.Template.Spec.Containers[0].Image
		update := "read-" + image[strings.LastIndex(image, ":")+1:]
		sts.Status.ObservedGeneration, sts.Status.Replicas, sts.Status.UpdateRevision = sts.Generation, 1, update
		sts.Status.CurrentRevision, sts.Status.UpdatedReplicas = "read-old", 0
		if rolled {
			sts.Status.CurrentRevision, sts.Status.UpdatedReplicas = update, 1
		}
		if err := k8s.Status().Update(ctx, sts); err != nil {
			t.Fatal(err)
		}
	}
	readSTS(true)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bao-read-0", Namespace: ro.ns, Labels: map[string]string{
			v1alpha1.LabelAppName: v1alpha1.AppName, v1alpha1.LabelAppInstance: "bao-read", v1alpha1.LabelCluster: "bao",
			podstate.LabelSealed: "false", podstate.LabelActive: "false"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: podstate.ContainerName, Image: "openbao"}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	ro.bao.AutopilotStateAnswer.Servers["bao-read-0"] = openbao.AutopilotServer{ID: "bao-read-0", Status: "non-voter", Healthy: true, LastIndex: 98, ContactKnown: true}
	ro.pass()
	ro.expect("settled with a read replica", 3, "-")

	ro.setVersion("2.4.1")
	ro.pass() // both templates applied
	ro.kubeControllerManager()
	readSTS(false) // the read StatefulSet saw the new template, has not rolled its pod
	ro.pass()
	ro.expect("voters held while the read replica rolls", 3, "-")
	if d := findDegraded(ro.cluster()); d == nil || d.Reason != v1alpha1.ReasonPreflightFailed || !strings.Contains(d.Message, "read replicas roll first") {
		t.Fatalf("Degraded %+v, want PreflightFailed saying the read replicas roll first", d)
	}
	readSTS(true)
	ro.pass()
	ro.expect("the read replica rolled: the voters start", 2, "PodReady")
}
