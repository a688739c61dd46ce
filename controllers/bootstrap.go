package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/values"
)

// scaleOutRequeue brings a cluster that was just marked initialized back at
// once: its status change alone starts no reconcile, and the next render
// scales the StatefulSet out. pod-0's relabelling usually comes first.
const scaleOutRequeue = 100 * time.Millisecond

// initAttempts paces sys/init retries per cluster. They live in memory: an
// operator restart retries at once, after which the backoff holds again.
type initAttempts struct {
	mu       sync.Mutex
	failures map[types.UID]attempt
}

type attempt struct {
	count int
	last  time.Time
}

func (a *initAttempts) get(uid types.UID) attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failures[uid]
}

func (a *initAttempts) failed(uid types.UID, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failures == nil {
		a.failures = map[types.UID]attempt{}
	}
	prev := a.failures[uid]
	a.failures[uid] = attempt{count: prev.count + 1, last: at}
}

func (a *initAttempts) succeeded(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.failures, uid)
}

// reconcileBootstrap owns OpenBaoInitialized: it initializes the cluster
// once (or adopts one that is initialized), then keeps autopilot set.
func (r *OpenBaoClusterReconciler) reconcileBootstrap(ctx context.Context, c *v1alpha1.OpenBaoCluster,
	status *v1alpha1.OpenBaoClusterStatus, served servedTLS, events *[]event) (ctrl.Result, error) {
	if !served.ready || r.OpenBao == nil {
		return ctrl.Result{}, nil // no trusted channel to the servers yet
	}
	obs, err := r.observeBootstrap(ctx, c, status, served)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.Clock.Now()
	d := bootstrap.Decide(obs)
	switch d.Action {
	case bootstrap.ActionNone:
		reason, msg := initializedCondition(c, status)
		setCondition(status, c, now, v1alpha1.ConditionOpenBaoInitialized, true, reason, msg)
		return r.reconcileAutopilot(ctx, c, status, served)
	case bootstrap.ActionInitialize:
		return r.initialize(ctx, c, status, served, events)
	case bootstrap.ActionAdopt, bootstrap.ActionMarkInitialized:
		status.Initialized = true
		status.SelfInitialized = d.Action == bootstrap.ActionAdopt && d.SelfInitialized
		setCondition(status, c, now, v1alpha1.ConditionOpenBaoInitialized, true, d.Reason, d.Message)
		*events = append(*events, event{eventKind(d.Reason), d.Reason, "Bootstrap", d.Message})
		return ctrl.Result{RequeueAfter: scaleOutRequeue}, nil
	case bootstrap.ActionDegraded:
		setCondition(status, c, now, v1alpha1.ConditionOpenBaoInitialized, status.Initialized, d.Reason, d.Message)
		*events = append(*events, event{"Warning", d.Reason, "Bootstrap", d.Message})
		return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
	default: // ActionWait
		setCondition(status, c, now, v1alpha1.ConditionOpenBaoInitialized, false, d.Reason, d.Message)
		return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
	}
}

func (r *OpenBaoClusterReconciler) observeBootstrap(ctx context.Context, c *v1alpha1.OpenBaoCluster,
	status *v1alpha1.OpenBaoClusterStatus, served servedTLS) (bootstrap.Observed, error) {
	tries := r.initAttempts.get(c.UID)
	obs := bootstrap.Observed{
		Initialized: status.Initialized, SelfInitialized: status.SelfInitialized,
		SelfInit:            c.Spec.SelfInit != nil && c.Spec.SelfInit.Enabled,
		RootTokenSecretName: c.RootTokenSecretName(),
		InitFailures:        tries.count, LastInitFailure: tries.last, Now: r.Clock.Now(),
		InitStarted: status.InitializationStarted != nil,
	}
	if status.Initialized {
		return obs, nil
	}
	pod := &corev1.Pod{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.PodName(0)}, pod)
	if err != nil && !apierrors.IsNotFound(err) {
		return obs, fmt.Errorf("read pod %s: %w", c.PodName(0), err)
	}
	if err == nil {
		p := bootstrap.PodFromKube(pod)
		obs.Pod0 = &p
	}
	// Exact, not cached: a stale Secret made by hand carries no label of ours.
	token, err := r.readSecret(ctx, r.APIReader, c.Namespace, c.RootTokenSecretName())
	if err != nil {
		return obs, err
	}
	obs.RootTokenSecretExists = token != nil
	if obs.NeedsHealth() {
		bao, err := r.podClient(c, 0, served, openbao.Token{})
		if err != nil {
			return obs, err
		}
		h, err := bao.Health(ctx)
		if err != nil {
			obs.HealthErr = err
		} else {
			obs.Health = &h
		}
	}
	return obs, nil
}

