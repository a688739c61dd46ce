// Package controllers holds the reconcilers: thin I/O adapters that carry out
// what the pure packages under internal/ decide.
package controllers

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/apply"
	"github.com/openbao/operator/internal/children"
	"github.com/openbao/operator/internal/day2"
	"github.com/openbao/operator/internal/delegated"
	"github.com/openbao/operator/internal/imagepolicy"
	"github.com/openbao/operator/internal/imageverify"
	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/internal/upgrade"
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
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors;prometheusrules,verbs=get;list;watch;create;update;patch;delete
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
	// ResyncPeriod brings a settled cluster back to reconcile, to catch what
	// no watch reports (watches.yaml reconcilePeriod).
	ResyncPeriod time.Duration
	// Issuer reads the Kubernetes service-account issuer that the
	// operator's identity in OpenBao trusts; nil leaves the identity unset.
	Issuer IssuerSource
	// PreUpgradeSnapshot takes the snapshot spec.upgrade.preUpgradeSnapshot
	// asks for (an OpenBaoBackup); nil when backups are not available.
	PreUpgradeSnapshot SnapshotTaker
	// ImageVerifier checks the image's cosign signature when
	// spec.imageVerification asks for it.
	ImageVerifier imageverify.Verifier
	// ImagePolicy is the platform's: the repositories a tenant's images
	// may come from (--allowed-image-repositories); empty allows any.
	ImagePolicy imagepolicy.Policy
	// HeldFields, set when the operator runs without its webhook, is the
	// platform's allow-list of the fields the operator copies into its
	// Pods, Services and Ingresses, which the controller then holds every
	// cluster to. With the webhook, nil: the webhook asked whether the
	// author may set the rest, which the controller cannot ask.
	HeldFields *delegated.Policy
	// PlatformVerification, when set, is the platform's signature policy:
	// every image the servers run is verified against it, whatever
	// spec.imageVerification says.
	PlatformVerification *PlatformVerification
	// Scope names the namespaces the controller holds rights in; nil: all.
	Scope Scope
	// Operations is the Day-2 registry the reconcilers share: the start
	// of a rollout or a drill is decided and recorded in it in one step.
	// Nil remembers nothing.
	Operations *day2.Registry
	// RolloutSlots bounds how many clusters run an operator-caused
	// rollout at once (--max-concurrent-rollouts); nil caps nothing.
	RolloutSlots *upgrade.Slots
	// NewStore opens a standby's source store to list its snapshots; nil
	// is open.OperatorStore. It is given the target's own credentials
	// only, never the operator's ambient identity.
	NewStore func(context.Context, objectstore.Config) (objectstore.Store, error)

	memory memory
}

// steps are the stages of a pass, in order. Bootstrap, membership and the
// rollout decide before the self-init Secret and the chart are written, so
// what they decide (initialized, a replica count, a partition) is applied
// in the same pass; the steps after the apply act on what it made.
func (r *OpenBaoClusterReconciler) steps() []step {
	return []step{
		{"pause", r.reconcilePause},
		{"references", r.reconcileReferences},
		{"image-policy", r.reconcileImagePolicy},
		{"delegated-fields", r.reconcileDelegatedFields},
		{"tls", r.reconcileTLS},
		{"seal", r.reconcileSealMaterial},
		{"image", r.reconcileImage},
		{"data-secrets", r.disownDataSecrets},
		{"bootstrap", r.reconcileBootstrap},
		{"identity", r.reconcileIdentity},
		{"root-token", r.reconcileRootToken},
		{"membership", r.reconcileMembership},
		{"read-replicas", r.reconcileReadReplicas},
		{"rollout", r.reconcileRollout},
		{"restart", r.reconcileRestartRequest},
		{"self-init", r.reconcileSelfInitSecret},
		{"volumes", r.reconcileVolumes},
		{"children", r.reconcileChildren},
		{"cert-hash", r.annotateCertHash},
		{"autopilot", r.reconcileAutopilot},
		{"servers", r.observeServers},
		{"raft", r.publishRaft},
		{"from-backup", r.reconcileFromBackup},
		{"standby", r.reconcileStandby},
		{"backup", r.reconcileBackup},
		{"drill", r.reconcileDrill},
		{"step-down", r.reconcileStepDownRequest},
	}
}

