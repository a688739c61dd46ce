package envtest_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
)

// drainBound is the drain guard's bound in these cases (60 s in the
// operator), short so that the case that waits it out stays fast.
const drainBound = 3 * time.Second

// drainToken is the upgrade role's token the guard steps servers down
// with; no event may carry it.
const drainToken = "s.drain-guard-upgrade-token"

// drainCluster plays three OpenBao servers behind the operator's clients:
// each pod's sys/health says whether it is the active one, a step-down
// moves leadership to the next pod (unless stuck), and the leader's
// autopilot state lists the three as voters.
type drainCluster struct {
	*openbaofake.Client // login, leader index, everything else
	mu                  sync.Mutex
	c                   *v1alpha1.OpenBaoCluster
	active              int
	stuck               bool // a step-down that never completes
	unhealthy           string
	// behind is a pod whose log the leader's replication has not reached
	// (a restarted server the leader still dials at its old address):
	// its sys/leader reports an index below the leader's.
	behind    string
	stepDowns []int
}

// server is the client of one pod (-1: the client Service).
type drainServer struct {
	*drainCluster
	pod int
}

func (s drainServer) Health(context.Context) (openbao.Health, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return openbao.Health{Initialized: true, Standby: s.pod >= 0 && s.pod != s.active}, nil
}

func (s drainServer) Leader(ctx context.Context) (openbao.Leader, error) {
	s.mu.Lock()
	behind := s.pod >= 0 && s.c.PodName(s.pod) == s.behind
	s.mu.Unlock()
	l, err := s.Client.Leader(ctx)
	if behind {
		l.RaftCommittedIndex, l.RaftAppliedIndex = 50, 50
	}
	return l, err
}

func (s drainServer) StepDown(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stepDowns = append(s.stepDowns, s.pod)
	if !s.stuck && s.pod == s.active {
		s.active = (s.active + 1) % 3
	}
	return nil
}

func (s drainServer) AutopilotState(context.Context) (openbao.AutopilotState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	state := openbao.AutopilotState{Healthy: s.unhealthy == "", FailureTolerance: 1, Servers: map[string]openbao.AutopilotServer{}}
	for i := range 3 {
		name := s.c.PodName(i)
		status := "voter"
		if i == s.active {
			status = "leader"
		}
		state.Servers[name] = openbao.AutopilotServer{ID: name, Status: status, Healthy: name != s.unhealthy, LastIndex: 100}
	}
	return state, nil
}

func (d *drainCluster) factory(o openbao.Options) (openbao.Client, error) {
	for i := range 3 {
		if o.ServerName == d.c.PodDNSName(i) {
			return drainServer{d, i}, nil
		}
	}
	return drainServer{d, -1}, nil
}

func (d *drainCluster) set(change func(*drainCluster)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	change(d)
}

func (d *drainCluster) state() (active int, stepDowns int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.active, len(d.stepDowns)
}

// drainEnv is an API server that calls the operator's webhooks, the drain
// guard among them, and one initialized three-server cluster.
type drainEnv struct {
	t   *testing.T
	k   client.Client
	bao *drainCluster
	rec *events.FakeRecorder
	// answers are the API server's answers to evictions, as the client
	// saw them before its own retries (client-go retries a 429 after its
	// Retry-After, as kubectl drain's does).
	answers *answerLog
}

// answerLog records, for each eviction request, 201 or "429 guard" (the
// drain guard's refusal) or the code.
type answerLog struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (l *answerLog) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/eviction") {
		return resp, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	answer := http.StatusText(resp.StatusCode)
	if resp.StatusCode == http.StatusTooManyRequests && bytes.Contains(body, []byte("vpodeviction.openbao.org")) {
		answer = "guard"
	}
	l.mu.Lock()
	l.seen = append(l.seen, answer)
	l.mu.Unlock()
	return resp, nil
}

func (l *answerLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.seen
	l.seen = nil
	return out
}

