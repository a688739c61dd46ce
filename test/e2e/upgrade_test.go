package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/internal/images"
	"github.com/openbao/operator/test/localnode"
)

// TestRolloutsKeepWritesFlowing forms a 3-voter cluster and, while a
// plain client writes through the client Service (one write every 100 ms,
// one retry after 100 ms; what it fails is a figure), rolls it from 2.4.0
// to the same source stamped 2.4.1, then rolls a config change with the
// operator killed three times mid-way. Not one write may fail after 10 s
// of retries, and every acknowledged write must read back. A
// downgrade is then refused without a pod moving, and a scale 3 -> 5 -> 3
// leaves 3 Raft peers.
func TestRolloutsKeepWritesFlowing(t *testing.T) {
	cl := installOperator(t)
	t.Parallel()
	ctx := context.Background()
	next := importNextOpenBao(t)
	ns := createNamespace(ctx, t, cl, "e2e-rollout")
	createCluster(ctx, t, cl, ns, "bao")
	token, caPEM := waitRunning(ctx, t, cl, ns, replicas)
	w := startWriter(ctx, t, cl, ns, token, caPEM)
	from := clusterStatus(ctx, t, cl, ns, "bao")["currentVersion"]

	w.resetGap()
	_, failedBefore, _ := w.mark()
	m := rollTo(ctx, t, cl, ns, map[string]any{"version": next}, 0)
	m.replacedTwice("the version rollout")
	acked, failedAfter, gap := w.mark()
	logf("rollout %s -> %s: %s, sum of the pod restarts %s (%.2fx); a plain client (one write every %s, one retry after %s) "+
		"failed %d writes in it, longest gap between acks %s; %d writes acked so far",
		from, images.OpenBaoNextVersion, m.total, m.restarts, m.ratio(), writeEvery, writeRetryAfter, failedAfter-failedBefore,
		gap.Round(10*time.Millisecond), acked)
	if st := clusterStatus(ctx, t, cl, ns, "bao"); st["currentVersion"] != images.OpenBaoNextVersion {
		t.Fatalf("currentVersion %v after the rollout, want %s", st["currentVersion"], images.OpenBaoNextVersion)
	}

	// A restart asked with the plugin rolls like any template change (the
	// held config change below rolls one); the operator is killed as it
	// goes, and the request is carried out once all the same.
	bin := buildPlugin(t)
	m = rollBy(ctx, t, cl, ns, func() { pluginRestart(t, bin, ns) }, 3)
	m.replacedTwice("the restart")
	logf("kubectl openbao restart rolled with the operator killed 3 times: %s, sum of the pod restarts %s", m.total, m.restarts)
	waitRestartCompleted(ctx, t, cl, ns)

	refuseDowngrade(ctx, t, cl, ns)
	scaleTo(ctx, t, cl, ns, token, caPEM, 5)
	scaleTo(ctx, t, cl, ns, token, caPEM, 3)
	pausedHoldsThenConverges(ctx, t, cl, ns, token, caPEM)

	_, _, longest := w.finish(t)
	logf("longest gap between acks since the version rollout %s", longest.Round(10*time.Millisecond))
	assertNoLeaks(ctx, t, cl, ns, nil)
}

// importNextOpenBao builds the image of bao stamped as the next release,
// imports it into the node and returns its tag, the version a cluster
// names to roll to it.
func importNextOpenBao(t *testing.T) string {
	t.Helper()
	built, err := localnode.BuildImages(node, localnode.ImageOpenBaoNext)
	if err != nil {
		t.Fatal(err)
	}
	if err := localnode.ImportImages(node, built, logf); err != nil {
		t.Fatal(err)
	}
	_, tag, _ := strings.Cut(built[localnode.ImageOpenBaoNext].Ref, ":")
	return tag
}

