package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
	"github.com/openbao/operator/internal/podstate"
)

// rollout drives the reconciler directly against the real API server and
// plays what envtest lacks: the StatefulSet controller (revisions, pods
// recreated at or above the partition) and OpenBao's service registration
// (the active label), with a fake OpenBao behind the client.
type rollout struct {
	t   *testing.T
	ns  string
	c   *v1alpha1.OpenBaoCluster
	r   reconciler
	bao *openbaofake.Client
	rec *events.FakeRecorder
	// dialled is every client the reconciler opened.
	dialled []openbao.Options
	// revision names the StatefulSet's update revision; nil: "rev-" and
	// the OpenBao image's tag.
	revision func(*appsv1.StatefulSet) string
}

type reconciler interface {
	Reconcile(context.Context, ctrl.Request) (ctrl.Result, error)
}

func newRollout(t *testing.T, ns string, replicas int) *rollout {
	t.Helper()
	ctx := context.Background()
	createNamespace(t, ns)
	c := newCluster(t, ns, fmt.Sprintf(`
metadata: {name: bao}
spec: {version: 2.4.0, replicas: %d}
`, replicas))
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Status = v1alpha1.OpenBaoClusterStatus{Initialized: true, IdentityConfigured: true, CurrentVersion: "2.4.0"}
	if err := k8s.Status().Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	bao := &openbaofake.Client{
		HealthAnswer: openbao.Health{Initialized: true}, LoginToken: openbao.NewToken("s.upgrade-role-token"), LoginTTL: 15 * 60e9,
		LeaderAnswer:         openbao.Leader{RaftCommittedIndex: 100},
		AutopilotStateAnswer: openbao.AutopilotState{Healthy: true, FailureTolerance: 1, Servers: map[string]openbao.AutopilotServer{}},
	}
	for i := range replicas {
		name := fmt.Sprintf("bao-%d", i)
		bao.AutopilotStateAnswer.Servers[name] = openbao.AutopilotServer{ID: name, Status: "voter", Healthy: true, LastIndex: 98, ContactKnown: true}
	}
	rec := events.NewFakeRecorder(200)
	r, err := newReconciler(k8s, k8s, rec)
	if err != nil {
		t.Fatal(err)
	}
	ro := &rollout{t: t, ns: ns, c: c, r: r, bao: bao, rec: rec}
	r.OpenBao = func(o openbao.Options) (openbao.Client, error) {
		ro.dialled = append(ro.dialled, o)
		return bao, nil
	}
	ro.pass()
	for i := range replicas {
		ro.serverPod(i, "rev-2.4.0", i == 0)
	}
	ro.kubeControllerManager()
	return ro
}

func (ro *rollout) pass() {
	ro.t.Helper()
	if _, err := ro.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ro.c)}); err != nil {
		ro.t.Fatalf("reconcile: %v", err)
	}
}

// serverPod creates a Ready server pod of the given template revision.
func (ro *rollout) serverPod(i int, revision string, active bool) {
	ro.t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bao-%d", i), Namespace: ro.ns, Labels: map[string]string{
			v1alpha1.LabelAppName: v1alpha1.AppName, v1alpha1.LabelAppInstance: "bao", v1alpha1.LabelCluster: "bao",
			appsv1.ControllerRevisionHashLabelKey: revision, podstate.LabelActive: fmt.Sprint(active),
			podstate.LabelVersion: strings.TrimPrefix(revision, "rev-"),
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: podstate.ContainerName, Image: "openbao"}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		ro.t.Fatal(err)
	}
	pod.Status.Phase, pod.Status.PodIP = corev1.PodRunning, podIP(i)
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		ro.t.Fatal(err)
	}
}

func podIP(ordinal int) string { return fmt.Sprintf("10.244.0.%d", 10+ordinal) }

// expectPodsDialledByIP: a server is reached at its pod's address, never
// through DNS, which can still name a replaced pod's old address, and its
// certificate is checked against its DNS name.
func (ro *rollout) expectPodsDialledByIP() {
	ro.t.Helper()
	byIP := 0
	for _, o := range ro.dialled {
		for i := range 5 {
			if o.ServerName != ro.c.PodDNSName(i) {
				continue
			}
			if want := "https://" + podIP(i) + ":8200"; o.Address != want {
				ro.t.Errorf("%s dialled at %s, want %s", o.ServerName, o.Address, want)
			}
			byIP++
		}
	}
	if byIP == 0 {
		ro.t.Errorf("no server was dialled directly among %d clients", len(ro.dialled))
	}
}