func startDrainEnv(t *testing.T) *drainEnv {
	t.Helper()
	ns := webhookNamespace
	c := newCluster(t, ns, "metadata: {name: bao}\nspec: {version: 2.4.0, replicas: 3}\n")
	bao := &drainCluster{c: c, Client: &openbaofake.Client{
		LoginToken: openbao.NewToken(drainToken), LoginTTL: 15 * time.Minute,
		LeaderAnswer: openbao.Leader{RaftCommittedIndex: 100, RaftAppliedIndex: 100},
	}}
	rec := events.NewFakeRecorder(200)
	var r *controllers.OpenBaoClusterReconciler
	k, cfg := startWebhookEnv(t, controllers.Platform{}, func(mgr ctrl.Manager) {
		direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		if r, err = newReconciler(direct, direct, rec); err != nil {
			t.Fatal(err)
		}
		r.OpenBao = bao.factory
		controllers.SetupEvictionWebhook(mgr, r, drainBound)
	})
	ctx := context.Background()
	if err := k.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Status = v1alpha1.OpenBaoClusterStatus{Initialized: true, IdentityConfigured: true, CurrentVersion: "2.4.0"}
	if err := k.Status().Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	// One pass writes what the guard reads: the CA, the upgrade role's
	// ServiceAccount, the PodDisruptionBudget.
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	answers := &answerLog{}
	logged := rest.CopyConfig(cfg)
	logged.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { answers.next = rt; return answers }
	k, err := client.New(logged, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	e := &drainEnv{t: t, k: k, bao: bao, rec: rec, answers: answers}
	for i := range 3 {
		e.runPod(i)
	}
	e.disruptionController()
	return e
}

// runPod plays the StatefulSet controller and the kubelet: pod i exists,
// runs and is Ready.
func (e *drainEnv) runPod(i int) {
	e.t.Helper()
	ctx := context.Background()
	c := e.bao.c
	labels := c.PodSelectorLabels()
	labels[v1alpha1.LabelCluster] = c.Name
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: c.PodName(i), Namespace: c.Namespace, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "openbao", Image: "openbao"}}},
	}
	if err := e.k.Create(ctx, pod); err != nil {
		e.t.Fatal(err)
	}
	pod.Status.Phase, pod.Status.PodIP = corev1.PodRunning, podIP(i)
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := e.k.Status().Update(ctx, pod); err != nil {
		e.t.Fatal(err)
	}
}

// disruptionController plays the disruption controller: the budget
// allows one disruption, so that what refuses an eviction here is the
// guard alone.
func (e *drainEnv) disruptionController() {
	e.t.Helper()
	ctx := context.Background()
	pdbs := &policyv1.PodDisruptionBudgetList{}
	if err := e.k.List(ctx, pdbs, client.InNamespace(e.bao.c.Namespace)); err != nil || len(pdbs.Items) != 1 {
		e.t.Fatalf("want the cluster's one PodDisruptionBudget: %v, %d", err, len(pdbs.Items))
	}
	pdb := pdbs.Items[0]
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 1,
		CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3}
	if err := e.k.Status().Update(ctx, &pdb); err != nil {
		e.t.Fatal(err)
	}
}

// evict asks the Eviction API, as kubectl drain does, to evict pod i,
// until it goes (client-go retries each 429 after its Retry-After, ten
// times at most); it returns the answers in order.
func (e *drainEnv) evict(i int) []string {
	e.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: e.bao.c.PodName(i), Namespace: e.bao.c.Namespace}}
	for range 10 {
		err := e.k.SubResource("eviction").Create(context.Background(), pod, &policyv1.Eviction{})
		if err == nil {
			return e.answers.take()
		}
		if !apierrors.IsTooManyRequests(err) {
			e.t.Fatalf("evict pod %d: %v", i, err)
		}
	}
	e.t.Fatalf("pod %d is still not evicted: %v", i, e.answers.take())
	return nil
}

// guardRefusals counts the guard's 429s before the eviction went.
func guardRefusals(t *testing.T, answers []string) int {
	t.Helper()
	if len(answers) == 0 || answers[len(answers)-1] != http.StatusText(http.StatusCreated) {
		t.Fatalf("the eviction did not end in 201: %v", answers)
	}
	for _, a := range answers[:len(answers)-1] {
		if a != "guard" {
			t.Fatalf("refused by another than the guard: %v", answers)
		}
	}
	return len(answers) - 1
}

// evicted: the pod is gone; the StatefulSet controller brings it back.
func (e *drainEnv) evicted(i int) {
	e.t.Helper()
	err := e.k.Get(context.Background(), client.ObjectKey{Namespace: e.bao.c.Namespace, Name: e.bao.c.PodName(i)}, &corev1.Pod{})
	if !apierrors.IsNotFound(err) {
		e.t.Fatalf("pod %d was let through but not evicted: %v", i, err)
	}
	e.runPod(i)
	e.disruptionController()
}

