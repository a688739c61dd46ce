package nscache_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The point of the cache: an identity bound to a ClusterRole in one
// namespace only, with no cluster-wide list or watch on the kind, serves
// that namespace, reads and hears events there.
func TestServesWithRightsInOneNamespaceOnly(t *testing.T) {
	home, bound, elsewhere := namespace(t, "home"), namespace(t, "bound"), namespace(t, "elsewhere")
	create(t, configMap(bound, "cm", nil))
	create(t, configMap(elsewhere, "cm", nil))
	asOperator, _ := confinedIdentity(t, home, bound)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The identity really is confined: elsewhere, and cluster-wide, it is refused.
	direct, err := client.New(asOperator, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.List(ctx, &corev1.ConfigMapList{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a cluster-wide list as the operator answered %v, want Forbidden", err)
	}
	if err := direct.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(elsewhere)); !apierrors.IsForbidden(err) {
		t.Fatalf("a list elsewhere as the operator answered %v, want Forbidden", err)
	}

	c := startCache(t, asOperator, cache.Options{}, nil, bound)
	if err := c.Get(ctx, client.ObjectKey{Namespace: bound, Name: "cm"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("get in the bound namespace: %v", err)
	}
	wantList(t, c, []string{bound + "/cm"})
	inf, err := c.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	var events seen
	if _, err := inf.AddEventHandler(recorder(&events)); err != nil {
		t.Fatal(err)
	}
	create(t, configMap(bound, "later", nil))
	events.wait(t, bound+"/later")
}

// confinedIdentity is a ServiceAccount of home that may read ConfigMaps in
// the namespaces given, through a RoleBinding in each, and nowhere else;
// bind grants it another namespace.
func confinedIdentity(t *testing.T, home string, namespaces ...string) (asOperator *rest.Config, bind func(ns string)) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "operator"}}
	create(t, sa)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: home + "-workloads"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"},
		}},
	}
	create(t, role)
	bind = func(ns string) {
		create(t, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: home, Name: sa.Name}},
		})
	}
	for _, ns := range namespaces {
		bind(ns)
	}
	asOperator = rest.CopyConfig(cfg)
	asOperator.Impersonate = rest.ImpersonationConfig{
		UserName: serviceaccount.MakeUsername(home, sa.Name),
		Groups:   serviceaccount.MakeGroupNames(home),
	}
	return asOperator, bind
}

// A served namespace the identity cannot list (its RoleBinding not there
// yet, or removed before the namespace leaves) holds back neither the
// informer's sync, which the manager waits for before it starts the
// controllers and gives up on after two minutes by exiting (seen on the
// node: an operator restarted while a tenant's namespace was being torn
// down reconciled nothing for two minutes, then exited), nor a read: a
// read there fails with the list's error at once, and serves once the
// rights come.
func TestANamespaceThatCannotBeListedHoldsBackNeitherTheSyncNorAWorker(t *testing.T) {
	home, bound, unbound := namespace(t, "home"), namespace(t, "bound"), namespace(t, "unbound")
	create(t, configMap(bound, "cm", nil))
	create(t, configMap(unbound, "cm", nil))
	asOperator, bind := confinedIdentity(t, home, bound)
	c := startCache(t, asOperator, cache.Options{}, nil, bound, unbound)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the informer did not sync with one namespace unlistable: %v", err)
	}
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync with one namespace unlistable")
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: bound, Name: "cm"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("get in the bound namespace: %v", err)
	}
	start := time.Now()
	err := c.Get(ctx, client.ObjectKey{Namespace: unbound, Name: "cm"}, &corev1.ConfigMap{})
	if !apierrors.IsForbidden(err) || time.Since(start) > 5*time.Second {
		t.Fatalf("a get in the unlistable namespace answered %v after %s, want its Forbidden at once", err, time.Since(start).Round(time.Millisecond))
	}

	bind(unbound)
	deadline := time.Now().Add(15 * time.Second) // the feed retries after 1 s, 2 s, 4 s...
	for {
		err := c.Get(ctx, client.ObjectKey{Namespace: unbound, Name: "cm"}, &corev1.ConfigMap{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the namespace is not served 15 s after its RoleBinding: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