// Reconcile runs one pass: the steps in order, each of which may end it,
// then one write of the status they built.
func (r *OpenBaoClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	started := time.Now()
	defer func() {
		reconcileDuration.Observe(time.Since(started).Seconds())
		if err != nil {
			recordReconcileError(req.Namespace, req.Name)
		}
	}()
	cluster, err := r.readCluster(ctx, req.NamespacedName)
	if cluster == nil || err != nil {
		return ctrl.Result{}, err
	}
	if managed, why, err := manages(ctx, r.Scope, cluster.Namespace); err != nil || !managed {
		if err != nil {
			return ctrl.Result{}, err
		}
		return r.outOfScope(ctx, cluster, why)
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return r.finalizeOrLetGo(ctx, cluster)
	}
	if err := r.ensureFinalizer(ctx, cluster); err != nil {
		return ctrl.Result{}, err
	}
	p, err := r.newPass(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	stepErr := runSteps(ctx, p, r.steps())
	summarizeDegraded(p)
	summarizeReady(p)
	p.status.ObservedGeneration = cluster.Generation
	p.status.Phase = phase(cluster, p.status, p.restoring)
	if err := r.writeStatus(ctx, cluster, p.status); err != nil {
		if apierrors.IsConflict(err) {
			// The cluster changed while this pass ran; its own event, or
			// this retry, starts a pass on the new version.
			log.FromContext(ctx).V(1).Info("status write conflicted; retrying")
			return dueAfter(conflictRetry), nil
		}
		return ctrl.Result{}, err
	}
	for _, effect := range p.effects {
		if err := effect(ctx); err != nil {
			return ctrl.Result{}, err
		}
	}
	recordCluster(cluster, p.status, sealedServers(p))
	for _, e := range p.events {
		r.Recorder.Eventf(cluster, nil, e.kind, e.reason, e.action, "%s", e.note)
	}
	return r.result(p, stepErr), stepErr
}

// newPass starts a pass with the status as read and the pods as the cache
// holds them.
func (r *OpenBaoClusterReconciler) newPass(ctx context.Context, c *v1alpha1.OpenBaoCluster) (*pass, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(c.PodSelectorLabels())); err != nil {
		return nil, fmt.Errorf("list pods of %s: %w", c.Name, err)
	}
	restores, err := listClusterRestores(ctx, r.Client, c.Namespace, c.Name)
	if err != nil {
		return nil, err
	}
	return &pass{
		cluster: c, status: c.Status.DeepCopy(), now: r.Clock.Now(),
		pods: pods.Items, servers: podstate.NewSnapshot(pods.Items),
		restoring:  len(day2.Names(day2.Observe(c, nil, nil, restores).Running, day2.Restore)) > 0,
		anyRestore: len(restores) > 0,
	}, nil
}

// readCluster reads the cluster from the cache, and exactly when the cache
// still says uninitialized after this operator marked it initialized:
// rendering from that lagging copy would scale a formed cluster back to one
// server. A cluster that is gone is forgotten.
func (r *OpenBaoClusterReconciler) readCluster(ctx context.Context, name types.NamespacedName) (*v1alpha1.OpenBaoCluster, error) {
	cluster := &v1alpha1.OpenBaoCluster{}
	err := r.Client.Get(ctx, name, cluster)
	if apierrors.IsNotFound(err) {
		r.forget(name)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read OpenBaoCluster %s: %w", name, err)
	}
	var lagging bool
	r.memory.with(name, cluster.UID, func(m *clusterMemory) { lagging = m.markedInitialized && !cluster.Status.Initialized })
	if !lagging {
		return cluster, nil
	}
	if err := r.APIReader.Get(ctx, name, cluster); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return cluster, nil
}