// TestTheDrainGuard: evictions of a three-server cluster through the
// Eviction API and the operator's webhook, in turn on one cluster.
func TestTheDrainGuard(t *testing.T) {
	e := startDrainEnv(t)
	t.Run("a dry-run eviction of the active server steps nothing down and is not held", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: e.bao.c.PodName(0), Namespace: e.bao.c.Namespace}}
		if err := e.k.SubResource("eviction").Create(context.Background(), pod, &policyv1.Eviction{}, client.DryRunAll); err != nil {
			t.Fatalf("a dry-run eviction: %v", err)
		}
		if answers := e.answers.take(); len(answers) != 1 {
			t.Fatalf("a dry-run eviction was refused: %v", answers)
		}
		if active, asked := e.bao.state(); asked != 0 || active != 0 {
			t.Fatalf("a dry run stepped a server down: %d step-downs, active %d", asked, active)
		}
	})
	t.Run("an eviction of the active server waits for its step-down, then goes with another server active", func(t *testing.T) {
		answers := e.evict(0)
		if n := guardRefusals(t, answers); n == 0 {
			t.Fatalf("the active server's eviction went at once: %v", answers)
		}
		if active, asked := e.bao.state(); asked != 1 || active == 0 {
			t.Fatalf("%d step-downs, active server %d; want 1, another than 0", asked, active)
		}
		e.evicted(0)
		seen := takeEvents(e.rec)
		if !strings.Contains(seen, " "+v1alpha1.ReasonDrainStepDown+" ") || strings.Contains(seen, " "+v1alpha1.ReasonDrainTimeBoundReached+" ") {
			t.Fatalf("want a DrainStepDown event and no DrainTimeBoundReached among:\n%s", seen)
		}
		if strings.Contains(seen, drainToken) {
			t.Fatalf("an event carries the upgrade role's token:\n%s", seen)
		}
	})
	t.Run("a standby goes at once", func(t *testing.T) {
		active, before := e.bao.state()
		standby := (active + 1) % 3
		if answers := e.evict(standby); guardRefusals(t, answers) != 0 {
			t.Fatalf("a standby's eviction waited: %v", answers)
		}
		e.evicted(standby)
		if _, after := e.bao.state(); after != before {
			t.Fatalf("a standby's eviction stepped a server down")
		}
	})
	t.Run("a standby waits while the leader's replication does not reach another server, then goes", func(t *testing.T) {
		active, before := e.bao.state()
		standby, restarted := (active+1)%3, (active+2)%3
		// The fault: a restarted server, Ready and healthy in autopilot's
		// eyes, that the leader's replication has not reached yet.
		e.bao.set(func(d *drainCluster) { d.behind = d.c.PodName(restarted) })
		caughtUp := time.AfterFunc(2500*time.Millisecond, func() { e.bao.set(func(d *drainCluster) { d.behind = "" }) })
		defer caughtUp.Stop()
		answers := e.evict(standby)
		if n := guardRefusals(t, answers); n == 0 {
			t.Fatalf("a standby's eviction went while another server was not caught up: %v", answers)
		}
		e.bao.mu.Lock()
		stillBehind := e.bao.behind != ""
		e.bao.mu.Unlock()
		if stillBehind {
			t.Fatalf("the eviction went before the other server caught up: %v", answers)
		}
		e.evicted(standby)
		if _, after := e.bao.state(); after != before {
			t.Fatalf("a standby's eviction stepped a server down")
		}
	})
	t.Run("a pod the operator does not manage goes at once", func(t *testing.T) {
		other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: webhookNamespace},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if err := e.k.Create(context.Background(), other); err != nil {
			t.Fatal(err)
		}
		if err := e.k.SubResource("eviction").Create(context.Background(), other, &policyv1.Eviction{}); err != nil {
			t.Fatalf("another workload's eviction: %v", err)
		}
		if answers := e.answers.take(); len(answers) != 1 {
			t.Fatalf("another workload's eviction waited: %v", answers)
		}
	})
	t.Run("an unhealthy cluster is not held up", func(t *testing.T) {
		active, before := e.bao.state()
		e.bao.set(func(d *drainCluster) { d.unhealthy = d.c.PodName((active + 1) % 3) })
		if answers := e.evict(active); guardRefusals(t, answers) != 0 {
			t.Fatalf("the active server's eviction with a voter unhealthy waited: %v", answers)
		}
		e.evicted(active)
		e.bao.set(func(d *drainCluster) { d.unhealthy = "" })
		if _, after := e.bao.state(); after != before {
			t.Fatalf("an unhealthy cluster's active server was stepped down")
		}
	})
	t.Run("a step-down that never completes holds the eviction no longer than the bound", func(t *testing.T) {
		e.bao.set(func(d *drainCluster) { d.stuck = true })
		active, _ := e.bao.state()
		first := time.Now()
		answers := e.evict(active)
		if guardRefusals(t, answers) == 0 || time.Since(first) < drainBound {
			t.Fatalf("%v over %s; want refusals for the bound %s", answers, time.Since(first), drainBound)
		}
		if now, _ := e.bao.state(); now != active {
			t.Fatalf("leadership moved (%d to %d); the case is void", active, now)
		}
		e.evicted(active)
		assertEvents(t, e.rec, v1alpha1.ReasonDrainTimeBoundReached)
	})
}

// takeEvents empties the recorder and returns its events, one a line.
func takeEvents(rec *events.FakeRecorder) string {
	var seen []string
	for {
		select {
		case e := <-rec.Events:
			seen = append(seen, e)
			continue
		default:
		}
		return strings.Join(seen, "\n")
	}
}
