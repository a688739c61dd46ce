package tenancy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
)

// ManagedByValue marks the tenant RoleBindings: the provisioner's, not the
// controller's (whose children carry v1alpha1.ManagedByValue).
const ManagedByValue = "openbao-operator-provisioner"

// Binding is the RoleBinding that gives the controller its tenant rights in
// namespace: the tenant ClusterRole, bound to the controller's
// ServiceAccount in operatorNamespace, owned by every tenant that names the
// namespace (so the garbage collector, too, removes it with the last one).
func Binding(namespace, operatorNamespace string, owners ...metav1.OwnerReference) *rbacv1.RoleBinding {
	b := &rbacv1.RoleBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{
			Name: TenantRoleName, Namespace: namespace,
			Labels: map[string]string{
				v1alpha1.LabelManagedBy: ManagedByValue, "app.kubernetes.io/name": "openbao-operator",
			},
			OwnerReferences: owners,
		},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: TenantRoleName},
		Subjects: []rbacv1.Subject{{
			Kind: rbacv1.ServiceAccountKind, Name: ControllerServiceAccount, Namespace: operatorNamespace,
		}},
	}
	return b
}

// OwnerReference is a tenant as an owner of its bindings: not a
// controller reference (several tenants may share a namespace), and
// without blockOwnerDeletion, which would need rights on the tenant's
// finalizers that no one else should hold.
func OwnerReference(t *v1alpha1.OpenBaoTenant) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.TenantKind, Name: t.Name, UID: t.UID,
	}
}

// Reconciled returns existing as it must be with tenant among its owners,
// and whether it changed. Owners that are not tenants, the labels of
// others and the binding's own metadata are kept; the role and subjects
// are put back as Binding has them.
func Reconciled(existing *rbacv1.RoleBinding, operatorNamespace string, tenant metav1.OwnerReference) (*rbacv1.RoleBinding, bool) {
	want := Binding(existing.Namespace, operatorNamespace)
	out := existing.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		out.Labels[k] = v
	}
	out.Subjects = want.Subjects
	if !slices.ContainsFunc(out.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == tenant.UID }) {
		out.OwnerReferences = append(out.OwnerReferences, tenant)
	}
	return out, !equality.Semantic.DeepEqual(existing, out)
}

// RoleRefMatches says whether a binding found under the tenant name binds
// the tenant role: roleRef cannot change, so one that does not must be
// deleted and made again.
func RoleRefMatches(b *rbacv1.RoleBinding) bool {
	return b.RoleRef == Binding(b.Namespace, "").RoleRef
}

// Released returns existing without tenant among its owners, and whether
// any tenant still owns it; when none does, the binding is deleted.
func Released(existing *rbacv1.RoleBinding, tenant string) (out *rbacv1.RoleBinding, stillOwned bool) {
	out = existing.DeepCopy()
	out.OwnerReferences = slices.DeleteFunc(out.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.Kind == v1alpha1.TenantKind && string(o.UID) == tenant
	})
	for _, o := range out.OwnerReferences {
		if o.Kind == v1alpha1.TenantKind {
			return out, true
		}
	}
	return out, false
}

// Refusal says why a namespace may not be provisioned, or "" when it may:
// the operator's own namespace holds its identities' tokens and the
// webhook certificate, and kube-* namespaces are the platform's.
func Refusal(namespace, operatorNamespace string) string {
	switch {
	case namespace == operatorNamespace:
		return fmt.Sprintf("%s is the operator's own namespace: OpenBao clusters run in namespaces of their own", namespace)
	case strings.HasPrefix(namespace, "kube-"):
		return fmt.Sprintf("%s belongs to Kubernetes", namespace)
	}
	return ""
}

// Provisioned returns, sorted, every namespace that some tenant reports
// provisioned: the namespaces the controller may manage. A tenant being
// deleted provisions nothing: its bindings are about to go, and the
// controller stops its informers there first.
func Provisioned(tenants []v1alpha1.OpenBaoTenant) []string {
	seen := map[string]bool{}
	for _, t := range tenants {
		if !t.DeletionTimestamp.IsZero() {
			continue
		}
		for _, ns := range t.Status.Namespaces {
			if ns.Provisioned {
				seen[ns.Name] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for ns := range seen {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}