// kubeControllerManager plays the StatefulSet controller: the update
// revision follows the template's image tag, and pods at or above the
// partition are recreated on it.
func (ro *rollout) kubeControllerManager() {
	ro.t.Helper()
	ctx := context.Background()
	sts := ro.statefulSet()
	tag := sts.Spec.Template.Spec.Containers[0].Image[strings.LastIndex(sts.Spec.Template.Spec.Containers[0].Image, ":")+1:]
	revision := "rev-" + tag
	if ro.revision != nil {
		revision = ro.revision(sts)
	}
	sts.Status.ObservedGeneration, sts.Status.UpdateRevision, sts.Status.Replicas = sts.Generation, revision, *sts.Spec.Replicas
	if err := k8s.Status().Update(ctx, sts); err != nil {
		ro.t.Fatal(err)
	}
	partition := *sts.Spec.UpdateStrategy.RollingUpdate.Partition
	for i := int(partition); i < int(*sts.Spec.Replicas); i++ {
		pod := ro.pod(i)
		if pod.Labels[appsv1.ControllerRevisionHashLabelKey] == revision {
			continue
		}
		active := pod.Labels[podstate.LabelActive] == "true"
		if err := k8s.Delete(ctx, pod); err != nil {
			ro.t.Fatal(err)
		}
		ro.serverPod(i, revision, active)
	}
}

func (ro *rollout) statefulSet() *appsv1.StatefulSet {
	ro.t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ro.ns, Name: "bao"}, sts); err != nil {
		ro.t.Fatal(err)
	}
	return sts
}

func (ro *rollout) pod(i int) *corev1.Pod {
	ro.t.Helper()
	pod := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ro.ns, Name: fmt.Sprintf("bao-%d", i)}, pod); err != nil {
		ro.t.Fatal(err)
	}
	return pod
}

func (ro *rollout) partition() int32 {
	return *ro.statefulSet().Spec.UpdateStrategy.RollingUpdate.Partition
}

func (ro *rollout) cluster() *v1alpha1.OpenBaoCluster {
	ro.t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(ro.c), c); err != nil {
		ro.t.Fatal(err)
	}
	return c
}

func (ro *rollout) setVersion(v string) {
	ro.t.Helper()
	c := ro.cluster()
	c.Spec.Version = v
	if err := k8s.Update(context.Background(), c); err != nil {
		ro.t.Fatal(err)
	}
}

// moveLeader plays a step-down: the active label moves to another pod.
func (ro *rollout) moveLeader(from, to int) {
	ro.t.Helper()
	for i, v := range map[int]string{from: "false", to: "true"} {
		pod := ro.pod(i)
		pod.Labels[podstate.LabelActive] = v
		if err := k8s.Update(context.Background(), pod); err != nil {
			ro.t.Fatal(err)
		}
	}
}

func (ro *rollout) expect(what string, partition int32, step string) {
	ro.t.Helper()
	c := ro.cluster()
	got := "-"
	if c.Status.Upgrade != nil {
		got = c.Status.Upgrade.Step
	}
	if p := ro.partition(); p != partition || got != step {
		ro.t.Fatalf("%s: partition %d, step %q; want %d, %q (status %+v)", what, p, got, partition, step, c.Status.Upgrade)
	}
}

