package tenancy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/openbao/operator/api/v1alpha1"
)

// Dropped returns, sorted, the namespaces the tenant's status holds that
// its spec no longer names: their bindings must be released.
func Dropped(t *v1alpha1.OpenBaoTenant) []string {
	var out []string
	for _, ns := range t.Status.Namespaces {
		if !slices.Contains(t.Spec.Namespaces, ns.Name) {
			out = append(out, ns.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Outcome is what provisioning one namespace came to.
func Outcome(namespace string, provisioned bool, reason, message string) v1alpha1.TenantNamespaceStatus {
	return v1alpha1.TenantNamespaceStatus{Name: namespace, Provisioned: provisioned, Reason: reason, Message: message}
}

// Ready summarizes the namespaces of the spec into the Ready condition:
// true when every one is provisioned, else the first that is not, by
// name, and how many others.
func Ready(spec []string, outcomes []v1alpha1.TenantNamespaceStatus) (ready bool, reason, message string) {
	var missing []v1alpha1.TenantNamespaceStatus
	for _, o := range outcomes {
		if slices.Contains(spec, o.Name) && !o.Provisioned {
			missing = append(missing, o)
		}
	}
	if len(missing) == 0 {
		return true, v1alpha1.ReasonAllProvisioned, fmt.Sprintf("the controller may manage OpenBao clusters in %s", strings.Join(spec, ", "))
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i].Name < missing[j].Name })
	msg := fmt.Sprintf("namespace %s is not provisioned (%s): %s", missing[0].Name, missing[0].Reason, missing[0].Message)
	if len(missing) > 1 {
		msg += fmt.Sprintf("; and %d more, see status.namespaces", len(missing)-1)
	}
	return false, v1alpha1.ReasonNotAllProvisioned, msg
}

// SortOutcomes orders the status by namespace, so it is written only when
// something changed.
func SortOutcomes(outcomes []v1alpha1.TenantNamespaceStatus) {
	sort.Slice(outcomes, func(i, j int) bool { return outcomes[i].Name < outcomes[j].Name })
}
