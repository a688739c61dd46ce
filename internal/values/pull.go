package values

import (
	"fmt"
	"strings"

	"github.com/openbao/operator/api/v1alpha1"
)

// PulledImage is the reference the servers pull, repository:tag: the
// spec's repository with its registry host replaced by the operator-wide
// imageRegistry, as the chart's openbao.image helper does. Image
// verification checks exactly what the servers will run.
func PulledImage(c *v1alpha1.OpenBaoCluster, op Operator) string {
	img := specImage(c)
	registry, _ := op.OverrideValues["imageRegistry"].(string)
	if registry == "" {
		return img.String()
	}
	repo := img.Repository
	if first, rest, ok := strings.Cut(repo, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		repo = rest
	}
	return registry + "/" + repo + ":" + img.Tag
}

// PullSecretNames are the imagePullSecrets the chart gives the servers:
// overrideValues' list, else spec.values' (a list replaces, not merges).
func PullSecretNames(c *v1alpha1.OpenBaoCluster, op Operator) ([]string, error) {
	user, err := specValues(c)
	if err != nil {
		return nil, err
	}
	list, ok := merge(user, op.OverrideValues)["imagePullSecrets"].([]any)
	if !ok {
		return nil, nil
	}
	names := make([]string, 0, len(list))
	for _, item := range list {
		entry, _ := item.(map[string]any)
		name, _ := entry["name"].(string)
		if name == "" {
			return nil, fmt.Errorf("imagePullSecrets: every entry needs a name")
		}
		names = append(names, name)
	}
	return names, nil
}
