package nscache

import (
	"slices"
)

// normalize turns the namespaces a caller names into the set to serve:
// sorted, without duplicates, and without "" (which would mean every
// namespace, the cluster-wide right this cache exists to avoid).
func normalize(namespaces []string) []string {
	out := make([]string, 0, len(namespaces))
	for _, ns := range namespaces {
		if ns != "" {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
