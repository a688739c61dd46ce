package envtest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/internal/upgrade"
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
// in the same apply as the voters'; the rollout starts by waiting for it
// (step ReadReplicas): while its controller has not rolled the read
// replica, no voter is released and the cluster says why; once the read
// replica runs the new template, Ready, unsealed and caught up, the
// voters roll.
func TestAVersionRollsTheReadReplicasBeforeTheVoters(t *testing.T) {
	rr := newReadRollout(t, "rollout-read")
	ro := rr.ro
	ro.setVersion("2.4.1")
	ro.pass() // both templates applied
	ro.kubeControllerManager()
	rr.readSTS(false) // the read StatefulSet saw the new template, has not rolled its pod
	ro.pass()
	ro.expect("voters held while the read replica rolls", 3, "ReadReplicas")
	if u := meta.FindStatusCondition(ro.cluster().Status.Conditions, v1alpha1.ConditionUpgrading); u == nil ||
		u.Reason != v1alpha1.ReasonUpgradeInProgress || !strings.Contains(u.Message, "read replicas roll first") {
		t.Fatalf("Upgrading %+v, want UpgradeInProgress saying the read replicas roll first", u)
	}
	rr.readSTS(true)
	ro.pass()
	ro.expect("the read replica rolled: the voters start", 2, "PodReady")
}

// TestABadReadReplicaHaltsTheRolloutWithoutTouchingAVoter: a version
// change that also gives the read replicas a request no node can hold
// (the fault injected: its pod stays Pending, Unschedulable). The rollout
// waits on the read replicas, and once spec.upgrade.podReadyTimeout has
// passed since it began, halts on PodReadyTimeout as a voter's step does
// (Degraded, Upgrading UpgradeHalted, status.upgrade.halted), with the
// partition at the replica count and no voter pod replaced. Fixing the
// request alone does not move a voter; a new resumeRequest does.
func TestABadReadReplicaHaltsTheRolloutWithoutTouchingAVoter(t *testing.T) {
	ctx := context.Background()
	rr := newReadRollout(t, "rollout-read-halt")
	ro := rr.ro
	clock := clocktesting.NewFakePassiveClock(time.Now())
	ro.r.(*controllers.OpenBaoClusterReconciler).Clock = clock
	voters := map[string]types.UID{}
	for i := range 3 {
		voters[ro.pod(i).Name] = ro.pod(i).UID
	}
	c := ro.cluster()
	c.Spec.Version = "2.4.1"
	c.Spec.ReadReplicas.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4096")}}
	if err := k8s.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	ro.pass()
	ro.kubeControllerManager()
	rr.readSTS(false)
	rr.readPod(false, &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient cpu."})
	ro.pass()
	ro.expect("waiting on the read replica", 3, "ReadReplicas")

	clock.SetTime(clock.Now().Add(upgrade.DefaultPodReadyTimeout + time.Second))
	ro.pass()
	ro.expect("halted", 3, "ReadReplicas")
	got := ro.cluster()
	d, u := findDegraded(got), meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionUpgrading)
	if got.Status.Upgrade.Halted != v1alpha1.ReasonPodReadyTimeout || d == nil || d.Reason != v1alpha1.ReasonPodReadyTimeout ||
		!strings.Contains(d.Message, "bao-read-0 is not Ready: Unschedulable") || u == nil || u.Reason != v1alpha1.ReasonUpgradeHalted {
		t.Fatalf("after podReadyTimeout: halted %q, Degraded %+v, Upgrading %+v; want halted on PodReadyTimeout naming bao-read-0",
			got.Status.Upgrade.Halted, d, u)
	}
	expectVotersUntouched := func(when string) {
		t.Helper()
		for i := range 3 {
			if p := ro.pod(i); p.UID != voters[p.Name] || p.Labels[appsv1.ControllerRevisionHashLabelKey] != "rev-2.4.0" {
				t.Fatalf("%s: voter %s was replaced (revision %s)", when, p.Name, p.Labels[appsv1.ControllerRevisionHashLabelKey])
			}
		}
	}
	expectVotersUntouched("halted")

	// The user drops the request; the read replica rolls and runs. The halt
	// holds until resumeRequest changes.
	setReadReplicas(t, ro.c, func(r *v1alpha1.ReadReplicasSpec) { r.Resources = nil })
	ro.pass()
	rr.readSTS(true)
	rr.readPod(true, nil)
	ro.pass()
	ro.expect("fixed, not resumed", 3, "ReadReplicas")
	expectVotersUntouched("fixed, not resumed")
	c = ro.cluster()
	c.Spec.Upgrade.ResumeRequest = "after-the-read-replica-fix"
	if err := k8s.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	ro.pass()
	ro.expect("resumed", 2, "PodReady")
}