// waitRunning waits for Running with n ready servers and n voters, and
// returns the root token and the CA.
func waitRunning(ctx context.Context, t testing.TB, cl client.Client, ns string, n int) (string, []byte) {
	t.Helper()
	waitFor(ctx, t, 5*time.Minute, fmt.Sprintf("phase Running with %d ready servers", n), func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "bao")
		return st["phase"] == "Running" && fmt.Sprint(st["readyReplicas"]) == fmt.Sprint(n), fmt.Sprint(st)
	})
	token := string(secretData(ctx, t, cl, ns, "bao-root-token", "token"))
	caPEM := secretData(ctx, t, cl, ns, "bao-tls-ca", "ca.crt")
	waitVotersN(ctx, t, cl, ns, token, caPEM, n, n)
	return token, caPEM
}

// waitVotersN waits until the Raft configuration holds servers members, all
// voters, read through pod-0.
func waitVotersN(ctx context.Context, t testing.TB, cl client.Client, ns, token string, caPEM []byte, members, voters int) {
	t.Helper()
	waitFor(ctx, t, 3*time.Minute, fmt.Sprintf("%d Raft servers, %d voting", members, voters), func() (bool, string) {
		pod := serverPods(ctx, t, cl, ns, 1)[0]
		s, v, err := raftMembers(pod, ns, caPEM, token)
		return err == nil && len(s) == members && len(v) == voters, fmt.Sprintf("servers %v voters %v (%v)", s, v, err)
	})
}

func patchSpec(ctx context.Context, t testing.TB, cl client.Client, ns string, spec map[string]any) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": spec})
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("openbao.org/v1alpha1")
	u.SetKind("OpenBaoCluster")
	u.SetNamespace(ns)
	u.SetName("bao")
	if err := cl.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("patch spec %s: %v", patch, err)
	}
}

// rolloutFigures times one rollout: from the spec change to
// UpgradeComplete, and each pod from its deletion to its successor Ready.
type rolloutFigures struct {
	total, restarts time.Duration
	ackedBefore     int
	// twice counts the pods replaced more than once by the rollout.
	twice map[string]int
	// firstGone is when the first voter was seen deleted.
	firstGone time.Time
	// pods is each pod's part of the rollout, in the order they went.
	pods []podPhases
}

// podPhases splits one pod's part of a rollout into phases, each timed
// from the end of the one before: the first from the end of the pod
// before (for the first pod, from the spec change).
type podPhases struct {
	name string
	// steppedDown says the pod's server was seen active during the
	// rollout before its pod was deleted: the operator stepped it down.
	steppedDown bool
	// release is the wait for the release decision (the pod before it
	// counted, or the preflight, then a step-down if it is active), up to
	// its deletion; stop is from its deletion to its container stopped
	// (the successor pod object appears); start is from there to the
	// successor Ready; count is from Ready until the operator records it
	// rolled (status.upgrade.completedPods): the release rule, the
	// leader's view of it, is satisfied.
	release, stop, start, count time.Duration
}

