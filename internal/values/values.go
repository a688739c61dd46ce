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
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/internal/upgrade"
)

// ownedKeys are top-level chart values derived from the spec or status. A
// CR's spec.values and watches.yaml's overrideValues may not set them. The
// CRD's CEL rule on spec.values lists the same keys plus operatorWideKeys.
var ownedKeys = []string{
	"backup", "cluster", "config", "gateway", "image", "ingress", "networkPolicy", "operator",
	"partition", "persistentVolumeClaimRetentionPolicy", "readReplicas", "replicas", "scheduling",
	"seal", "service", "serviceAccount", "storage", "tls", "wrapper",
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

// CheckOverrideValues rejects operator-wide overrides of owned keys and
// protected labels.
func CheckOverrideValues(override map[string]any) error {
	if err := checkKeys("overrideValues", override, ownedKeys); err != nil {
		return err
	}
	return checkLabels("overrideValues", override)
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
	WrapperImage   string         // the bao-wrapper image OpenBao pods install PID 1 from
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
	// ReadHCL is the read replicas' config.hcl: the voters' steady state
	// joining as a non-voter; ReadChecksum rolls them. Empty without
	// Input.ReadReplicas.
	ReadHCL      string
	ReadChecksum string
}

// Compute returns the chart values for the pass's input.
func Compute(in Input, op Operator, cfg Config) (map[string]any, error) {
	user, err := specValues(in.Cluster)
	if err != nil {
		return nil, err
	}
	if err := CheckStandbyReads(in.Cluster); err != nil {
		return nil, err
	}
	owned, err := ownedValues(in, op, cfg)
	if err != nil {
		return nil, err
	}
	merged := merge(merge(user, op.OverrideValues), owned)
	if err := checkDisruptionBudget(merged, in.Cluster.Spec.Replicas); err != nil {
		return nil, err
	}
	return merged, nil
}

// specValues is the user's layer: spec.values with the typed fields
// (imagePullSecrets, podDisruptionBudget, monitoring) laid over it; a key
// set both ways is refused.
func specValues(c *v1alpha1.OpenBaoCluster) (map[string]any, error) {
	vals, err := decodeSpecValues(c)
	if err != nil {
		return nil, err
	}
	if err := checkKeys("spec.values", vals, CRProtectedKeys()); err != nil {
		return nil, err
	}
	if err := checkLabels("spec.values", vals); err != nil {
		return nil, err
	}
	if err := typedOverlap(c, vals); err != nil {
		return nil, err
	}
	typed, err := typedValues(c)
	if err != nil {
		return nil, err
	}
	if err := checkLabels("spec.monitoring", typed); err != nil {
		return nil, err
	}
	return merge(vals, typed), nil
}

func decodeSpecValues(c *v1alpha1.OpenBaoCluster) (map[string]any, error) {
	if c.Spec.Values == nil || len(c.Spec.Values.Raw) == 0 {
		return map[string]any{}, nil
	}
	var vals map[string]any
	if err := json.Unmarshal(c.Spec.Values.Raw, &vals); err != nil {
		return nil, fmt.Errorf("spec.values must be an object: %w", err)
	}
	return vals, nil
}

// StandbyReadsError refuses spec.readReplicas.standbyReads on a release
// whose standbys cannot serve reads (upgrade.StandbyReadsRefused).
type StandbyReadsError struct{ Message string }

func (e *StandbyReadsError) Error() string { return e.Message }

// CheckStandbyReads holds the cluster to upgrade.StandbyReadsRefused, the
// rule the webhook refuses the same spec with.
func CheckStandbyReads(c *v1alpha1.OpenBaoCluster) error {
	if msg := upgrade.StandbyReadsRefused(c.Spec.Version, c.StandbyReadsOn()); msg != "" {
		return &StandbyReadsError{Message: msg}
	}
	return nil
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

// ProtectedLabels are the label keys spec.values.podLabels,
// spec.values.commonLabels and watches.yaml may not set: the operator
// selects, prunes and maps objects by them, OpenBao's service registration
// reports its state with them, and the StatefulSet controller names pods'
// revisions with them. A user value would hide or fake what they say.
func ProtectedLabels() []string {
	keys := []string{
		v1alpha1.LabelCluster, v1alpha1.LabelManagedBy, v1alpha1.LabelAppName, v1alpha1.LabelAppInstance,
		podstate.LabelInitialized, podstate.LabelSealed, podstate.LabelActive, podstate.LabelVersion, "openbao-perf-standby",
		"controller-revision-hash", "statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index",
	}
	sort.Strings(keys)
	return keys
}

// labelMaps are the values whose keys become labels, as paths from the top:
// the pods' and every object's labels, and the ServiceMonitor's and
// PrometheusRule's (a protected key there would make a user's object pass
// for another cluster's or the operator's).
var labelMaps = [][]string{{"podLabels"}, {"commonLabels"}, {"serviceMonitor", "labels"}}

// ProtectedLabelError names a protected label a layer tries to set.
type ProtectedLabelError struct {
	Layer, Map, Key string
}

func (e *ProtectedLabelError) Error() string {
	return fmt.Sprintf("%s.%s.%s is a label the operator, OpenBao or the StatefulSet controller owns and cannot be set", e.Layer, e.Map, e.Key)
}

// Path is the field the label was set at, for an admission error.
func (e *ProtectedLabelError) Path() *field.Path {
	parts := strings.Split(e.Layer+"."+e.Map, ".")
	return field.NewPath(parts[0], parts[1:]...).Key(e.Key)
}

// CheckLabels refuses a protected label in spec.values or in a typed field
// that sets labels (spec.monitoring.serviceMonitor.labels): the rule
// Compute holds the controller to, for the webhook.
func CheckLabels(c *v1alpha1.OpenBaoCluster) error {
	vals, err := decodeSpecValues(c)
	if err != nil {
		return nil // the controller reports undecodable values
	}
	if err := checkLabels("spec.values", vals); err != nil {
		return err
	}
	typed, err := typedValues(c)
	if err != nil {
		return nil
	}
	return checkLabels("spec.monitoring", typed)
}

func checkLabels(layer string, vals map[string]any) error {
	protected := map[string]bool{}
	for _, k := range ProtectedLabels() {
		protected[k] = true
	}
	for _, path := range labelMaps {
		labels := nested(vals, path)
		for _, key := range sortedKeys(labels) {
			if protected[key] {
				return &ProtectedLabelError{Layer: layer, Map: strings.Join(path, "."), Key: key}
			}
		}
	}
	return nil
}

// nested is the map at path in vals, or nil.
func nested(vals map[string]any, path []string) map[string]any {
	m := vals
	for _, k := range path {
		next, _ := m[k].(map[string]any)
		if next == nil {
			return nil
		}
		m = next
	}
	return m
}

// DisruptionBudgetError says a PodDisruptionBudget would let a voluntary
// disruption take quorum away.
type DisruptionBudgetError struct {
	MaxUnavailable, Replicas, Allowed int
}

func (e *DisruptionBudgetError) Error() string {
	return fmt.Sprintf("podDisruptionBudget.maxUnavailable %d lets %d of %d servers go at once, but Raft needs %d of %d "+
		"to keep quorum: at most %d for %d replicas", e.MaxUnavailable, e.MaxUnavailable, e.Replicas,
		e.Replicas/2+1, e.Replicas, e.Allowed, e.Replicas)
}

// checkDisruptionBudget refuses a maxUnavailable (a count or a percentage,
// rounded up as Kubernetes does) above what keeps a Raft quorum.
func checkDisruptionBudget(vals map[string]any, replicas int32) error {
	pdb, _ := vals["podDisruptionBudget"].(map[string]any)
	if enabled, set := pdb["enabled"].(bool); pdb == nil || (set && !enabled) {
		return nil // the chart's default, maxUnavailable 1, keeps quorum
	}
	n, ok := unavailableCount(pdb["maxUnavailable"], int(replicas))
	allowed := (int(replicas) - 1) / 2
	if ok && n > allowed && replicas > 1 {
		return &DisruptionBudgetError{MaxUnavailable: n, Replicas: int(replicas), Allowed: allowed}
	}
	return nil
}

func unavailableCount(v any, replicas int) (int, bool) {
	switch t := v.(type) {
	case float64:
		return int(t), true
	case int64:
		return int(t), true
	case int:
		return t, true
	case json.Number:
		n, err := t.Int64()
		return int(n), err == nil
	case string:
		var pct int
		if _, err := fmt.Sscanf(t, "%d%%", &pct); err != nil {
			return 0, false
		}
		return (pct*replicas + 99) / 100, true
	}
	return 0, false
}