// readRollout is a settled 3-voter cluster (newRollout) with one read
// replica, whose StatefulSet status and pod the test plays.
type readRollout struct {
	t  *testing.T
	ro *rollout
}

func newReadRollout(t *testing.T, ns string) *readRollout {
	t.Helper()
	ro := newRollout(t, ns, 3)
	c := ro.cluster()
	c.Spec.ReadReplicas = &v1alpha1.ReadReplicasSpec{Replicas: 1}
	if err := k8s.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	ro.pass()
	rr := &readRollout{t: t, ro: ro}
	rr.readSTS(true)
	rr.readPod(true, nil)
	ro.bao.AutopilotStateAnswer.Servers["bao-read-0"] = openbao.AutopilotServer{ID: "bao-read-0", Status: "non-voter", Healthy: true, LastIndex: 98, ContactKnown: true}
	ro.pass()
	ro.expect("settled with a read replica", 3, "-")
	return rr
}

// readSTS plays the StatefulSet controller's status of the read
// StatefulSet: its update revision follows the image tag; rolled says
// its one pod runs it.
func (rr *readRollout) readSTS(rolled bool) {
	rr.t.Helper()
	ctx := context.Background()
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: rr.ro.ns, Name: "bao-read"}, sts); err != nil {
		rr.t.Fatal(err)
	}
	image := sts.Spec.Template.Spec.Containers[0].Image
	update := "read-" + image[strings.LastIndex(image, ":")+1:]
	sts.Status.ObservedGeneration, sts.Status.Replicas, sts.Status.UpdateRevision = sts.Generation, 1, update
	sts.Status.CurrentRevision, sts.Status.UpdatedReplicas = "read-old", 0
	if rolled {
		sts.Status.CurrentRevision, sts.Status.UpdatedReplicas = update, 1
	}
	if err := k8s.Status().Update(ctx, sts); err != nil {
		rr.t.Fatal(err)
	}
}

// readPod (re)creates the read replica's pod: Ready and unsealed, or
// not Ready with the given condition.
func (rr *readRollout) readPod(ready bool, cond *corev1.PodCondition) {
	rr.t.Helper()
	ctx := context.Background()
	old := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: rr.ro.ns, Name: "bao-read-0"}, old); err == nil {
		if err := k8s.Delete(ctx, old, client.GracePeriodSeconds(0)); err != nil {
			rr.t.Fatal(err)
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bao-read-0", Namespace: rr.ro.ns, Labels: map[string]string{
			v1alpha1.LabelAppName: v1alpha1.AppName, v1alpha1.LabelAppInstance: "bao-read", v1alpha1.LabelCluster: "bao"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: podstate.ContainerName, Image: "openbao"}}},
	}
	if ready {
		pod.Labels[podstate.LabelSealed], pod.Labels[podstate.LabelActive] = "false", "false"
	}
	if err := k8s.Create(ctx, pod); err != nil {
		rr.t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodPending
	if ready {
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	} else if cond != nil {
		pod.Status.Conditions = []corev1.PodCondition{*cond}
	}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		rr.t.Fatal(err)
	}
}
