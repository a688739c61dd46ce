package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/test/localnode"
)

// controllerClient acts as the operator's controller ServiceAccount, with
// exactly the rights RBAC gives it.
func controllerClient(t testing.TB) client.Client {
	t.Helper()
	cfg, err := node.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + localnode.OperatorNamespace + ":openbao-operator-controller-manager",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + localnode.OperatorNamespace, "system:authenticated"},
	}
	cl, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestLeastPrivilegeInstall: the node's operator runs in the tenancy mode
// (every other e2e test forms its clusters, 3 voters among them, in a
// namespace an OpenBaoTenant provisioned). Here: the controller's
// ServiceAccount reads a Secret in a provisioned namespace but not in a
// namespace no tenant names, holds no cluster-wide binding, and a cluster
// created outside every tenant is told so on its status and gets nothing.
func TestLeastPrivilegeInstall(t *testing.T) {
	t.Parallel()
	cl := installOperator(t)
	ctx := context.Background()
	controller := controllerClient(t)

	if err := cl.Get(ctx, client.ObjectKey{Name: "openbao-operator-manager"}, &rbacv1.ClusterRoleBinding{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the cluster-wide manager binding exists in the tenancy install (%v)", err)
	}
	inside := createNamespace(ctx, t, cl, "tenant")
	outside := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "no-tenant-",
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := cl.Create(ctx, outside); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteNamespace(context.Background(), t, cl, outside.Name) })
	for _, ns := range []string{inside, outside.Name} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-secret", Namespace: ns}, StringData: map[string]string{"k": "v"}}
		if err := cl.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := controller.Get(ctx, client.ObjectKey{Namespace: inside, Name: "team-secret"}, &corev1.Secret{}); err != nil {
		t.Errorf("the controller cannot read a Secret in its tenant namespace %s: %v", inside, err)
	}
	err := controller.Get(ctx, client.ObjectKey{Namespace: outside.Name, Name: "team-secret"}, &corev1.Secret{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the controller reads a Secret in %s, which no tenant provisioned: got %v, want Forbidden", outside.Name, err)
	}
	if err := controller.List(ctx, &corev1.SecretList{}); !apierrors.IsForbidden(err) {
		t.Errorf("the controller lists Secrets cluster-wide: got %v, want Forbidden", err)
	}

	createCluster(ctx, t, cl, outside.Name, "bao")
	waitFor(ctx, t, time.Minute, "the cluster outside every tenant reported", func() (bool, string) {
		st := clusterStatus(ctx, t, cl, outside.Name, "bao")
		conds, _ := st["conditions"].([]any)
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Degraded" {
				return m["reason"] == "NamespaceNotProvisioned" && strings.Contains(fmt.Sprint(m["message"]), outside.Name), fmt.Sprint(m)
			}
		}
		return false, fmt.Sprint(conds)
	})
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(outside.Name)); err != nil || len(pods.Items) != 0 {
		t.Errorf("pods in a namespace no tenant provisioned: %d (%v)", len(pods.Items), err)
	}
}