// initialize runs sys/init through internal/bootstrap, which keeps the root
// token in memory for this call only and stores it in its Secret.
func (r *OpenBaoClusterReconciler) initialize(ctx context.Context, c *v1alpha1.OpenBaoCluster,
	status *v1alpha1.OpenBaoClusterStatus, served servedTLS, events *[]event) (ctrl.Result, error) {
	now := r.Clock.Now()
	bao, err := r.podClient(c, 0, served, openbao.Token{})
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.recordInitStart(ctx, c, status, now); err != nil {
		return ctrl.Result{}, err
	}
	autopilot := bootstrap.AutopilotConfig(c.Spec.Replicas, values.AutopilotOverrides(c), bootstrap.PhaseBootstrap)
	store := &bootstrap.SecretTokenStore{Client: r.Client, Template: r.rootTokenTemplate(c)}
	out, err := bootstrap.Initialize(ctx, bao, store, bootstrap.InitOptions{
		Autopilot:       &autopilot,
		ClientWithToken: func(t openbao.Token) (openbao.Client, error) { return r.podClient(c, 0, served, t) },
	})
	var initErr *bootstrap.InitError
	if errors.As(err, &initErr) {
		r.initAttempts.failed(c.UID, now)
		status.Initialized = status.Initialized || initErr.Initialized
		setCondition(status, c, now, v1alpha1.ConditionOpenBaoInitialized, initErr.Initialized, initErr.Reason, initErr.Error())
		*events = append(*events, event{"Warning", initErr.Reason, "Initialize", initErr.Error()})
		return ctrl.Result{RequeueAfter: bootstrap.InitBackoff(r.initAttempts.get(c.UID).count)}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("initialize: %w", err)
	}
	r.initAttempts.succeeded(c.UID)
	status.Initialized, status.SelfInitialized = true, false
	msg := fmt.Sprintf("initialized through sys/init; the root token is in Secret %s", c.RootTokenSecretName())
	setCondition(status, c, now, v1alpha1.ConditionOpenBaoInitialized, true, bootstrap.ReasonInitialized, msg)
	*events = append(*events, event{"Normal", bootstrap.ReasonInitialized, "Initialize", msg})
	if out.AutopilotErr != nil {
		ctrl.LoggerFrom(ctx).Info("autopilot not configured yet; retrying", "reason", out.AutopilotErr.Error())
	}
	return ctrl.Result{RequeueAfter: scaleOutRequeue}, nil
}

// rootTokenTemplate is the root-token Secret without its data. With
// deletionPolicy Retain it has no owner: it outlives the cluster, like the
// data it opens.
func (r *OpenBaoClusterReconciler) rootTokenTemplate(c *v1alpha1.OpenBaoCluster) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: c.RootTokenSecretName(), Namespace: c.Namespace,
		Labels: map[string]string{v1alpha1.LabelCluster: c.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue},
	}}
	if c.Spec.DeletionPolicy == v1alpha1.DeletionPolicyDelete {
		_ = controllerutil.SetControllerReference(c, s, r.Client.Scheme()) // a registered kind: cannot fail
	}
	return s
}

// podClient talks to one server by its stable DNS name, trusting the
// cluster CA (the system roots with ACME).
func (r *OpenBaoClusterReconciler) podClient(c *v1alpha1.OpenBaoCluster, ordinal int, served servedTLS, token openbao.Token) (openbao.Client, error) {
	host := c.PodDNSName(ordinal)
	return r.OpenBao(openbao.Options{Address: "https://" + host + ":8200", CACert: served.caPEM, ServerName: host, Token: token})
}

// initializedCondition keeps the reason the cluster was initialized with
// (Initialized, SelfInitialized, Adopted, RootTokenLost): how it came to be
// initialized does not change afterwards, and a lost token must stay told.
func initializedCondition(c *v1alpha1.OpenBaoCluster, status *v1alpha1.OpenBaoClusterStatus) (reason, message string) {
	if cond := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionOpenBaoInitialized); cond != nil &&
		cond.Status == metav1.ConditionTrue {
		return cond.Reason, cond.Message
	}
	if status.SelfInitialized {
		return bootstrap.ReasonSelfInitialized, "initialized by OpenBao's self-init; the operator holds no root token"
	}
	return bootstrap.ReasonInitialized, "the cluster is initialized; the root token is in Secret " + c.RootTokenSecretName()
}

// recordInitStart writes status.initializationStarted before sys/init is
// called: the one moment whose loss cannot be repaired must leave a trace.
func (r *OpenBaoClusterReconciler) recordInitStart(ctx context.Context, c *v1alpha1.OpenBaoCluster,
	status *v1alpha1.OpenBaoClusterStatus, now time.Time) error {
	started := metav1.NewTime(now)
	patch := client.MergeFrom(c.DeepCopy())
	c.Status.InitializationStarted = &started
	if err := r.Client.Status().Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("record the start of sys/init: %w", err)
	}
	status.InitializationStarted = &started
	return nil
}

func eventKind(reason string) string {
	if degradedReasons[reason] {
		return "Warning"
	}
	return "Normal"
}
