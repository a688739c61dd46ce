package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/tenancy"
)

// Timings of the provisioner. It may not watch namespaces or RoleBindings,
// so what it cannot see (a namespace created after its tenant, a binding
// deleted by hand) is found by coming back.
const (
	// TenantResync brings back a tenant whose namespaces are all provisioned.
	TenantResync = 5 * time.Minute
	// TenantRetry brings back a tenant with a namespace not (yet) there.
	TenantRetry = 15 * time.Second
	// DeprovisionGrace is how long a namespace is reported Deprovisioning
	// before its binding goes: the controller stops its informers there
	// on the status change, before its rights vanish under them.
	DeprovisionGrace = 3 * time.Second
)

// OpenBaoTenantReconciler is the provisioner: it binds the tenant role to
// the controller's ServiceAccount in each namespace a tenant names, and
// unbinds it where no tenant names the namespace any more. It runs as its
// own identity, which holds no right on workloads or Secrets.
type OpenBaoTenantReconciler struct {
	Client   client.Client
	Recorder recorder.EventRecorder
	// OperatorNamespace holds the controller's ServiceAccount.
	OperatorNamespace string
}

// Reconcile provisions one tenant's namespaces and reports each.
func (r *OpenBaoTenantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &v1alpha1.OpenBaoTenant{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	deleting := !t.DeletionTimestamp.IsZero()
	if !deleting && !controllerutil.ContainsFinalizer(t, v1alpha1.TenantFinalizer) {
		controllerutil.AddFinalizer(t, v1alpha1.TenantFinalizer)
		if err := r.Client.Update(ctx, t); err != nil {
			return ctrl.Result{}, fmt.Errorf("add the finalizer: %w", err)
		}
	}
	wanted := t.Spec.Namespaces
	if deleting {
		wanted = nil
	}
	outcomes, released, err := r.provisionAll(ctx, t, wanted)
	if err != nil {
		return ctrl.Result{}, err
	}
	if deleting && released {
		controllerutil.RemoveFinalizer(t, v1alpha1.TenantFinalizer)
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Update(ctx, t))
	}
	if err := r.writeStatus(ctx, t, outcomes); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: tenantRequeue(t.Spec.Namespaces, outcomes)}, nil
}

// provisionAll provisions the wanted namespaces and walks the others the
// status holds towards release. released says that nothing is bound any
// more outside wanted.
func (r *OpenBaoTenantReconciler) provisionAll(ctx context.Context, t *v1alpha1.OpenBaoTenant, wanted []string) ([]v1alpha1.TenantNamespaceStatus, bool, error) {
	var outcomes []v1alpha1.TenantNamespaceStatus
	for _, ns := range wanted {
		outcomes = append(outcomes, r.provision(ctx, t, ns))
	}
	released := true
	for _, held := range t.Status.Namespaces {
		if slices.Contains(wanted, held.Name) {
			continue
		}
		if held.Provisioned {
			// First tell the controller, which follows the status; the
			// binding goes on a pass DeprovisionGrace later.
			outcomes = append(outcomes, tenancy.Outcome(held.Name, false, v1alpha1.ReasonDeprovisioning,
				"no longer named by the tenant: the controller stops managing it, then the RoleBinding is removed"))
			released = false
			continue
		}
		if err := r.release(ctx, t, held.Name); err != nil {
			return nil, false, err
		}
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, "Deprovisioned", "Release", "released namespace %s", held.Name)
	}
	tenancy.SortOutcomes(outcomes)
	return outcomes, released, nil
}

// provision binds the tenant role in one namespace, or says why not.
func (r *OpenBaoTenantReconciler) provision(ctx context.Context, t *v1alpha1.OpenBaoTenant, ns string) v1alpha1.TenantNamespaceStatus {
	if why := tenancy.Refusal(ns, r.OperatorNamespace); why != "" {
		return tenancy.Outcome(ns, false, v1alpha1.ReasonNamespaceRefused, why)
	}
	err := r.bind(ctx, ns, tenancy.OwnerReference(t))
	switch {
	case err == nil:
		return tenancy.Outcome(ns, true, v1alpha1.ReasonProvisioned, "")
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return tenancy.Outcome(ns, false, v1alpha1.ReasonNamespaceTerminating,
			fmt.Sprintf("namespace %s is being deleted", ns))
	case apierrors.IsNotFound(err):
		return tenancy.Outcome(ns, false, v1alpha1.ReasonNamespaceNotFound,
			fmt.Sprintf("namespace %s does not exist; it is provisioned once it does", ns))
	default:
		return tenancy.Outcome(ns, false, v1alpha1.ReasonProvisioningFailed, err.Error())
	}
}

