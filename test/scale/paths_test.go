package scale_test

import (
	"regexp"
	"sort"
	"strings"
)

// The operator's requests are counted by verb and by URL path with the
// names left out, so that the benchmark can say which requests make up the
// idle traffic.

// splitResourcePath cuts a resource path into its API prefix (/api/v1 or
// /apis/group/version), namespace and the rest (resource, name, subresource).
func splitResourcePath(path string) (prefix []string, namespace string, rest []string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	n := 0
	switch {
	case len(parts) > 2 && parts[0] == "api":
		n = 2
	case len(parts) > 3 && parts[0] == "apis":
		n = 3
	default:
		return nil, "", nil
	}
	prefix, rest = parts[:n], parts[n:]
	if len(rest) >= 3 && rest[0] == "namespaces" {
		return prefix, rest[1], rest[2:]
	}
	return prefix, "", rest
}

// normalPath replaces namespace and object names in a resource path, so
// that requests for the same kind of object add up.
func normalPath(path string) string {
	prefix, ns, rest := splitResourcePath(path)
	if prefix == nil {
		return path
	}
	out := append([]string{}, prefix...)
	if ns != "" {
		out = append(out, "namespaces", "{ns}")
	}
	if rest[0] == "namespaces" && len(rest) == 2 { // a Namespace object itself
		rest = []string{"namespaces", "{name}"}
	} else if len(rest) >= 2 {
		rest = append([]string{rest[0], objectName(rest[1])}, rest[2:]...)
	}
	return "/" + strings.Join(append(out, rest...), "/")
}

// benchCluster matches the names the benchmark gives its clusters, so that
// a child's name keeps its suffix: "{cluster}-tls-ca" says which Secret.
var benchCluster = regexp.MustCompile(`^bao-[0-9]+`)

func objectName(name string) string {
	if loc := benchCluster.FindStringIndex(name); loc != nil {
		return "{cluster}" + name[loc[1]:]
	}
	return "{name}"
}

// diffCounts returns after - before, dropping keys that did not move,
// sorted by count, largest first.
func diffCounts(before, after map[string]float64) []keyCount {
	var out []keyCount
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out = append(out, keyCount{k, d})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].n != out[j].n {
			return out[i].n > out[j].n
		}
		return out[i].key < out[j].key
	})
	return out
}

type keyCount struct {
	key string
	n   float64
}

// byVerb sums keyed counts by their verb, the key's first word.
func byVerb(counts []keyCount) []keyCount {
	sums := map[string]float64{}
	for _, c := range counts {
		verb, _, _ := strings.Cut(c.key, " ")
		sums[verb] += c.n
	}
	return diffCounts(nil, sums)
}
