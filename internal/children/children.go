// Package children is the one list of the kinds of object the operator
// makes or reads for a cluster. Apply order, pruning, the controller's
// watches and the manager's cache all come from it, so a kind added here
// (a backup Job, say) is applied, pruned, watched and cached alike.
package children

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/openbao/operator/api/v1alpha1"
)

// Object is a typed Kubernetes object (controller-runtime's client.Object).
type Object interface {
	metav1.Object
	runtime.Object
}

// Watch says how a change to an object of a kind reaches its cluster.
type Watch int

const (
	// NotWatched: a kind from an optional CRD (Gateway API, Prometheus
	// Operator). The operator must start where the CRD is missing, so the
	// kind is neither watched nor cached; drift in it is repaired by the
	// periodic resync.
	NotWatched Watch = iota
	// ByOwner: the cluster is the object's controller.
	ByOwner
	// ByClusterLabel: the cluster does not own the object (pods, which the
	// StatefulSet owns; Secrets that outlive the cluster); the
	// openbao.org/cluster label maps it to its cluster.
	ByClusterLabel
	// ByClusterName: the object names its cluster itself (an
	// OpenBaoBackup's spec.clusterName). Users create these, so they carry
	// no label of ours and are cached whole.
	ByClusterName
)

// Reconciler is whose watch a kind feeds.
type Reconciler int

const (
	// ClusterReconciler is the OpenBaoCluster reconciler.
	ClusterReconciler Reconciler = iota
	// BackupReconciler is the OpenBaoBackup reconciler, which owns the
	// backup Jobs.
	BackupReconciler
)

// Kind is one kind of object.
type Kind struct {
	GVK schema.GroupVersionKind
	// New returns an empty typed object; nil for NotWatched kinds.
	New func() Object
	// Rendered says the chart renders it: applied in list order, pruned
	// when no longer rendered.
	Rendered bool
	Watch    Watch
	// For is the reconciler the watch feeds; ClusterReconciler unless set.
	For Reconciler
}

// all lists the kinds; the rendered ones in apply order, so that what
// others depend on comes first.
var all = []Kind{
	{GVK: corev1.SchemeGroupVersion.WithKind("ServiceAccount"), New: func() Object { return &corev1.ServiceAccount{} }, Rendered: true, Watch: ByOwner},
	{GVK: rbacv1.SchemeGroupVersion.WithKind("Role"), New: func() Object { return &rbacv1.Role{} }, Rendered: true, Watch: ByOwner},
	{GVK: rbacv1.SchemeGroupVersion.WithKind("RoleBinding"), New: func() Object { return &rbacv1.RoleBinding{} }, Rendered: true, Watch: ByOwner},
	{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap"), New: func() Object { return &corev1.ConfigMap{} }, Rendered: true, Watch: ByOwner},
	{GVK: corev1.SchemeGroupVersion.WithKind("Service"), New: func() Object { return &corev1.Service{} }, Rendered: true, Watch: ByOwner},
	{GVK: appsv1.SchemeGroupVersion.WithKind("StatefulSet"), New: func() Object { return &appsv1.StatefulSet{} }, Rendered: true, Watch: ByOwner},
	{GVK: policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), New: func() Object { return &policyv1.PodDisruptionBudget{} }, Rendered: true, Watch: ByOwner},
	{GVK: networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"), New: func() Object { return &networkingv1.NetworkPolicy{} }, Rendered: true, Watch: ByOwner},
	{GVK: networkingv1.SchemeGroupVersion.WithKind("Ingress"), New: func() Object { return &networkingv1.Ingress{} }, Rendered: true, Watch: ByOwner},
	{GVK: schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1alpha2", Kind: "TLSRoute"}, Rendered: true},
	{GVK: schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}, Rendered: true},
	{GVK: schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}, Rendered: true},
	// Written by the reconcile steps, not the chart. The ones that go with
	// the data (seal key, root token, CA) have no owner, so Secrets are
	// mapped to their cluster by its label.
	{GVK: corev1.SchemeGroupVersion.WithKind("Secret"), New: func() Object { return &corev1.Secret{} }, Watch: ByClusterLabel},
	{GVK: corev1.SchemeGroupVersion.WithKind("Pod"), New: func() Object { return &corev1.Pod{} }, Watch: ByClusterLabel},
	// Backups: the cluster folds its OpenBaoBackups into its status; each
	// OpenBaoBackup owns the Job that runs it.
	{GVK: v1alpha1.GroupVersion.WithKind(v1alpha1.BackupKind), New: func() Object { return &v1alpha1.OpenBaoBackup{} }, Watch: ByClusterName},
	// Restores hold the cluster's rollouts and backups while they run.
	{GVK: v1alpha1.GroupVersion.WithKind(v1alpha1.RestoreKind), New: func() Object { return &v1alpha1.OpenBaoRestore{} }, Watch: ByClusterName},
	{GVK: batchv1.SchemeGroupVersion.WithKind("Job"), New: func() Object { return &batchv1.Job{} }, Watch: ByOwner, For: BackupReconciler},
}

// All returns every kind.
func All() []Kind { return append([]Kind(nil), all...) }

// Rendered returns the kinds the chart renders, in apply order.
func Rendered() []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, k := range all {
		if k.Rendered {
			out = append(out, k.GVK)
		}
	}
	return out
}

// Watched returns the kinds whose changes reach the cluster that way.
func Watched(w Watch) []Kind { return WatchedBy(ClusterReconciler, w) }

// WatchedBy returns the kinds whose changes reach reconciler r that way.
func WatchedBy(r Reconciler, w Watch) []Kind {
	var out []Kind
	for _, k := range all {
		if k.Watch == w && k.For == r {
			out = append(out, k)
		}
	}
	return out
}

// Cached returns an empty object of every watched kind that carries the
// cluster label: the manager's cache holds, of these kinds, only objects
// with it. ByClusterName kinds are cached whole.
func Cached() []Object {
	var out []Object
	for _, k := range all {
		if k.Watch != NotWatched && k.Watch != ByClusterName {
			out = append(out, k.New())
		}
	}
	return out
}
