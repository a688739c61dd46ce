package controllers

// The drain guard: a validating webhook on pods/eviction (the API kubectl
// drain and cluster autoscalers use), as Strimzi's Drain Cleaner does. An
// eviction of the active server's pod first moves leadership: the guard
// asks that server to step down and answers 429 TooManyRequests, which the
// evicting client retries, until another server is active and the evicted
// one is a caught-up standby. What it answers is drain.Decide's; this file
// gathers what Decide looks at and carries out its effects.

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/drain"
	"github.com/openbao/operator/internal/nscache"
	"github.com/openbao/operator/internal/upgrade"
)

// EvictionWebhookPath is the drain guard's path, as config/webhook names it.
const EvictionWebhookPath = "/validate-pods-eviction"

// DefaultDrainBound is the longest the guard refuses one pod's eviction.
const DefaultDrainBound = 60 * time.Second

// drainAnswerDeadline bounds one answer, below the webhook's timeoutSeconds
// (5): past it the API server lets the eviction through (failurePolicy
// Ignore), and the guard would rather say so itself.
const drainAnswerDeadline = 4 * time.Second

// SetupEvictionWebhook registers the drain guard on the manager's webhook
// server. It reaches OpenBao as r does (its clients, its upgrade role's
// token, its audit line for a step-down); bound is DefaultDrainBound but in
// tests.
func SetupEvictionWebhook(mgr ctrl.Manager, r *OpenBaoClusterReconciler, bound time.Duration) {
	g := &drainGuard{r: r, bound: bound, memory: &drainMemory{entries: map[types.NamespacedName]drainEntry{}}}
	mgr.GetWebhookServer().Register(EvictionWebhookPath, &webhook.Admission{Handler: g})
}

type drainGuard struct {
	r      *OpenBaoClusterReconciler
	bound  time.Duration
	memory *drainMemory
}

// drainTarget is the pod an eviction names and, for a pod the guard
// manages, the pass its observation was made in.
type drainTarget struct {
	key  types.NamespacedName
	uid  types.UID
	pass *pass
}

// Handle answers one eviction. An error is no reason to refuse: the guard
// only ever adds a wait, so what it cannot decide goes through.
func (g *drainGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.SubResource != "eviction" || req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	ctx, cancel := context.WithTimeout(ctx, drainAnswerDeadline)
	defer cancel()
	log := ctrl.LoggerFrom(ctx).WithValues("pod", req.Name, "namespace", req.Namespace)
	o, t, err := g.observe(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name})
	if err != nil {
		log.Info("the drain guard could not decide; the eviction goes ahead", "reason", err.Error())
		return admission.Allowed("the operator could not decide; the PodDisruptionBudget does")
	}
	d := drain.Decide(o)
	if t == nil {
		return drainAnswer(d)
	}
	log.V(1).Info("drain guard", "allow", d.Allow, "reason", d.Reason)
	if req.DryRun != nil && *req.DryRun {
		// Nothing is stepped down for a dry run, so a refusal would hold
		// kubectl drain --dry-run=server for good.
		return admission.Allowed("dry run: " + d.Message)
	}
	g.carryOut(ctx, t, d)
	return drainAnswer(d)
}

// observe gathers what Decide looks at. A pod that is not a voter pod of
// an initialized cluster this operator manages is not managed.
func (g *drainGuard) observe(ctx context.Context, key types.NamespacedName) (drain.Observed, *drainTarget, error) {
	o := drain.Observed{Now: g.r.Clock.Now(), Bound: g.bound, Pod: key.Name}
	if managed, _, err := manages(ctx, g.r.Scope, key.Namespace); err != nil || !managed {
		return o, nil, err
	}
	pod := &corev1.Pod{}
	if err := g.r.Client.Get(ctx, key, pod); err != nil {
		// The cache holds only pods with the cluster label, and only in
		// the namespaces the operator serves.
		return o, nil, ignoreNotFound(err)
	}
	c := &v1alpha1.OpenBaoCluster{}
	name, ok := pod.Labels[v1alpha1.LabelCluster]
	if !ok {
		return o, nil, nil
	}
	if err := g.r.Client.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: name}, c); err != nil {
		return o, nil, ignoreNotFound(err)
	}
	if !labels.SelectorFromSet(c.PodSelectorLabels()).Matches(labels.Set(pod.Labels)) || !c.Status.Initialized || c.Spec.Paused {
		return o, nil, nil // a read replica, a backup Job's pod, a cluster not formed or one left alone
	}
	o.Managed = true
	t := &drainTarget{key: key, uid: pod.UID}
	o.FirstRefusal, o.LastStepDown = g.memory.get(key, pod.UID, o.Now, g.bound)
	p, v, err := g.r.observe(ctx, c)
	if err != nil {
		return o, nil, err
	}
	t.pass = p
	o.Active = v.activeServer()
	if v.raft == nil {
		return o, t, nil
	}
	if o.Active != "" {
		// Autopilot's follower index comes from each server's echo and
		// lags by seconds; whether the leader's replication reaches a
		// restarted server, only its own log tells.
		v.measureLag(ctx)
	}
	o.RaftKnown, o.FailureTolerance, o.AllVotersHealthy = true, v.raft.FailureTolerance, v.raft.Healthy
	for _, s := range v.raft.Servers {
		o.AllVotersHealthy = o.AllVotersHealthy && (!s.Voter || s.Healthy)
	}
	settings := upgrade.SettingsFor(c.Spec.Upgrade)
	s := v.raft.Servers[key.Name]
	o.PodCaughtUp = s.Voter && s.Healthy && s.LagKnown && s.Lag <= settings.MaxRaftLag
	o.PeersProblem = upgrade.PeersProblem(upgrade.Observed{Settings: settings, Replicas: p.input().Replicas,
		Pods: rolloutPods(p.servers, v), Raft: v.raft, RaftProblem: v.problem, Health: v.health}, key.Name)
	return o, t, nil
}

