package tenancy

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
)

func readManagerRole(t *testing.T) ([]byte, rbacv1.ClusterRole) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	return data, role
}

// The committed roles of config/tenancy/roles are what `make generate` writes.
func TestGeneratedRolesAreCurrent(t *testing.T) {
	data, _ := readManagerRole(t)
	files, err := Files(data)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("..", "..", "config", "tenancy", "roles", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("config/tenancy/roles/%s is stale: run make generate", name)
		}
	}
}

type grant struct{ group, resource, verb, name, url string }

func grants(rules []rbacv1.PolicyRule) map[grant]bool {
	out := map[grant]bool{}
	for _, r := range rules {
		for _, v := range r.Verbs {
			for _, u := range r.NonResourceURLs {
				out[grant{verb: v, url: u}] = true
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					names := append([]string{""}, r.ResourceNames...)
					if len(r.ResourceNames) > 0 {
						names = r.ResourceNames
					}
					for _, n := range names {
						out[grant{g, res, v, n, ""}] = true
					}
				}
			}
		}
	}
	return out
}

// Every right of the manager role lands in exactly one of the two roles,
// and the cluster-wide one holds nothing on workloads or Secrets.
func TestSplitKeepsEveryRightOnceAndNoWorkloadClusterWide(t *testing.T) {
	_, manager := readManagerRole(t)
	tenant, cluster := Split(manager.Rules)
	inTenant, inCluster := grants(tenant), grants(cluster)
	for g := range grants(manager.Rules) {
		if inTenant[g] == inCluster[g] {
			t.Errorf("%+v: in the tenant role %v, in the cluster role %v; want exactly one", g, inTenant[g], inCluster[g])
		}
	}
	for g := range inCluster {
		if g.url == "" && g.group != v1alpha1.GroupVersion.Group && !slices.Contains([]string{"tokenreviews", "subjectaccessreviews", "validatingwebhookconfigurations", "storageclasses"}, g.resource) {
			t.Errorf("cluster-wide right on a namespaced kind: %+v", g)
		}
	}
	for g := range inTenant {
		if g.group == v1alpha1.GroupVersion.Group {
			t.Errorf("the tenant role holds the operator's own kind %+v; the controller watches those cluster-wide", g)
		}
	}
	if !inTenant[grant{"", "secrets", "get", "", ""}] || !inTenant[grant{"apps", "statefulsets", "create", "", ""}] {
		t.Error("the tenant role lacks Secrets or StatefulSets")
	}
}

func tenant(name string, deleting bool, statuses ...v1alpha1.TenantNamespaceStatus) v1alpha1.OpenBaoTenant {
	t := v1alpha1.OpenBaoTenant{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if deleting {
		now := metav1.Now()
		t.DeletionTimestamp = &now
	}
	t.Status.Namespaces = statuses
	return t
}

func TestProvisionedIsTheUnionOfProvisionedNamespacesOfLiveTenants(t *testing.T) {
	got := Provisioned([]v1alpha1.OpenBaoTenant{
		tenant("a", false, Outcome("b", true, v1alpha1.ReasonProvisioned, ""), Outcome("missing", false, v1alpha1.ReasonNamespaceNotFound, "")),
		tenant("b", false, Outcome("a", true, v1alpha1.ReasonProvisioned, ""), Outcome("b", true, v1alpha1.ReasonProvisioned, ""),
			Outcome("leaving", false, v1alpha1.ReasonDeprovisioning, "")),
		tenant("c", true, Outcome("gone", true, v1alpha1.ReasonProvisioned, "")),
	})
	if want := []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("Provisioned = %v, want %v", got, want)
	}
}

func TestRefusal(t *testing.T) {
	for ns, refused := range map[string]bool{"kube-system": true, "kube-public": true, "openbao-operator-system": true, "team-a": false, "kubeflow": false} {
		if got := Refusal(ns, "openbao-operator-system") != ""; got != refused {
			t.Errorf("Refusal(%s) refuses=%v, want %v", ns, got, refused)
		}
	}
}

func TestReleasedKeepsOtherTenantsBinding(t *testing.T) {
	a := metav1.OwnerReference{Kind: v1alpha1.TenantKind, Name: "a", UID: "uid-a"}
	b := metav1.OwnerReference{Kind: v1alpha1.TenantKind, Name: "b", UID: "uid-b"}
	binding := Binding("ns", "op", a, b)
	out, still := Released(binding, "uid-a")
	if !still || len(out.OwnerReferences) != 1 || out.OwnerReferences[0].UID != "uid-b" {
		t.Errorf("release of a from a shared binding: still=%v owners=%v", still, out.OwnerReferences)
	}
	if _, still := Released(out, "uid-b"); still {
		t.Error("the last tenant released, yet the binding is still owned")
	}
}

func TestReadyNamesTheFirstNamespaceMissing(t *testing.T) {
	ready, reason, msg := Ready([]string{"a", "b", "c"}, []v1alpha1.TenantNamespaceStatus{
		Outcome("a", true, v1alpha1.ReasonProvisioned, ""),
		Outcome("c", false, v1alpha1.ReasonNamespaceNotFound, "namespace c does not exist"),
		Outcome("b", false, v1alpha1.ReasonNamespaceRefused, "b is refused"),
	})
	want := "namespace b is not provisioned (NamespaceRefused): b is refused; and 1 more, see status.namespaces"
	if ready || reason != v1alpha1.ReasonNotAllProvisioned || msg != want {
		t.Errorf("Ready = %v %s %q, want false %s %q", ready, reason, msg, v1alpha1.ReasonNotAllProvisioned, want)
	}
}