func (p podPhases) String() string {
	active := ""
	if p.steppedDown {
		active = " (stepped down)"
	}
	r := func(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
	return fmt.Sprintf("%s%s: release wait %s, deletion -> stop %s, stop -> Ready %s, Ready -> counted %s",
		p.name, active, r(p.release), r(p.stop), r(p.start), r(p.count))
}

// replacedTwice logs the pods a rollout replaced more than once. It is a
// figure, not yet a check: in two of four runs one pod of a rollout was
// replaced a second time (once right after an operator kill, once in the
// paused rollout that also scales 3 -> 4), with no write lost and the
// longest gap under 700 ms. The cause found since: a pass that lowered the
// partition and lost its status write (a kill, or a conflict with a stale
// cache) raised the partition again in the next, and the StatefulSet
// controller recreated the released pod on the old template
// (upgrade.adopt and lostStart now take such a release on); the tracker
// logs the revision of any second successor to tell if another cause
// remains.
func (m rolloutFigures) replacedTwice(what string) {
	if len(m.twice) > 0 {
		logf("%s replaced pods more than once: %v", what, m.twice)
	}
}

func (m rolloutFigures) ratio() float64 { return m.total.Seconds() / m.restarts.Seconds() }
func (m rolloutFigures) acked(w *writer) int {
	n, _, _ := w.mark()
	return n
}
func (m rolloutFigures) gap(w *writer) time.Duration {
	_, _, g := w.mark()
	return g.Round(10 * time.Millisecond)
}

// rollTo changes the spec and waits for the rollout to complete, killing
// the manager kills times as the partition moves.
func rollTo(ctx context.Context, t testing.TB, cl client.Client, ns string, spec map[string]any, kills int) rolloutFigures {
	t.Helper()
	return rollBy(ctx, t, cl, ns, func() { patchSpec(ctx, t, cl, ns, spec) }, kills)
}

// rollBy is rollTo with the change made by trigger.
func rollBy(ctx context.Context, t testing.TB, cl client.Client, ns string, trigger func(), kills int) rolloutFigures {
	t.Helper()
	tracker := trackRestarts(ctx, t, cl, ns)
	before := statefulSetRevisions(ctx, t, cl, ns)
	if kills > 0 {
		end := reserveKills(t)
		defer end()
	}
	start := time.Now()
	shutdowns := followShutdowns(ctx, t, ns, serverPods(ctx, t, cl, ns, replicas), start)
	defer shutdowns()
	trigger()
	killed, lastPartition, lastStep, lastUpdate := 0, "", "", before.update
	counted := map[string]time.Time{}
	waitEvery(ctx, t, 100*time.Millisecond, 8*time.Minute, "the rollout to complete", func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "bao")
		up, _ := st["upgrade"].(map[string]any)
		completed, _ := up["completedPods"].([]any)
		for _, name := range completed {
			if _, seen := counted[fmt.Sprint(name)]; !seen {
				counted[fmt.Sprint(name)] = time.Now()
			}
		}
		// What the rollout waits for, without the countdown, whenever it changes.
		waiting, _, _ := strings.Cut(conditionMessage(st, "Upgrading"), "; waiting (")
		if step := fmt.Sprintf("partition %v (StatefulSet %s), step %v: %s", up["currentPartition"], livePartition(ctx, cl, ns), up["step"], waiting); up != nil && step != lastStep {
			logf("  %5.1fs %s", time.Since(start).Seconds(), step)
			lastStep = step
		}
		if up != nil && killed < kills && fmt.Sprint(up["currentPartition"]) != lastPartition {
			lastPartition = fmt.Sprint(up["currentPartition"])
			killReserved(ctx, t, cl)
			killed++
			logf("  %5.1fs operator killed", time.Since(start).Seconds())
		}
		// UpgradeComplete stays from the rollout before until this one
		// starts: done also needs the StatefulSet on a new revision.
		rev := statefulSetRevisions(ctx, t, cl, ns)
		if rev.update != lastUpdate {
			logf("  %5.1fs the StatefulSet's update revision is %s%s", time.Since(start).Seconds(), rev.update,
				templateChange(ctx, cl, ns, lastUpdate, rev.update, before.update))
			lastUpdate = rev.update
		}
		rolled := rev.update != before.update && rev.current == rev.update
		done := rolled && up == nil && hasConditionReason(st, "UpgradeComplete") && st["phase"] == "Running"
		return done, fmt.Sprintf("phase %v upgrade %v revisions %+v", st["phase"], up, rev)
	})
	doneAt := time.Now()
	total := doneAt.Sub(start)
	restarts, twice := tracker.stop()
	if len(restarts) != replicas {
		t.Fatalf("%d pods were restarted by the rollout, want %d: %v", len(restarts), replicas, restarts)
	}
	var sum time.Duration
	for name, d := range restarts {
		logf("  %s restarted in %s", name, d.Round(100*time.Millisecond))
		sum += d
	}
	if killed < kills {
		t.Errorf("the operator was killed %d times, want %d", killed, kills)
	}
	m := rolloutFigures{total: total.Round(100 * time.Millisecond), restarts: sum.Round(100 * time.Millisecond), twice: twice}
	for _, at := range tracker.goneAt() {
		if m.firstGone.IsZero() || at.Before(m.firstGone) {
			m.firstGone = at
		}
	}
	m.pods = tracker.phases(start, counted, doneAt)
	for _, p := range m.pods {
		logf("  %s", p)
	}
	return m
}

