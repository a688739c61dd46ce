package values

import (
	"encoding/json"
	"fmt"

	"github.com/openbao/operator/api/v1alpha1"
)

// typedKeys pairs each typed spec field with the chart value it sets, so
// that a spec setting both is refused rather than one silently winning.
var typedKeys = []struct{ Field, Key string }{
	{"imagePullSecrets", "imagePullSecrets"},
	{"monitoring", "serviceMonitor"},
	{"podDisruptionBudget", "podDisruptionBudget"},
}

// TypedValuesKey is a spec.values key a typed field also sets, for the
// CRD's schema: declared (as the chart's shape, a list or a map) so that
// the CEL rules on the spec can refuse both at once.
type TypedValuesKey struct {
	Description string
	List        bool
}

// TypedValuesKeys are the spec.values keys a typed field also sets.
func TypedValuesKeys() map[string]TypedValuesKey {
	out := map[string]TypedValuesKey{}
	for _, tk := range typedKeys {
		out[tk.Key] = TypedValuesKey{List: tk.Key == "imagePullSecrets",
			Description: fmt.Sprintf("%s is the chart value spec.%s sets; a spec may set one of the two.", tk.Key, tk.Field)}
	}
	return out
}

// TypedOverlapError names a typed field and the spec.values key it sets,
// both set.
type TypedOverlapError struct{ Field, Key string }

func (e *TypedOverlapError) Error() string {
	return fmt.Sprintf("spec.%s and spec.values.%s are both set: set spec.%s only (spec.values is for chart values the spec does not cover)",
		e.Field, e.Key, e.Field)
}

// CheckTypedOverlap refuses a spec.values key that a set typed field also
// sets. The webhook and Compute both call it.
func CheckTypedOverlap(c *v1alpha1.OpenBaoCluster) error {
	vals, err := decodeSpecValues(c)
	if err != nil {
		return nil // reported by specValues as not an object
	}
	return typedOverlap(c, vals)
}

// typedOverlap is CheckTypedOverlap on spec.values already decoded.
func typedOverlap(c *v1alpha1.OpenBaoCluster, vals map[string]any) error {
	set := typedSet(c)
	for _, tk := range typedKeys {
		if _, inValues := vals[tk.Key]; inValues && set[tk.Field] {
			return &TypedOverlapError{Field: tk.Field, Key: tk.Key}
		}
	}
	return nil
}

func typedSet(c *v1alpha1.OpenBaoCluster) map[string]bool {
	s := c.Spec
	return map[string]bool{
		"imagePullSecrets":    s.ImagePullSecrets != nil, // as the CRD rule's has(): an empty list counts
		"monitoring":          s.Monitoring != nil,
		"podDisruptionBudget": s.PodDisruptionBudget != nil,
	}
}

// chartPDB, chartServiceMonitor and chartAlerts are the chart's shapes of
// the typed fields; an empty field keeps the chart's default.
type chartPDB struct {
	Enabled        *bool `json:"enabled,omitempty"`
	MaxUnavailable any   `json:"maxUnavailable,omitempty"`
}

type chartServiceMonitor struct {
	Enabled  bool              `json:"enabled"`
	Interval string            `json:"interval,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Scrapers any               `json:"scrapers,omitempty"`
	Alerts   *chartAlerts      `json:"alerts,omitempty"`
}

type chartAlerts struct {
	Enabled             *bool  `json:"enabled,omitempty"`
	BackupMaxAgeSeconds *int64 `json:"backupMaxAgeSeconds,omitempty"`
	RunbookBaseURL      string `json:"runbookBaseURL,omitempty"`
}

// typedValues maps the typed fields onto the chart values they stand for,
// in the shapes JSON decoding gives (as spec.values' are).
func typedValues(c *v1alpha1.OpenBaoCluster) (map[string]any, error) {
	s := c.Spec
	out := map[string]any{}
	if len(s.ImagePullSecrets) > 0 {
		out["imagePullSecrets"] = s.ImagePullSecrets
	}
	if p := s.PodDisruptionBudget; p != nil {
		pdb := chartPDB{Enabled: p.Enabled}
		if p.MaxUnavailable != nil {
			pdb.MaxUnavailable = p.MaxUnavailable
		}
		out["podDisruptionBudget"] = pdb
	}
	if m := s.Monitoring; m != nil {
		sm := chartServiceMonitor{Enabled: m.ServiceMonitor.Enabled, Interval: m.ServiceMonitor.Interval,
			Labels: m.ServiceMonitor.Labels}
		if r := m.PrometheusRule; r != (v1alpha1.PrometheusRuleSpec{}) {
			sm.Alerts = &chartAlerts{Enabled: r.Enabled, BackupMaxAgeSeconds: r.BackupMaxAgeSeconds, RunbookBaseURL: r.RunbookBaseURL}
		}
		if len(m.Scrapers) > 0 {
			sm.Scrapers = m.Scrapers
		}
		out["serviceMonitor"] = sm
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("typed chart values: %w", err)
	}
	var vals map[string]any
	if err := json.Unmarshal(raw, &vals); err != nil {
		return nil, fmt.Errorf("typed chart values: %w", err)
	}
	return vals, nil
}