// forget releases everything kept in memory for a cluster that is gone.
func (r *OpenBaoClusterReconciler) forget(name types.NamespacedName) {
	r.memory.forget(name)
	r.Applier.Forget(name)
	r.Operations.Forget(name)
	r.RolloutSlots.Release(name)
	forgetClusterMetrics(name.Namespace, name.Name)
}

// Remembers says whether the reconciler or its Applier still holds memory
// of the cluster; it is for tests that check memory is released.
func (r *OpenBaoClusterReconciler) Remembers(name types.NamespacedName) bool {
	return r.memory.has(name) || r.Applier.Remembers(name) || r.Operations.Remembers(name) || r.RolloutSlots.Remembers(name)
}

func (r *OpenBaoClusterReconciler) writeStatus(ctx context.Context, c *v1alpha1.OpenBaoCluster, status *v1alpha1.OpenBaoClusterStatus) error {
	if equality.Semantic.DeepEqual(&c.Status, status) {
		return nil
	}
	initializedNow := status.Initialized && !c.Status.Initialized
	c.Status = *status
	if err := r.Client.Status().Update(ctx, c); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if initializedNow {
		r.memory.with(client.ObjectKeyFromObject(c), c.UID, func(m *clusterMemory) { m.markedInitialized = true })
	}
	return nil
}

// result turns the pass's requeue wish into the controller's result: at
// the latest after the resync period, unless the pass failed (the error's
// backoff applies then).
func (r *OpenBaoClusterReconciler) result(p *pass, stepErr error) ctrl.Result {
	if stepErr != nil {
		return ctrl.Result{}
	}
	if p.requeue == 0 || p.requeue > r.ResyncPeriod {
		return resyncAfter(r.ResyncPeriod)
	}
	return dueAfter(p.requeue)
}

// reconcilePause owns Paused: while spec.paused holds, the pass stops here.
func (r *OpenBaoClusterReconciler) reconcilePause(_ context.Context, p *pass) error {
	if p.cluster.Spec.Paused {
		p.setCondition(v1alpha1.ConditionPaused, true, v1alpha1.ReasonPausedBySpec,
			"spec.paused is true: the operator changes nothing of this cluster until it is false")
		return errStop
	}
	p.setCondition(v1alpha1.ConditionPaused, false, v1alpha1.ReasonNotPaused, "the operator manages this cluster")
	return nil
}

// conflictRetry is how soon a pass whose status write lost a race retries.
const conflictRetry = time.Second

// SetupWithManager watches OpenBaoClusters, the children they own, the
// server pods, whose state the bootstrap waits for, and the backups that
// name them; the kinds come from package children.
func (r *OpenBaoClusterReconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrent int) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.OpenBaoCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	for _, k := range children.Watched(children.ByOwner) {
		b = b.Owns(k.New())
	}
	for _, k := range children.Watched(children.ByClusterLabel) {
		b = b.Watches(k.New(), handler.EnqueueRequestsFromMapFunc(byClusterLabel), builder.WithPredicates(podStateChanged))
	}
	for _, k := range children.Watched(children.ByClusterName) {
		b = b.Watches(k.New(), handler.EnqueueRequestsFromMapFunc(byClusterName))
	}
	if _, ok := r.Scope.(*TenantScope); ok {
		b = b.Watches(&v1alpha1.OpenBaoTenant{}, handler.EnqueueRequestsFromMapFunc(clustersOfTenant(r.Client)))
	}
	return b.WithOptions(controllerOptions(maxConcurrent)).Complete(r)
}