func conditionMessage(status map[string]any, condType string) string {
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == condType {
			return fmt.Sprint(m["message"])
		}
	}
	return ""
}

type revisions struct{ current, update string }

func statefulSetRevisions(ctx context.Context, t testing.TB, cl client.Client, ns string) revisions {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, sts); err != nil {
		t.Fatal(err)
	}
	return revisions{current: sts.Status.CurrentRevision, update: sts.Status.UpdateRevision}
}

// restartTracker times, per server pod, from the moment it is deleted to
// the moment its successor is Ready.
type restartTracker struct {
	mu   sync.Mutex
	gone map[string]time.Time
	// successor is when the new pod object appeared: the old one has
	// terminated by then.
	successor map[string]time.Time
	took      map[string]time.Duration
	// successorUID is the first successor of each pod; another UID after
	// it is a second restart, counted in again.
	successorUID map[string]types.UID
	again        map[string]int
	// active holds the pods whose server was seen active before their
	// deletion.
	active  map[string]bool
	stopped chan struct{}
	done    chan struct{}
}

func trackRestarts(ctx context.Context, t testing.TB, cl client.Client, ns string) *restartTracker {
	t.Helper()
	return trackRestartsOf(ctx, cl, ns, serverPods(ctx, t, cl, ns, replicas))
}

// trackRestartsOf tracks the given pods.
func trackRestartsOf(ctx context.Context, cl client.Client, ns string, pods []corev1.Pod) *restartTracker {
	tr := &restartTracker{gone: map[string]time.Time{}, successor: map[string]time.Time{}, took: map[string]time.Duration{},
		successorUID: map[string]types.UID{}, again: map[string]int{}, active: map[string]bool{}, stopped: make(chan struct{}), done: make(chan struct{})}
	uids := map[string]types.UID{}
	for _, p := range pods {
		uids[p.Name] = p.UID
	}
	go func() {
		defer close(tr.done)
		for {
			select {
			case <-tr.stopped:
				return
			case <-time.After(100 * time.Millisecond):
			}
			tr.observe(ctx, cl, ns, uids)
		}
	}()
	return tr
}

func (tr *restartTracker) observe(ctx context.Context, cl client.Client, ns string, uids map[string]types.UID) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for name, uid := range uids {
		p := &corev1.Pod{}
		err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)
		now := time.Now()
		if _, seen := tr.gone[name]; !seen && (err != nil || p.UID != uid || p.DeletionTimestamp != nil) {
			tr.gone[name] = now
		}
		if _, seen := tr.gone[name]; !seen && p.Labels["openbao-active"] == "true" {
			tr.active[name] = true
		}
		if _, seen := tr.successor[name]; !seen && err == nil && p.UID != uid {
			tr.successor[name], tr.successorUID[name] = now, p.UID
		}
		if first, seen := tr.successorUID[name]; seen && err == nil && p.UID != uid && p.UID != first {
			tr.again[name]++
			tr.successorUID[name] = p.UID
			sts := &appsv1.StatefulSet{}
			_ = cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, sts)
			partition := "none"
			if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
				partition = fmt.Sprint(*ru.Partition)
			}
			logf("  %s replaced again, %.1fs after its first successor: the new pod is on revision %s; the StatefulSet holds "+
				"partition %s, update revision %s, current %s", name, now.Sub(tr.successor[name]).Seconds(),
				p.Labels[appsv1.ControllerRevisionHashLabelKey], partition, sts.Status.UpdateRevision, sts.Status.CurrentRevision)
		}
		if _, doneAlready := tr.took[name]; err == nil && p.UID != uid && podReady(p) && !doneAlready {
			tr.took[name] = now.Sub(tr.gone[name])
			logf("  %s: old pod terminated in %s, its successor Ready %s later", name,
				tr.successor[name].Sub(tr.gone[name]).Round(100*time.Millisecond), now.Sub(tr.successor[name]).Round(100*time.Millisecond))
		}
	}
}

