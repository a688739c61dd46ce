// Package controllers holds the reconcilers: thin I/O adapters that carry out
// what the pure packages under internal/ decide.
package controllers

import (
	"context"
	"fmt"
	"io"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/apply"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/internal/values"
)

// +kubebuilder:rbac:groups=openbao.org,resources=openbaoclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=openbao.org,resources=openbaoclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=openbao.org,resources=openbaoclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps;serviceaccounts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies;ingresses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=tlsroutes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=get;list;watch;create;update;patch;delete
// The Role the chart renders lets OpenBao label its own pods; RBAC allows
// creating it only to a holder of the same permissions.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// OpenBaoClusterReconciler makes each OpenBaoCluster real.
type OpenBaoClusterReconciler struct {
	Client client.Client
	// APIReader reads what the cache does not hold: user-provided Secrets
	// carry no label of ours.
	APIReader client.Reader
	Renderer  *render.Renderer
	Applier   *apply.Applier
	Operator  values.Operator
	Recorder  recorder.EventRecorder
	Clock     clock.PassiveClock
	// Random feeds certificate serial numbers; nil means crypto/rand.
	Random io.Reader
	// OpenBao makes clients of the cluster's servers; nil leaves
	// initialization to whoever holds the cluster (tests of other steps).
	OpenBao openbao.Factory

	initAttempts     initAttempts
	autopilotSettled settledGenerations
	// ResyncPeriod brings a settled cluster back to reconcile, to catch what
	// no watch reports (watches.yaml reconcilePeriod).
	ResyncPeriod time.Duration
}

// event is emitted only after the status write that it describes succeeded.
type event struct {
	kind, reason, action, note string
}

// Reconcile runs the steps in order; each returns early on failure, and the
// status they build in memory is written once at the end.
func (r *OpenBaoClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &v1alpha1.OpenBaoCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			forgetClusterMetrics(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cluster.Status.Initialized {
		// An uninitialized status renders one replica, and the cache can lag
		// this operator's own status write by a moment: rendering from it
		// would scale a cluster that just formed back to one server. The
		// exact read costs a GET per pass until the cache says initialized.
		if err := r.APIReader.Get(ctx, req.NamespacedName, cluster); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // children go with their owner references
	}
	status := cluster.Status.DeepCopy()
	var events []event
	result, stepErr := r.runSteps(ctx, cluster, status, &events)
	status.ObservedGeneration = cluster.Generation
	status.Phase = phase(cluster, status)
	if err := r.writeStatus(ctx, cluster, status); err != nil {
		if apierrors.IsConflict(err) {
			// The cluster changed while this pass ran; its own event, or
			// this retry, starts a pass on the new version.
			log.FromContext(ctx).V(1).Info("status write conflicted; retrying")
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	for _, e := range events {
		r.Recorder.Eventf(cluster, nil, e.kind, e.reason, e.action, "%s", e.note)
	}
	if stepErr == nil && (result.IsZero() || result.RequeueAfter > r.ResyncPeriod) {
		result.RequeueAfter = r.ResyncPeriod
	}
	return result, stepErr
}

func (r *OpenBaoClusterReconciler) runSteps(ctx context.Context, c *v1alpha1.OpenBaoCluster,
	status *v1alpha1.OpenBaoClusterStatus, events *[]event) (ctrl.Result, error) {
	now := r.Clock.Now()
	if c.Spec.Paused {
		setCondition(status, c, now, v1alpha1.ConditionPaused, true, v1alpha1.ReasonPausedBySpec,
			"spec.paused is true: the operator changes nothing of this cluster until it is false")
		return ctrl.Result{}, nil
	}
	setCondition(status, c, now, v1alpha1.ConditionPaused, false, v1alpha1.ReasonNotPaused, "the operator manages this cluster")
	served, tlsResult, err := r.reconcileTLS(ctx, c, status, events)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.reconcileSealMaterial(ctx, c, status, events); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.reconcileSelfInitSecret(ctx, c); err != nil {
		return ctrl.Result{}, err
	}
	result, err := r.reconcileChildren(ctx, c, status, events)
	if err != nil {
		return result, err
	}
	if err := r.annotateCertHash(ctx, c, served.certPEM); err != nil {
		return ctrl.Result{}, err
	}
	bootResult, err := r.reconcileBootstrap(ctx, c, status, served, events)
	if err != nil {
		return ctrl.Result{}, err
	}
	return soonest(tlsResult, result, bootResult), r.observeServers(ctx, c, status)
}

// soonest combines the requeue wishes of several steps.
func soonest(results ...ctrl.Result) ctrl.Result {
	var out ctrl.Result
	for _, r := range results {
		if r.RequeueAfter > 0 && (out.RequeueAfter == 0 || r.RequeueAfter < out.RequeueAfter) {
			out.RequeueAfter = r.RequeueAfter
		}
	}
	return out
}

func (r *OpenBaoClusterReconciler) writeStatus(ctx context.Context, c *v1alpha1.OpenBaoCluster, status *v1alpha1.OpenBaoClusterStatus) error {
	if equality.Semantic.DeepEqual(&c.Status, status) {
		return nil
	}
	c.Status = *status
	if err := r.Client.Status().Update(ctx, c); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

// SetupWithManager watches OpenBaoClusters and the children the chart
// renders, so that drift in a child brings the owner back to reconcile, and
// the server pods, whose state the bootstrap waits for.
func (r *OpenBaoClusterReconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrent int) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.OpenBaoCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&networkingv1.Ingress{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToCluster), builder.WithPredicates(podStateChanged)).
		WithOptions(controllerOptions(maxConcurrent)).
		Complete(r)
}

// missingKindRetry is how soon a cluster whose chart needs an uninstalled
// CRD (Gateway API, Prometheus Operator) looks again.
const missingKindRetry = time.Minute

// conflictRetry is how soon a pass whose status write lost a race retries.
const conflictRetry = time.Second