// bind creates the tenant RoleBinding in ns, or adds the tenant to the
// owners of the one there and puts its subjects back.
func (r *OpenBaoTenantReconciler) bind(ctx context.Context, ns string, owner metav1.OwnerReference) error {
	existing := &rbacv1.RoleBinding{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: tenancy.TenantRoleName}, existing)
	if apierrors.IsNotFound(err) {
		return r.Client.Create(ctx, tenancy.Binding(ns, r.OperatorNamespace, owner))
	}
	if err != nil {
		return fmt.Errorf("read RoleBinding %s/%s: %w", ns, tenancy.TenantRoleName, err)
	}
	if !tenancy.RoleRefMatches(existing) {
		// roleRef is immutable: a binding of another role under our name
		// is replaced.
		if err := r.Client.Delete(ctx, existing); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replace RoleBinding %s/%s: %w", ns, existing.Name, err)
		}
		return r.Client.Create(ctx, tenancy.Binding(ns, r.OperatorNamespace, owner))
	}
	if next, changed := tenancy.Reconciled(existing, r.OperatorNamespace, owner); changed {
		return r.Client.Update(ctx, next)
	}
	return nil
}

// release removes the tenant from the owners of the binding in ns, and the
// binding when no other tenant owns it.
func (r *OpenBaoTenantReconciler) release(ctx context.Context, t *v1alpha1.OpenBaoTenant, ns string) error {
	existing := &rbacv1.RoleBinding{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: tenancy.TenantRoleName}, existing)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read RoleBinding %s/%s: %w", ns, tenancy.TenantRoleName, err)
	}
	next, stillOwned := tenancy.Released(existing, string(t.UID))
	if stillOwned {
		err = r.Client.Update(ctx, next)
	} else {
		err = client.IgnoreNotFound(r.Client.Delete(ctx, existing))
	}
	if err != nil {
		return fmt.Errorf("release RoleBinding %s/%s: %w", ns, tenancy.TenantRoleName, err)
	}
	return nil
}

// writeStatus records the outcomes and the Ready condition, if changed.
func (r *OpenBaoTenantReconciler) writeStatus(ctx context.Context, t *v1alpha1.OpenBaoTenant, outcomes []v1alpha1.TenantNamespaceStatus) error {
	next := t.Status.DeepCopy()
	next.Namespaces = outcomes
	next.ObservedGeneration = t.Generation
	ready, reason, message := tenancy.Ready(t.Spec.Namespaces, outcomes)
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&next.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionTenantReady, Status: status, Reason: reason, Message: message,
		ObservedGeneration: t.Generation,
	})
	if equality.Semantic.DeepEqual(&t.Status, next) {
		return nil
	}
	for _, o := range outcomes {
		if o.Provisioned && !wasProvisioned(t.Status.Namespaces, o.Name) {
			r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, "Provisioned", "Bind", "provisioned namespace %s", o.Name)
		}
	}
	t.Status = *next
	if err := r.Client.Status().Update(ctx, t); err != nil {
		return fmt.Errorf("write the tenant's status: %w", err)
	}
	return nil
}

func wasProvisioned(held []v1alpha1.TenantNamespaceStatus, ns string) bool {
	return slices.ContainsFunc(held, func(s v1alpha1.TenantNamespaceStatus) bool { return s.Name == ns && s.Provisioned })
}

// tenantRequeue is when to come back: soon while something is pending,
// else at the resync.
func tenantRequeue(spec []string, outcomes []v1alpha1.TenantNamespaceStatus) time.Duration {
	for _, o := range outcomes {
		if o.Reason == v1alpha1.ReasonDeprovisioning {
			return DeprovisionGrace
		}
		if o.Reason == v1alpha1.ReasonNamespaceTerminating {
			return TenantRetry
		}
		if !o.Provisioned && slices.Contains(spec, o.Name) && o.Reason != v1alpha1.ReasonNamespaceRefused {
			return TenantRetry
		}
	}
	return TenantResync
}

// SetupWithManager watches OpenBaoTenants, and the creation and deletion
// of OpenBaoClusters, which say sooner than the resync that a namespace
// came or is going; the provisioner may not watch namespaces or
// RoleBindings. Its own status writes do not bring a tenant
// back, so that a Deprovisioning namespace keeps its binding for
// DeprovisionGrace.
func (r *OpenBaoTenantReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("openbaotenant").
		For(&v1alpha1.OpenBaoTenant{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, deletionStarted{}))).
		Watches(&v1alpha1.OpenBaoCluster{}, handler.EnqueueRequestsFromMapFunc(r.tenantsOfCluster),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(ctrlevent.UpdateEvent) bool { return false }})).
		Complete(r)
}

// tenantsOfCluster maps a cluster to the tenants that name its namespace.
func (r *OpenBaoTenantReconciler) tenantsOfCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	tenants := &v1alpha1.OpenBaoTenantList{}
	if err := r.Client.List(ctx, tenants); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list OpenBaoTenants")
		return nil
	}
	var out []reconcile.Request
	for _, t := range tenants.Items {
		if slices.Contains(t.Spec.Namespaces, obj.GetNamespace()) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: t.Name}})
		}
	}
	return out
}

// deletionStarted lets through the update that marks an object deleted.
type deletionStarted struct{ predicate.Funcs }

func (deletionStarted) Update(e ctrlevent.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
}