// goneAt says when each pod was seen deleted, and readyAt when its
// successor was seen Ready; call them after stop.
func (tr *restartTracker) goneAt() map[string]time.Time { return tr.gone }
func (tr *restartTracker) readyAt() map[string]time.Time {
	out := map[string]time.Time{}
	for name, d := range tr.took {
		out[name] = tr.gone[name].Add(d)
	}
	return out
}

// phases splits each replaced pod's part of the rollout that began at
// start and was done at done (podPhases); counted says when each pod was
// seen recorded rolled, and a pod never seen so (the last one, recorded
// in the pass that completes the rollout) counts at done. Call it after
// stop.
func (tr *restartTracker) phases(start time.Time, counted map[string]time.Time, done time.Time) []podPhases {
	var names []string
	for name := range tr.took {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return tr.gone[names[i]].Before(tr.gone[names[j]]) })
	var out []podPhases
	prev := start
	for _, name := range names {
		gone, stopped, ready := tr.gone[name], tr.successor[name], tr.gone[name].Add(tr.took[name])
		at, ok := counted[name]
		if !ok {
			at = done
		}
		if at.Before(ready) { // each is seen by its own poll
			at = ready
		}
		out = append(out, podPhases{name: name, steppedDown: tr.active[name], release: max(0, gone.Sub(prev)),
			stop: stopped.Sub(gone), start: ready.Sub(stopped), count: at.Sub(ready)})
		prev = at
	}
	return out
}

// stop ends the tracking and returns how long each replaced pod took,
// and how many more times a pod was replaced after its first successor.
func (tr *restartTracker) stop() (map[string]time.Duration, map[string]int) {
	close(tr.stopped)
	<-tr.done
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.took, tr.again
}

// refuseDowngrade names the previous release: the admission webhook
// refuses the change, naming spec.version and the running release, and no
// pod restarts. (The controller's own refusal, DowngradeBlocked, for a
// change that reaches it without the webhook, is proven in envtest.)
func refuseDowngrade(ctx context.Context, t *testing.T, cl client.Client, ns string) {
	t.Helper()
	before := serverPods(ctx, t, cl, ns, replicas)
	built, err := localnode.BuildImages(node, localnode.ImageOpenBao)
	if err != nil {
		t.Fatal(err)
	}
	_, older, _ := strings.Cut(built[localnode.ImageOpenBao].Ref, ":")
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"version": older}})
	u := clusterObjectNow(ctx, t, cl, ns)
	generation := u.GetGeneration()
	err = cl.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch))
	if err == nil || !strings.Contains(err.Error(), "spec.version") || !strings.Contains(err.Error(), "older than the running") {
		t.Fatalf("a downgrade to %s: got %v, want a refusal naming spec.version and the running release", older, err)
	}
	if now := clusterObjectNow(ctx, t, cl, ns).GetGeneration(); now != generation {
		t.Fatalf("the refused downgrade changed the spec: generation %d -> %d", generation, now)
	}
	for _, p := range serverPods(ctx, t, cl, ns, replicas) {
		if prev := podByName(before, p.Name); p.UID != prev.UID {
			t.Errorf("%s was restarted by a refused downgrade", p.Name)
		}
	}
	if st := clusterStatus(ctx, t, cl, ns, "bao"); st["phase"] != "Running" {
		t.Errorf("phase %v after a refused downgrade", st["phase"])
	}
	logf("downgrade to %s refused at admission; no pod restarted", older)
}

func clusterObjectNow(ctx context.Context, t *testing.T, cl client.Client, ns string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("openbao.org/v1alpha1")
	u.SetKind("OpenBaoCluster")
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, u); err != nil {
		t.Fatal(err)
	}
	return u
}