// CacheOptions limits the manager's cache to objects that carry the cluster
// label, for every kind the controller watches: the operator holds its own
// children, not every ConfigMap and Secret of the cluster. Of each cached
// object's managedFields it keeps the operator's apply entry alone, the
// one the Applier reads (apply.TrimManagedFields).
func CacheOptions() cache.Options {
	req, err := labels.NewRequirement(v1alpha1.LabelCluster, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key: cannot fail
	}
	byLabel := cache.ByObject{Label: labels.NewSelector().Add(*req)}
	byObject := map[client.Object]cache.ByObject{}
	for _, obj := range children.Cached() {
		byObject[obj] = byLabel
	}
	return cache.Options{ByObject: byObject, DefaultTransform: apply.TrimManagedFields(v1alpha1.FieldManager)}
}

// NewApplier returns the Applier of the chart's objects: it writes through
// c as the operator's field manager, reads back the watched kinds from
// cache (which must be the manager's cache, or a client that reads
// directly), and the others through live, uncached.
func NewApplier(c client.Client, cache, live client.Reader) *apply.Applier {
	cached := map[schema.GroupVersionKind]func() client.Object{}
	for _, k := range children.All() {
		if k.Rendered && k.Watch != children.NotWatched {
			newObject := k.New
			cached[k.GVK] = func() client.Object { return newObject() }
		}
	}
	return apply.New(apply.Options{Client: c, Cache: cache, Cached: cached, Live: live, FieldManager: v1alpha1.FieldManager})
}

// Options configure the OpenBaoCluster controller.
type Options struct {
	Operator     values.Operator
	ResyncPeriod time.Duration
	// OpenBao makes clients of the servers; nil leaves initialization to
	// whoever holds the cluster (tests of other steps).
	OpenBao openbao.Factory
	Clock   clock.PassiveClock
	// Issuer reads the service-account issuer; nil leaves the operator's
	// identity in OpenBao unset.
	Issuer IssuerSource
	// ImageVerifier checks image signatures; nil takes cosign against the
	// registries, with a cache of imageverify.DefaultCacheSize digests.
	ImageVerifier imageverify.Verifier
	// ImagePolicy is the platform's image policy; empty allows any image.
	ImagePolicy imagepolicy.Policy
	// HeldFields is the platform's allow-list the controller holds
	// clusters to; set it when no webhook runs.
	HeldFields *delegated.Policy
	// PlatformVerification is the platform's signature policy; nil: none.
	PlatformVerification *PlatformVerification
	// Scope names the namespaces the controller holds rights in; nil: all.
	Scope Scope
	// MaxConcurrentRollouts bounds the clusters rolling an operator-caused
	// template change at once; below 1, no bound.
	MaxConcurrentRollouts int
}

// NewReconciler builds the reconciler on the manager's cached client and
// API reader, exactly as the operator runs it: main and the envtest suite
// both use it, with CacheOptions, so tests see what production sees.
func NewReconciler(mgr ctrl.Manager, o Options) (*OpenBaoClusterReconciler, error) {
	renderer, err := render.New()
	if err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.ImageVerifier == nil {
		o.ImageVerifier = imageverify.NewCosign(imageverify.DefaultCacheSize, nil)
	}
	return &OpenBaoClusterReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Renderer: renderer,
		Applier:  NewApplier(mgr.GetClient(), mgr.GetClient(), mgr.GetAPIReader()),
		Operator: o.Operator, Recorder: mgr.GetEventRecorder("openbao-operator"), Clock: o.Clock,
		ResyncPeriod: o.ResyncPeriod, OpenBao: o.OpenBao, Issuer: o.Issuer,
		PreUpgradeSnapshot: NewBackupSnapshots(mgr.GetClient()), ImageVerifier: o.ImageVerifier,
		ImagePolicy: o.ImagePolicy, HeldFields: o.HeldFields, PlatformVerification: o.PlatformVerification, Scope: o.Scope,
		Operations: &day2.Registry{}, RolloutSlots: &upgrade.Slots{Max: o.MaxConcurrentRollouts},
	}, nil
}
