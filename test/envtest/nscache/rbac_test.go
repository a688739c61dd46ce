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
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "operator"}}
	create(t, sa)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: home + "-workloads"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"},
		}},
	}
	create(t, role)
	create(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: bound, Name: "operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: home, Name: sa.Name}},
	})
	asOperator := rest.CopyConfig(cfg)
	asOperator.Impersonate = rest.ImpersonationConfig{
		UserName: serviceaccount.MakeUsername(home, sa.Name),
		Groups:   serviceaccount.MakeGroupNames(home),
	}
	// Reads wait for their informer to sync, which never happens without
	// the rights: bound them.
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