// TestAVersionChangeRollsPodByPodWithAStepDownBeforeTheActiveServer: the
// partition holds a changed template until the rollout lowers it pod by
// pod, the active server steps down before its pod rolls, and the
// rollout ends with the partition locked again and currentVersion set.
func TestAVersionChangeRollsPodByPodWithAStepDownBeforeTheActiveServer(t *testing.T) {
	ro := newRollout(t, "rollout", 3)
	ro.pass()
	ro.expect("settled", 3, "-")

	ro.setVersion("2.4.1")
	ro.pass() // the new template is applied; the StatefulSet has not seen it
	ro.expect("template applied, not yet observed", 3, "-")
	ro.kubeControllerManager()
	ro.pass() // preflight passes: bao-2 is released at once
	ro.expect("rollout started", 2, "PodReady")

	ro.kubeControllerManager() // bao-2 recreated on the new revision
	ro.pass()                  // bao-2 verified; bao-1 is not active: released
	ro.expect("bao-2 done", 1, "PodReady")

	ro.kubeControllerManager()
	ro.pass() // bao-1 verified; bao-0 leads: it is asked to step down first
	ro.expect("bao-0 asked to step down", 1, "StepDown")
	if n := ro.bao.CallCount("StepDown"); n != 1 {
		t.Fatalf("%d step-downs, want 1", n)
	}
	ro.pass()
	ro.expect("bao-0 still active", 1, "StepDown")
	ro.moveLeader(0, 2)
	ro.pass()
	ro.expect("bao-0 released after another server leads", 0, "PodReady")

	ro.kubeControllerManager()
	ro.pass()
	ro.expect("complete", 3, "-")
	c := ro.cluster()
	cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionUpgrading)
	if cond == nil || cond.Reason != v1alpha1.ReasonUpgradeComplete || c.Status.CurrentVersion != "2.4.1" {
		t.Fatalf("Upgrading %+v, currentVersion %q", cond, c.Status.CurrentVersion)
	}
	if d := findDegraded(c); d == nil || d.Status != metav1.ConditionFalse {
		t.Errorf("Degraded %+v after a clean rollout", d)
	}
	if n := ro.bao.CallCount("StepDown"); n != 1 {
		t.Errorf("%d step-downs in all, want 1", n)
	}
	if len(ro.bao.Logins) == 0 || ro.bao.Logins[0] != "openbao-operator/upgrade" {
		t.Errorf("logins %v, want the upgrade role of the operator's mount (after a real TokenRequest)", ro.bao.Logins)
	}
	assertEvents(t, ro.rec, "UpgradeStarted", "PodRolled", "StepDown", "UpgradeComplete")
	ro.expectPodsDialledByIP()

	// An older version is refused before any pod moves.
	ro.setVersion("2.4.0")
	ro.pass()
	ro.kubeControllerManager()
	ro.pass()
	ro.expect("downgrade refused", 3, "-")
	if d := findDegraded(ro.cluster()); d == nil || d.Reason != v1alpha1.ReasonDowngradeBlocked {
		t.Errorf("Degraded %+v, want DowngradeBlocked", d)
	}
}

// TestARolloutCountsNoServerByAStandbysIndex: a standby's sys/leader
// answers its own log index, not the leader's, and the pod asked as the
// active one may have stepped down since (or the client Service may still
// name a standby). While the server asked for the leader's index answers as
// a standby, the rolled server is not counted and the next pod waits
// (both the autopilot view's index and the measured catch-up refuse it).
func TestARolloutCountsNoServerByAStandbysIndex(t *testing.T) {
	ro := newRollout(t, "rollout-standby-index", 3)
	ro.pass()
	ro.setVersion("2.4.1")
	ro.pass()
	ro.kubeControllerManager()
	ro.pass()
	ro.expect("rollout started", 2, "PodReady")

	ro.kubeControllerManager() // bao-2 recreated on the new revision
	leader := ro.bao.LeaderAnswer
	ro.bao.LeaderAnswer = openbao.Leader{HAEnabled: true, LeaderAddress: "https://bao-0.bao-internal.rollout-standby-index.svc:8200", RaftCommittedIndex: 100}
	ro.pass()
	ro.pass()
	ro.expect("a standby answered for the leader", 2, "RaftSync")

	ro.bao.LeaderAnswer = leader
	ro.pass()
	ro.expect("the leader answered", 1, "PodReady")
}

// TestAVersionLoweredMidRolloutMovesNoPodBack: 2.4.0 → 2.4.1 with bao-2
// rolled and bao-1 released, spec.version is set back to 2.4.0 (past the
// webhook, which would refuse it). currentVersion is empty then, but
// status.highestVersion holds 2.4.1: the partition is locked in the pass
// that renders the 2.4.0 template, so the StatefulSet moves no pod onto
// it, and the preflight refuses the new rollout (DowngradeBlocked).
func TestAVersionLoweredMidRolloutMovesNoPodBack(t *testing.T) {
	ro := newRollout(t, "rollout-lowered", 3)
	ro.pass()
	ro.setVersion("2.4.1")
	ro.pass()
	ro.kubeControllerManager()
	ro.pass()
	ro.expect("rollout started", 2, "PodReady")
	ro.kubeControllerManager()
	ro.pass()
	ro.expect("bao-2 done, bao-1 released", 1, "PodReady")
	ro.kubeControllerManager() // bao-1 recreated on 2.4.1
	if c := ro.cluster(); c.Status.CurrentVersion != "" || c.Status.HighestVersion != "2.4.1" {
		t.Fatalf("mid-rollout: currentVersion %q, highestVersion %q; want empty and 2.4.1", c.Status.CurrentVersion, c.Status.HighestVersion)
	}

	ro.setVersion("2.4.0")
	ro.pass() // the 2.4.0 template is rendered; the partition is locked with it
	ro.expect("locked", 3, "")
	ro.kubeControllerManager()
	ro.pass()
	ro.expect("refused", 3, "-")
	if d := findDegraded(ro.cluster()); d == nil || d.Reason != v1alpha1.ReasonDowngradeBlocked {
		t.Errorf("Degraded %+v, want DowngradeBlocked", d)
	}
	for _, i := range []int{1, 2} {
		if rev := ro.pod(i).Labels[appsv1.ControllerRevisionHashLabelKey]; rev != "rev-2.4.1" {
			t.Errorf("bao-%d, which ran 2.4.1, is on %s", i, rev)
		}
	}
}

