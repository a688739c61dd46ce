// Package values computes the openbao-cluster chart values from an
// OpenBaoCluster, its status and the operator's settings. It is pure: the
// same inputs always give the same values.
//
// Merge order, later wins: the chart's values.yaml; the CR's spec.values;
// overrideValues from watches.yaml; the values derived here from the spec
// and status. Owned keys may not appear in the first two layers that users
// write, so the last layer never silently discards a user's setting.
package values

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/openbao/operator/api/v1alpha1"
)

// ownedKeys are top-level chart values derived from the spec or status. A
// CR's spec.values and watches.yaml's overrideValues may not set them. The
// CRD's CEL rule on spec.values lists the same keys plus operatorWideKeys.
var ownedKeys = []string{
	"backup", "cluster", "config", "gateway", "image", "ingress", "networkPolicy", "operator",
	"partition", "persistentVolumeClaimRetentionPolicy", "replicas", "scheduling",
	"seal", "service", "storage", "tls",
}

// operatorWideKeys may be set in watches.yaml only: they are site policy
// (such as a registry mirror), not a property of one cluster.
var operatorWideKeys = []string{"imageRegistry"}

// CRProtectedKeys returns the top-level keys a CR's spec.values may not set.
func CRProtectedKeys() []string {
	keys := append(append([]string(nil), ownedKeys...), operatorWideKeys...)
	sort.Strings(keys)
	return keys
}

// OwnedKeyError names a value that a layer may not set.
type OwnedKeyError struct {
	Layer string // "spec.values" or "overrideValues"
	Key   string
}

func (e *OwnedKeyError) Error() string {
	return fmt.Sprintf("%s.%s is set by the operator from the OpenBaoCluster spec and cannot be overridden", e.Layer, e.Key)
}

// CheckOverrideValues rejects operator-wide overrides of owned keys.
func CheckOverrideValues(override map[string]any) error {
	return checkKeys("overrideValues", override, ownedKeys)
}

func checkKeys(layer string, vals map[string]any, forbidden []string) error {
	for _, key := range sortedKeys(vals) {
		for _, f := range forbidden {
			if key == f {
				return &OwnedKeyError{Layer: layer, Key: key}
			}
		}
	}
	return nil
}

// Operator holds the operator's own settings that shape every cluster.
type Operator struct {
	Namespace      string         // where the operator runs; its pods reach the API port
	Image          string         // the operator's image, holding bao-wrapper
	OpenShift      bool           // leave user and group IDs to the restricted SCC
	OverrideValues map[string]any // from watches.yaml, already checked
}

// SelfInitFile is the key of Config.SelfInitHCL in the self-init Secret,
// and its file name next to config.hcl.
const SelfInitFile = "self-init.hcl"

// Config is the rendered OpenBao configuration.
type Config struct {
	HCL         string // config.hcl
	SelfInitHCL string // initialize stanzas, kept in Secret <cluster>-self-init; empty once initialized
	Checksum    string // of the steady-state configuration; rolls pods when it changes
}

// Compute returns the chart values for the pass's input.
func Compute(in Input, op Operator, cfg Config) (map[string]any, error) {
	user, err := specValues(in.Cluster)
	if err != nil {
		return nil, err
	}
	owned, err := ownedValues(in, op, cfg)
	if err != nil {
		return nil, err
	}
	merged := merge(user, op.OverrideValues)
	return merge(merged, owned), nil
}

func specValues(c *v1alpha1.OpenBaoCluster) (map[string]any, error) {
	if c.Spec.Values == nil || len(c.Spec.Values.Raw) == 0 {
		return map[string]any{}, nil
	}
	var vals map[string]any
	if err := json.Unmarshal(c.Spec.Values.Raw, &vals); err != nil {
		return nil, fmt.Errorf("spec.values must be an object: %w", err)
	}
	if err := checkKeys("spec.values", vals, CRProtectedKeys()); err != nil {
		return nil, err
	}
	return vals, nil
}

// merge returns base with over laid on top: maps merge key by key, any
// other value replaces. Neither input is changed.
func merge(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		bm, baseIsMap := out[k].(map[string]any)
		om, overIsMap := v.(map[string]any)
		if baseIsMap && overIsMap {
			out[k] = merge(bm, om)
			continue
		}
		out[k] = v
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