// scaleTo changes spec.replicas and waits for n pods, n Raft servers and n
// voters.
// pausedHoldsThenConverges pauses the cluster, changes its config and
// replicas, and checks for a while that nothing moves: the StatefulSet,
// its revision and every pod stay as they were. Unpaused, the change rolls
// through and the cluster grows to 4 voters; it then scales back to 3.
func pausedHoldsThenConverges(ctx context.Context, t *testing.T, cl client.Client, ns, token string, caPEM []byte) {
	t.Helper()
	patchSpec(ctx, t, cl, ns, map[string]any{"paused": true})
	waitFor(ctx, t, time.Minute, "phase Paused", func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "bao")
		return st["phase"] == "Paused", fmt.Sprint(st["phase"])
	})
	before := statefulSetRevisions(ctx, t, cl, ns)
	uids := map[string]types.UID{}
	for _, p := range serverPods(ctx, t, cl, ns, replicas) {
		uids[p.Name] = p.UID
	}
	patchSpec(ctx, t, cl, ns, map[string]any{"replicas": 4, "config": map[string]any{"default_lease_ttl": "720h"}})
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		sts := &appsv1.StatefulSet{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, sts); err != nil {
			t.Fatal(err)
		}
		if *sts.Spec.Replicas != replicas || statefulSetRevisions(ctx, t, cl, ns).update != before.update {
			t.Fatalf("paused, the StatefulSet changed: %d replicas, revisions %+v (before %+v)",
				*sts.Spec.Replicas, statefulSetRevisions(ctx, t, cl, ns), before)
		}
		for _, p := range serverPods(ctx, t, cl, ns, replicas) {
			if p.UID != uids[p.Name] {
				t.Fatalf("paused, %s was replaced", p.Name)
			}
		}
	}
	m := rollTo(ctx, t, cl, ns, map[string]any{"paused": false}, 0)
	scaleTo(ctx, t, cl, ns, token, caPEM, 4)
	m.replacedTwice("the unpaused rollout")
	logf("unpaused: the held config change rolled in %s and the cluster grew to 4 voters", m.total)
	scaleTo(ctx, t, cl, ns, token, caPEM, 3)
}

func scaleTo(ctx context.Context, t *testing.T, cl client.Client, ns, token string, caPEM []byte, n int) {
	t.Helper()
	start := time.Now()
	patchSpec(ctx, t, cl, ns, map[string]any{"replicas": n})
	waitFor(ctx, t, 4*time.Minute, fmt.Sprintf("%d ready servers", n), func() (bool, string) {
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": "bao"}); err != nil {
			return false, err.Error()
		}
		ready := 0
		for i := range pods.Items {
			if podReady(&pods.Items[i]) && pods.Items[i].DeletionTimestamp == nil {
				ready++
			}
		}
		return ready == n && len(pods.Items) == n, fmt.Sprintf("%d pods, %d ready", len(pods.Items), ready)
	})
	waitVotersN(ctx, t, cl, ns, token, caPEM, n, n)
	logf("scaled to %d servers, all voting, in %s", n, time.Since(start).Round(100*time.Millisecond))
}

// followShutdowns follows the log of each pod from now on, with the
// kubelet's timestamps, and returns a func that prints how each one shut
// down: its lines from OpenBao's "shutdown triggered" to its last, timed
// from the first. Operator and server logs are gone after a run; this is
// the timeline of a server that takes long to stop.
func followShutdowns(ctx context.Context, t testing.TB, ns string, pods []corev1.Pod, start time.Time) func() {
	t.Helper()
	cs := clientset(t)
	type stream struct {
		name string
		text bytes.Buffer
		done chan struct{}
		body io.ReadCloser
	}
	var streams []*stream
	since := metav1.NewTime(start)
	for _, p := range pods {
		body, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: "openbao", Follow: true, Timestamps: true,
			SinceTime: &since}).Stream(ctx)
		if err != nil {
			logf("  cannot follow the log of %s: %v", p.Name, err)
			continue
		}
		s := &stream{name: p.Name, done: make(chan struct{}), body: body}
		go func() { _, _ = io.Copy(&s.text, body); close(s.done) }()
		streams = append(streams, s)
	}
	return func() {
		for _, s := range streams {
			select {
			case <-s.done:
			case <-time.After(2 * time.Second):
				_ = s.body.Close()
				<-s.done
			}
			logf("  %s shut down:%s", s.name, shutdownLines(s.text.String(), start))
			if lines := raftLines(s.text.String(), start); lines != "" {
				logf("  %s's Raft replication to its peers, timed from the rollout's start:%s", s.name, lines)
			}
		}
	}
}