func assertEvents(t *testing.T, rec *events.FakeRecorder, reasons ...string) {
	t.Helper()
	var seen []string
	for {
		select {
		case e := <-rec.Events:
			seen = append(seen, e)
			continue
		default:
		}
		break
	}
	all := strings.Join(seen, "\n")
	for _, r := range reasons {
		if !strings.Contains(all, " "+r+" ") {
			t.Errorf("no %s event among:\n%s", r, all)
		}
	}
}

// TestAScaleDownRemovesEachPeerBeforeItsPod: 5 → 3 takes bao-4, then
// bao-3, out of the Raft configuration before the StatefulSet drops its
// pod, stepping bao-4 down first because it leads.
func TestAScaleDownRemovesEachPeerBeforeItsPod(t *testing.T) {
	ro := newRollout(t, "scaledown", 5)
	ro.moveLeader(0, 4)
	ro.pass()
	c := ro.cluster()
	c.Spec.Replicas = 3
	if err := k8s.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	replicas := func() int32 { return *ro.statefulSet().Spec.Replicas }
	ro.pass()
	if n, got := ro.bao.CallCount("StepDown"), replicas(); n != 1 || got != 5 || len(ro.bao.RemovedPeers) != 0 {
		t.Fatalf("departing leader: %d step-downs, %d replicas, removed %v; want 1, 5, none", n, got, ro.bao.RemovedPeers)
	}
	ro.moveLeader(4, 0)
	ro.pass()
	if got := replicas(); got != 4 || len(ro.bao.RemovedPeers) != 1 || ro.bao.RemovedPeers[0] != "bao-4" {
		t.Fatalf("after the step-down: %d replicas, removed %v; want 4, [bao-4]", got, ro.bao.RemovedPeers)
	}
	delete(ro.bao.AutopilotStateAnswer.Servers, "bao-4")
	ro.pass()
	if got := replicas(); got != 3 || len(ro.bao.RemovedPeers) != 2 || ro.bao.RemovedPeers[1] != "bao-3" {
		t.Fatalf("second step: %d replicas, removed %v; want 3, [bao-4 bao-3]", got, ro.bao.RemovedPeers)
	}
	delete(ro.bao.AutopilotStateAnswer.Servers, "bao-3")
	ro.pass()
	if got := replicas(); got != 3 || len(ro.bao.RemovedPeers) != 2 {
		t.Fatalf("settled: %d replicas, removed %v", got, ro.bao.RemovedPeers)
	}
	ro.scaleUpOverLeftVolumes(replicas)
}

