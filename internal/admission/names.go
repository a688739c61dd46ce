package admission

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/openbao/operator/api/v1alpha1"
)

// ReservedNameSuffix returns the child-name suffix that name ends in, or
// "". A cluster of such a name would share a child's name with the
// cluster the rest of its name names: cluster "bao-internal"'s Service
// is cluster "bao"'s headless Service. The controller never applies over
// another cluster's child (internal/apply Claim), so the loser of that
// race would sit Degraded; refusing the name keeps it from happening.
func ReservedNameSuffix(name string) string {
	return suffixOf(name, v1alpha1.ChildNameSuffixes())
}

// suffixOf returns the one of suffixes that name ends in, or "".
func suffixOf(name string, suffixes []string) string {
	for _, s := range suffixes {
		if strings.HasSuffix(name, s) {
			return s
		}
	}
	return ""
}

// validateName refuses a new cluster whose name ends in a child-name
// suffix. The name cannot change, so an existing cluster is never
// refused for it.
func validateName(old, c *v1alpha1.OpenBaoCluster) field.ErrorList {
	if old != nil {
		return nil
	}
	suffix := ReservedNameSuffix(c.Name)
	if suffix == "" {
		return nil
	}
	other := strings.TrimSuffix(c.Name, suffix)
	return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), c.Name,
		"ends in "+suffix+", which the operator gives a child of cluster "+other+
			": the two clusters would share that object's name; want a name that ends in none of "+
			strings.Join(v1alpha1.ChildNameSuffixes(), ", "))}
}
