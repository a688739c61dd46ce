package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/nscache"
	"github.com/openbao/operator/internal/tenancy"
)

// +kubebuilder:rbac:groups=openbao.org,resources=openbaotenants,verbs=get;list;watch

// outOfScopeRetry brings back a backup or restore waiting for its namespace
// to be provisioned.
const outOfScopeRetry = time.Minute

// Scope says in which namespaces the controller holds rights. nil: all.
type Scope interface {
	// Manages says whether the controller may manage clusters in
	// namespace; when it may not, why says so to the cluster's owner.
	Manages(ctx context.Context, namespace string) (managed bool, why string, err error)
}

// NamespaceSetter is the cache that serves the namespaced kinds from the
// namespaces set (internal/nscache).
type NamespaceSetter interface {
	SetNamespaces(namespaces []string)
}

// TenantScope is the tenancy install's scope: the namespaces that
// OpenBaoTenants report provisioned. Each answer also sets the cache's
// namespaces to them, so the informers follow tenants as they come and go
// without a restart.
type TenantScope struct {
	Reader client.Reader // OpenBaoTenants, cached
	Cache  NamespaceSetter
}

// NewTenancy returns the manager's cache constructor of a tenancy install
// and the scope that drives it: the operator's own kinds cluster-wide,
// every other namespaced kind only from the namespaces tenants provisioned.
// Set the scope's Reader to the manager's client.
func NewTenancy() (cache.NewCacheFunc, *TenantScope) {
	s := &TenantScope{}
	return func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
		c, err := nscache.New(cfg, opts, func(gvk schema.GroupVersionKind) bool {
			return gvk.Group == v1alpha1.GroupVersion.Group
		})
		if err != nil {
			return nil, err
		}
		s.Cache = c
		return c, nil
	}, s
}

func (s *TenantScope) Manages(ctx context.Context, namespace string) (bool, string, error) {
	provisioned, err := s.follow(ctx)
	if err != nil {
		return false, "", err
	}
	if slices.Contains(provisioned, namespace) {
		return true, "", nil
	}
	return false, fmt.Sprintf("no OpenBaoTenant has provisioned namespace %s, so the operator holds no rights in it: "+
		"a platform admin adds it to an OpenBaoTenant's spec.namespaces", namespace), nil
}

// follow sets the cache's namespaces to the provisioned ones and returns
// them.
func (s *TenantScope) follow(ctx context.Context) ([]string, error) {
	tenants := &v1alpha1.OpenBaoTenantList{}
	if err := s.Reader.List(ctx, tenants); err != nil {
		return nil, fmt.Errorf("list OpenBaoTenants: %w", err)
	}
	provisioned := tenancy.Provisioned(tenants.Items)
	s.Cache.SetNamespaces(provisioned)
	return provisioned, nil
}

// Reconcile follows a tenant's change even where no cluster runs, so that
// the informers of a namespace stop before its binding goes.
func (s *TenantScope) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	_, err := s.follow(ctx)
	return reconcile.Result{}, err
}

// SetupWithManager runs Reconcile on every change of an OpenBaoTenant.
func (s *TenantScope) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("tenantscope").For(&v1alpha1.OpenBaoTenant{}).Complete(s)
}

// outOfScope reports on the cluster's status that the operator does not
// manage it. A cluster being deleted there is let go: its children that it
// owns go with it, and the data Secrets and volumes are kept, as the
// operator cannot reach them to carry out a deletion policy.
func (r *OpenBaoClusterReconciler) outOfScope(ctx context.Context, c *v1alpha1.OpenBaoCluster, why string) (reconcile.Result, error) {
	if !c.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(c, v1alpha1.Finalizer) {
			return reconcile.Result{}, nil
		}
		ctrl.LoggerFrom(ctx).Info("deletion policy not carried out: the namespace is not provisioned; volumes and data Secrets are kept",
			"audit", true, "event_type", "openbao.cluster.deleted", "deletionPolicy", string(c.Spec.DeletionPolicy))
		patch := client.MergeFrom(c.DeepCopy())
		controllerutil.RemoveFinalizer(c, v1alpha1.Finalizer)
		return reconcile.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, c, patch))
	}
	status := c.Status.DeepCopy()
	setCondition(status, c, r.Clock.Now(), v1alpha1.ConditionDegraded, true, v1alpha1.ReasonNamespaceNotProvisioned, why)
	status.ObservedGeneration = c.Generation
	if err := r.writeStatus(ctx, c, status); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

// finalizeOrLetGo carries out the deletion policy. With a scope, a cluster
// whose namespace took the operator's rights away during its deletion (the
// namespace itself is being deleted, which deletes its content anyway, or
// its tenant went) is let go as one out of scope.
func (r *OpenBaoClusterReconciler) finalizeOrLetGo(ctx context.Context, c *v1alpha1.OpenBaoCluster) (reconcile.Result, error) {
	res, err := r.finalize(ctx, c)
	if r.Scope != nil && apierrors.IsForbidden(err) {
		return r.outOfScope(ctx, c, fmt.Sprintf("the operator lost its rights in namespace %s while deleting the cluster", c.Namespace))
	}
	return res, err
}

// manages asks the scope, if any, whether the cluster's namespace is the
// controller's.
func manages(ctx context.Context, s Scope, namespace string) (bool, string, error) {
	if s == nil {
		return true, "", nil
	}
	return s.Manages(ctx, namespace)
}

// clustersOfTenant maps a tenant to the clusters in the namespaces it names
// or held: those whose scope it changed.
func clustersOfTenant(reader client.Reader) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		t, ok := obj.(*v1alpha1.OpenBaoTenant)
		if !ok {
			return nil
		}
		namespaces := slices.Clone(t.Spec.Namespaces)
		for _, held := range t.Status.Namespaces {
			namespaces = append(namespaces, held.Name)
		}
		slices.Sort(namespaces)
		var out []reconcile.Request
		for _, ns := range slices.Compact(namespaces) {
			clusters := &v1alpha1.OpenBaoClusterList{}
			if err := reader.List(ctx, clusters, client.InNamespace(ns)); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "list the clusters of a tenant namespace", "namespace", ns)
				continue
			}
			for _, c := range clusters.Items {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
			}
		}
		return out
	}
}