// scaleUpOverLeftVolumes scales 3 back to 5 with the volumes of the peers
// removed before still there (the Retain policy keeps them): they go
// first, since servers started on them would never rejoin, and only then
// does the StatefulSet grow.
func (ro *rollout) scaleUpOverLeftVolumes(replicas func() int32) {
	t, ctx := ro.t, context.Background()
	for _, name := range []string{"data-bao-3", "data-bao-4"} {
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ro.ns}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}
		if err := k8s.Create(ctx, claim); err != nil {
			t.Fatal(err)
		}
	}
	c := ro.cluster()
	c.Spec.Replicas = 5
	if err := k8s.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	ro.pass()
	if got := replicas(); got != 3 {
		t.Fatalf("with the removed peers' volumes still there: %d replicas, want 3", got)
	}
	for _, name := range []string{"data-bao-3", "data-bao-4"} {
		claim := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ro.ns, Name: name}, claim); err != nil || claim.DeletionTimestamp == nil {
			t.Fatalf("volume %s of a removed peer: %v, deletion %v; want it being deleted", name, err, claim.DeletionTimestamp)
		}
	}
	assertEvents(t, ro.rec, "StaleVolumeDeleted")
	ro.pass()
	if got := replicas(); got != 3 {
		t.Fatalf("while the removed peers' volumes are still being deleted: %d replicas, want 3", got)
	}
	for _, name := range []string{"data-bao-3", "data-bao-4"} { // the PVC protection controller lets them go
		claim := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ro.ns, Name: name}, claim); err != nil {
			t.Fatal(err)
		}
		claim.Finalizers = nil
		if err := k8s.Update(ctx, claim); err != nil {
			t.Fatal(err)
		}
	}
	ro.pass()
	if got := replicas(); got != 5 {
		t.Fatalf("after the stale volumes went: %d replicas, want 5", got)
	}
}

// TestAServerDownMidRolloutHoldsTheNextRelease injects the fault the peer
// check guards against: bao-2 has rolled, then bao-0, which was not
// rolled, crashes (its pod is not Ready, the kubelet reports the exit).
// Releasing bao-1 now would take a second of three servers down by the
// operator's own hand, so bao-1 is held, and the Upgrading condition
// names bao-0 and why. Once bao-0 is back but autopilot still reports it
// unhealthy, bao-1 is still held; only a healthy bao-0 lets it go.
func TestAServerDownMidRolloutHoldsTheNextRelease(t *testing.T) {
	ro := newRollout(t, "rollout-peer-down", 3)
	ro.pass()
	ro.setVersion("2.4.1")
	ro.pass()
	ro.kubeControllerManager()
	ro.pass()
	ro.expect("rollout started", 2, "PodReady")
	ro.kubeControllerManager() // bao-2 recreated on the new revision

	ro.setReady(0, false, &corev1.ContainerStatus{Name: podstate.ContainerName, RestartCount: 3,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 1, Reason: "Error", Message: "raft: failed to open the log store"}}})
	for range 2 {
		ro.pass()
		ro.kubeControllerManager()
	}
	if p := ro.partition(); p != 2 {
		t.Fatalf("partition %d with bao-0 down: bao-1 was released, want it held at 2", p)
	}
	if pod := ro.pod(1); pod.Labels[appsv1.ControllerRevisionHashLabelKey] != "rev-2.4.0" {
		t.Fatalf("bao-1 moved to %s while bao-0 was down", pod.Labels[appsv1.ControllerRevisionHashLabelKey])
	}
	up := meta.FindStatusCondition(ro.cluster().Status.Conditions, v1alpha1.ConditionUpgrading)
	if up == nil || !strings.Contains(up.Message, "bao-0 is not Ready") || !strings.Contains(up.Message, "CrashLoopBackOff") {
		t.Fatalf("Upgrading %+v: want a message naming bao-0 and its container's state", up)
	}

	ro.setReady(0, true, nil)
	unhealthy := ro.bao.AutopilotStateAnswer.Servers["bao-0"]
	unhealthy.Healthy = false
	ro.bao.AutopilotStateAnswer.Servers["bao-0"] = unhealthy
	ro.pass()
	ro.kubeControllerManager()
	if p := ro.partition(); p != 2 {
		t.Fatalf("partition %d with bao-0 unhealthy in autopilot: bao-1 was released", p)
	}
	up = meta.FindStatusCondition(ro.cluster().Status.Conditions, v1alpha1.ConditionUpgrading)
	if up == nil || !strings.Contains(up.Message, "voter bao-0 unhealthy") {
		t.Fatalf("Upgrading %+v: want a message naming the unhealthy voter bao-0", up)
	}

	unhealthy.Healthy = true
	ro.bao.AutopilotStateAnswer.Servers["bao-0"] = unhealthy
	ro.pass()
	ro.expect("bao-1 released once every peer is back", 1, "PodReady")
}

// setReady plays the kubelet: pod i's Ready condition, and optionally
// what it reports of the OpenBao container.
func (ro *rollout) setReady(i int, ready bool, container *corev1.ContainerStatus) {
	ro.t.Helper()
	pod := ro.pod(i)
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	pod.Status.ContainerStatuses = nil
	if container != nil {
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{*container}
	}
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		ro.t.Fatal(err)
	}
}