// carryOut applies the decision's memory and step-down, with an audit line
// (stepDown's) and an event on the cluster for what a person should see.
func (g *drainGuard) carryOut(ctx context.Context, t *drainTarget, d drain.Decision) {
	now := g.r.Clock.Now()
	switch d.Memory {
	case drain.Start:
		g.memory.start(t.key, t.uid, now)
	case drain.Forget:
		g.memory.forget(t.key)
	}
	c := t.pass.cluster
	if d.Reason == drain.TimeBoundReached && g.memory.warnOnce(t.key) {
		ctrl.LoggerFrom(ctx).Info("let an eviction through at the drain guard's bound", "audit", true,
			"event_type", "openbao.drain.time_bound", "cluster", c.Name, "pod", t.key.Name, "why", d.Message)
		g.r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, v1alpha1.ReasonDrainTimeBoundReached, "Evict",
			"eviction of %s: %s", t.key.Name, d.Message)
	}
	if !d.StepDown {
		return
	}
	g.memory.asked(t.key, now)
	if err := g.r.stepDown(ctx, t.pass, t.key.Name, "eviction of its pod (node drain)"); err != nil {
		ctrl.LoggerFrom(ctx).Info("drain guard: step-down failed; asking again on a later retry", "pod", t.key.Name, "reason", err.Error())
		return
	}
	g.r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, v1alpha1.ReasonDrainStepDown, "StepDown",
		"asked %s to step down before its eviction; the eviction waits until another server is active", t.key.Name)
}

// drainAnswer is the webhook's answer: a refusal is 429 TooManyRequests,
// which kubectl drain and the autoscaler retry.
func drainAnswer(d drain.Decision) admission.Response {
	if d.Allow {
		return admission.Allowed(d.Message)
	}
	res := admission.Denied(d.Message)
	res.Result.Code = http.StatusTooManyRequests
	res.Result.Reason = metav1.StatusReasonTooManyRequests
	res.Result.Details = &metav1.StatusDetails{RetryAfterSeconds: int32(math.Ceil(d.RetryAfter.Seconds()))}
	return res
}

// ignoreNotFound: a pod or cluster that is not there, or in a namespace
// the tenancy cache does not serve, is not the guard's.
func ignoreNotFound(err error) error {
	var notServed *nscache.NotServedError
	if apierrors.IsNotFound(err) || errors.As(err, &notServed) {
		return nil
	}
	return err
}

// drainMemory is the guard's memory of the pods it refused, by namespace
// and name, of one pod UID: a pod recreated under the same name is a new
// pod. An entry is forgotten when Decide says so, when its pod is
// replaced, and an hour after the first refusal (a pod never evicted).
type drainMemory struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]drainEntry
}

type drainEntry struct {
	uid          types.UID
	first, asked time.Time
	warned       bool
}

// drainMemoryKept is how long an entry outlives its first refusal at most.
const drainMemoryKept = time.Hour

func (m *drainMemory) get(key types.NamespacedName, uid types.UID, now time.Time, bound time.Duration) (first, asked time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, e := range m.entries {
		if now.Sub(e.first) > max(drainMemoryKept, bound) {
			delete(m.entries, k)
		}
	}
	e, ok := m.entries[key]
	if ok && e.uid != uid {
		delete(m.entries, key)
		return time.Time{}, time.Time{}
	}
	return e.first, e.asked
}

func (m *drainMemory) start(key types.NamespacedName, uid types.UID, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries[key]; !ok { // two answers at once: the first one's clock runs
		m.entries[key] = drainEntry{uid: uid, first: now}
	}
}

func (m *drainMemory) asked(key types.NamespacedName, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok {
		e.asked = now
		m.entries[key] = e
	}
}

// warnOnce says whether the time-bound warning is still due for the pod.
func (m *drainMemory) warnOnce(key types.NamespacedName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok || e.warned {
		return false
	}
	e.warned = true
	m.entries[key] = e
	return true
}

func (m *drainMemory) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, key)
}
