// Package watches reads watches.yaml, helm-operator's mapping from a kind to
// its chart, with operator-wide value overrides. It is pure: the environment
// is passed in.
package watches

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Watch is one entry of watches.yaml.
type Watch struct {
	Group                   string         `json:"group"`
	Version                 string         `json:"version"`
	Kind                    string         `json:"kind"`
	Chart                   string         `json:"chart"`
	ReconcilePeriod         string         `json:"reconcilePeriod,omitempty"`
	MaxConcurrentReconciles *int           `json:"maxConcurrentReconciles,omitempty"`
	OverrideValues          map[string]any `json:"overrideValues,omitempty"`
}

// Settings are what the operator takes from the entry of its kind.
type Settings struct {
	ReconcilePeriod         time.Duration
	MaxConcurrentReconciles int
	OverrideValues          map[string]any
}

// Defaults when an entry leaves a field out.
const (
	DefaultReconcilePeriod         = 10 * time.Minute
	DefaultMaxConcurrentReconciles = 1
)

// ErrInvalid is wrapped by every error about the file's content.
var ErrInvalid = errors.New("invalid watches.yaml")

// Load parses data and returns the settings of the entry for gvk, which
// must render the named chart. getenv expands "$NAME" override values.
func Load(data []byte, gvk schema.GroupVersionKind, chart string, getenv func(string) string) (Settings, error) {
	var entries []Watch
	if err := yaml.UnmarshalStrict(data, &entries); err != nil {
		return Settings{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	for i, w := range entries {
		if w.Group != gvk.Group || w.Version != gvk.Version || w.Kind != gvk.Kind {
			continue
		}
		return settingsOf(i, w, chart, getenv)
	}
	return Settings{}, fmt.Errorf("%w: no entry for group %s, version %s, kind %s", ErrInvalid, gvk.Group, gvk.Version, gvk.Kind)
}

func settingsOf(i int, w Watch, chart string, getenv func(string) string) (Settings, error) {
	at := fmt.Sprintf("entry %d (%s)", i, w.Kind)
	if strings.TrimSuffix(w.Chart, "/") != chart {
		return Settings{}, fmt.Errorf("%w: %s: chart is %q; this operator embeds only %q", ErrInvalid, at, w.Chart, chart)
	}
	s := Settings{ReconcilePeriod: DefaultReconcilePeriod, MaxConcurrentReconciles: DefaultMaxConcurrentReconciles}
	if w.ReconcilePeriod != "" {
		d, err := time.ParseDuration(w.ReconcilePeriod)
		if err != nil || d < time.Minute {
			return Settings{}, fmt.Errorf("%w: %s: reconcilePeriod %q: want a duration of at least 1m, like 10m", ErrInvalid, at, w.ReconcilePeriod)
		}
		s.ReconcilePeriod = d
	}
	if n := w.MaxConcurrentReconciles; n != nil {
		if *n < 1 || *n > 64 {
			return Settings{}, fmt.Errorf("%w: %s: maxConcurrentReconciles %d: want 1 to 64", ErrInvalid, at, *n)
		}
		s.MaxConcurrentReconciles = *n
	}
	s.OverrideValues = expand(w.OverrideValues, getenv)
	return s, nil
}

// expand replaces string values that are exactly "$NAME" or "${NAME}" with
// the variable's value, and drops them when it is empty, so that an unset
// variable leaves the chart's default in place.
func expand(vals map[string]any, getenv func(string) string) map[string]any {
	out := make(map[string]any, len(vals))
	for k, v := range vals {
		switch tv := v.(type) {
		case map[string]any:
			out[k] = expand(tv, getenv)
		case string:
			name, isRef := envRef(tv)
			if !isRef {
				out[k] = tv
			} else if value := getenv(name); value != "" {
				out[k] = value
			}
		default:
			out[k] = v
		}
	}
	return out
}

func envRef(s string) (string, bool) {
	switch {
	case strings.HasPrefix(s, "${") && strings.HasSuffix(s, "}"):
		return s[2 : len(s)-1], len(s) > 3
	case strings.HasPrefix(s, "$") && !strings.ContainsAny(s[1:], "${} /"):
		return s[1:], len(s) > 1
	}
	return "", false
}
