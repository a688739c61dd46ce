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

// diff returns the namespaces of want that served lacks (to start) and
// those of served that want lacks (to stop), each sorted. want must be
// normalized.
func diff(served map[string]*member, want []string) (add, remove []string) {
	for _, ns := range want {
		if _, ok := served[ns]; !ok {
			add = append(add, ns)
		}
	}
	for ns := range served {
		if _, ok := slices.BinarySearch(want, ns); !ok {
			remove = append(remove, ns)
		}
	}
	slices.Sort(remove)
	return add, remove
}