// shutdownLines picks the lines from the shutdown's trigger on, each timed
// from the trigger, and the trigger timed from the rollout's start.
func shutdownLines(log string, start time.Time) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	from := -1
	for i, l := range lines {
		if strings.Contains(l, "shutdown triggered") {
			from = i
		}
	}
	if from < 0 {
		return " no shutdown in its log"
	}
	at := func(l string) (time.Time, string) {
		ts, rest, _ := strings.Cut(l, " ")
		tm, _ := time.Parse(time.RFC3339Nano, ts)
		return tm, rest
	}
	t0, _ := at(lines[from])
	var out strings.Builder
	fmt.Fprintf(&out, " triggered %.1fs into the rollout", t0.Sub(start).Seconds())
	tail := lines[from:]
	if len(tail) > 30 {
		tail = append(tail[:15:15], tail[len(tail)-15:]...)
	}
	for _, l := range tail {
		tm, rest := at(l)
		if len(rest) > 220 {
			rest = rest[:220]
		}
		fmt.Fprintf(&out, "\n      +%5.2fs %s", tm.Sub(t0).Seconds(), rest)
	}
	return out.String()
}

// raftLines picks what a leader's Raft library logs of its replication to
// a peer it cannot reach (the dial's error tells a stale DNS answer from a
// refused or timed-out connection) and of its resuming, each timed from
// the rollout's start: the timeline of the leader's backoff to a replaced
// server.
func raftLines(log string, start time.Time) string {
	var out strings.Builder
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "appendEntries") && !strings.Contains(l, "heartbeat") && !strings.Contains(l, "pipelin") &&
			!strings.Contains(l, "entering leader state") && !strings.Contains(l, "added peer") {
			continue
		}
		if n++; n > 40 {
			out.WriteString("\n      ...")
			break
		}
		ts, rest, _ := strings.Cut(l, " ")
		tm, _ := time.Parse(time.RFC3339Nano, ts)
		if len(rest) > 260 {
			rest = rest[:260]
		}
		fmt.Fprintf(&out, "\n      %6.2fs %s", tm.Sub(start).Seconds(), rest)
	}
	return out.String()
}

// templateChange says what changed in the pod template between two
// StatefulSet revisions, read from their ControllerRevisions: a second
// revision during one rollout replaces pods again.
func templateChange(ctx context.Context, cl client.Client, ns, from, to, first string) string {
	if from == "" || from == to {
		return ""
	}
	read := func(name string) map[string]string {
		cr := &appsv1.ControllerRevision{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cr); err != nil {
			return map[string]string{"error": err.Error()}
		}
		var v any
		_ = json.Unmarshal(cr.Data.Raw, &v)
		out := map[string]string{}
		flatten("", v, out)
		return out
	}
	a, b := read(from), read(to)
	var diff []string
	for k, v := range b {
		if a[k] != v {
			diff = append(diff, fmt.Sprintf("%s: %.80q -> %.80q", k, a[k], v))
		}
	}
	for k, v := range a {
		if _, ok := b[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: %.80q removed", k, v))
		}
	}
	sort.Strings(diff)
	if len(diff) > 12 {
		diff = append(diff[:12], fmt.Sprintf("and %d more", len(diff)-12))
	}
	what := "the change"
	if from != first {
		what = "a second revision in one rollout"
	}
	return fmt.Sprintf(" (%s, from %s: %s)", what, from, strings.Join(diff, "; "))
}

func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			flatten(prefix+"."+k, e, out)
		}
	case []any:
		for i, e := range x {
			flatten(fmt.Sprintf("%s[%d]", prefix, i), e, out)
		}
	default:
		out[prefix] = fmt.Sprint(x)
	}
}

// livePartition is the partition the StatefulSet's spec holds.
func livePartition(ctx context.Context, cl client.Client, ns string) string {
	sts := &appsv1.StatefulSet{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, sts); err != nil {
		return "unread"
	}
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		return fmt.Sprint(*ru.Partition)
	}
	return "none"
}
