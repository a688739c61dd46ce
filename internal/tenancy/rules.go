// Package tenancy holds the operator's two identities and what each may do,
// and the pure decisions of provisioning a tenant's namespaces.
//
// The controller's rights have one source: the +kubebuilder:rbac markers,
// from which controller-gen writes the ClusterRole openbao-operator-manager
// (what a cluster-wide install binds). Split cuts that role in two: the
// rights on namespaced objects (the tenant role, bound per namespace by the
// provisioner) and the rest (the controller role, bound cluster-wide: its
// own API kinds, reviews, its webhook's configuration). A right added by a
// marker lands in one of them at the next `make generate`.
package tenancy

import (
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/openbao/operator/api/v1alpha1"
)

// Names of the identities and roles, as config/ installs them.
const (
	// ProvisionerServiceAccount manages OpenBaoTenants and binds the
	// tenant role in their namespaces.
	ProvisionerServiceAccount = "openbao-operator-provisioner"
	// ControllerServiceAccount runs the OpenBaoCluster, OpenBaoBackup and
	// OpenBaoRestore controllers and the admission webhook.
	ControllerServiceAccount = "openbao-operator-controller-manager"
	// ManagerRoleName is the generated union of the controller's rights:
	// what a cluster-wide install binds.
	ManagerRoleName = "openbao-operator-manager"
	// TenantRoleName is the ClusterRole that holds the controller's rights
	// in one namespace; the provisioner binds it there with a RoleBinding
	// of the same name, so it grants nothing outside that namespace.
	TenantRoleName = "openbao-operator-tenant"
	// ControllerRoleName is the controller's cluster-wide ClusterRole in a
	// tenancy install: no workloads, no Secrets.
	ControllerRoleName = "openbao-operator-controller"
	// ProvisionerRoleName is the provisioner's ClusterRole.
	ProvisionerRoleName = "openbao-operator-provisioner"
)

// clusterLevel are the resources outside any namespace that the controller
// uses, by API group; a group listed with no resources is all cluster
// level. Every other resource is namespaced and goes to the tenant role,
// so an unknown one is granted per namespace, never cluster-wide.
var clusterLevel = map[string][]string{
	// Its own kinds are watched cluster-wide, so that a cluster in a
	// namespace no tenant provisioned is told so on its status.
	v1alpha1.GroupVersion.Group:    nil,
	"authentication.k8s.io":        {"tokenreviews"},
	"authorization.k8s.io":         {"subjectaccessreviews"},
	"admissionregistration.k8s.io": {"validatingwebhookconfigurations"},
	// Whether a class allows volume expansion (spec.storage.size grows).
	"storage.k8s.io": {"storageclasses"},
}

// IsClusterLevel says whether a resource of group is granted cluster-wide.
func IsClusterLevel(group, resource string) bool {
	resources, ok := clusterLevel[group]
	if !ok {
		return false
	}
	base, _, _ := strings.Cut(resource, "/")
	return resources == nil || slices.Contains(resources, base)
}

// Split cuts the manager role's rules into the tenant rules (namespaced
// resources) and the controller's cluster rules (everything else,
// non-resource URLs included). A rule naming both kinds of resource is cut
// in two.
func Split(manager []rbacv1.PolicyRule) (tenant, cluster []rbacv1.PolicyRule) {
	for _, r := range manager {
		if len(r.NonResourceURLs) > 0 {
			cluster = append(cluster, r)
			continue
		}
		for _, group := range r.APIGroups {
			var inTenant, inCluster []string
			for _, res := range r.Resources {
				if IsClusterLevel(group, res) {
					inCluster = append(inCluster, res)
				} else {
					inTenant = append(inTenant, res)
				}
			}
			tenant = appendRule(tenant, r, group, inTenant)
			cluster = appendRule(cluster, r, group, inCluster)
		}
	}
	return tenant, cluster
}

func appendRule(rules []rbacv1.PolicyRule, from rbacv1.PolicyRule, group string, resources []string) []rbacv1.PolicyRule {
	if len(resources) == 0 {
		return rules
	}
	r := *from.DeepCopy()
	r.APIGroups, r.Resources = []string{group}, resources
	return append(rules, r)
}

// ProvisionerRules are the provisioner's rights: tenants, the clusters'
// names (not their children), and RoleBindings
// of the tenant role, which it may bind without holding its rights (the
// bind verb, restricted to that one ClusterRole). RBAC cannot restrict
// create by name: the ValidatingAdmissionPolicy
// openbao-operator-provisioner-bindings refuses any other RoleBinding from
// it. It reads no workload and no Secret, and lists neither namespaces nor
// RoleBindings: it learns nothing of the cluster beyond what tenants name.
func ProvisionerRules() []rbacv1.PolicyRule {
	group := v1alpha1.GroupVersion.Group
	return []rbacv1.PolicyRule{
		rule(group, []string{"openbaotenants"}, "get", "list", "watch", "update", "patch"),
		rule(group, []string{"openbaotenants/status"}, "get", "update", "patch"),
		rule(group, []string{"openbaotenants/finalizers"}, "update"),
		// Cluster events bring a tenant back sooner than its resync.
		rule(group, []string{"openbaoclusters"}, "get", "list", "watch"),
		rule(rbacv1.GroupName, []string{"rolebindings"}, "create"),
		named(rule(rbacv1.GroupName, []string{"rolebindings"}, "get", "update", "patch", "delete"), TenantRoleName),
		named(rule(rbacv1.GroupName, []string{"clusterroles"}, "bind"), TenantRoleName),
		rule("", []string{"events"}, "create", "patch"),
		rule("events.k8s.io", []string{"events"}, "create", "patch"),
	}
}

func rule(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
	v := append([]string(nil), verbs...)
	sort.Strings(v)
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: v}
}

func named(r rbacv1.PolicyRule, names ...string) rbacv1.PolicyRule {
	r.ResourceNames = names
	return r
}
