package watches_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	operator "github.com/openbao/operator"
	"github.com/openbao/operator/internal/watches"
)

var (
	gvk   = schema.GroupVersionKind{Group: "openbao.org", Version: "v1alpha1", Kind: "OpenBaoCluster"}
	chart = "helm-charts/openbao-cluster"
)

func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// entry is one watches.yaml entry for gvk with extra lines appended.
func entry(extra string) string {
	return "- group: openbao.org\n  version: v1alpha1\n  kind: OpenBaoCluster\n  chart: helm-charts/openbao-cluster\n" + extra
}

func TestLoadTheShippedWatchesFile(t *testing.T) {
	s, err := watches.Load(operator.DefaultWatches, gvk, chart, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.ReconcilePeriod != 10*time.Minute || s.MaxConcurrentReconciles != 2 {
		t.Errorf("got reconcilePeriod %s, maxConcurrentReconciles %d; want 10m, 2", s.ReconcilePeriod, s.MaxConcurrentReconciles)
	}
	if len(s.OverrideValues) != 0 {
		t.Errorf("unset OPENBAO_IMAGE_REGISTRY should drop imageRegistry, got %v", s.OverrideValues)
	}
	s, err = watches.Load(operator.DefaultWatches, gvk, chart, env(map[string]string{"OPENBAO_IMAGE_REGISTRY": "mirror.example.com"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.OverrideValues["imageRegistry"]; got != "mirror.example.com" {
		t.Errorf("imageRegistry = %v, want mirror.example.com", got)
	}
}

func TestLoadSettings(t *testing.T) {
	vars := map[string]string{"REGISTRY": "mirror.example.com", "TAG": "2.4.1"}
	cases := map[string]struct {
		data string
		want watches.Settings
	}{
		"an entry without optional fields takes the defaults": {
			data: entry(""),
			want: watches.Settings{ReconcilePeriod: 10 * time.Minute, MaxConcurrentReconciles: 1, OverrideValues: map[string]any{}},
		},
		"a trailing slash on the chart path is accepted": {
			data: strings.Replace(entry(""), "openbao-cluster\n", "openbao-cluster/\n", 1),
			want: watches.Settings{ReconcilePeriod: 10 * time.Minute, MaxConcurrentReconciles: 1, OverrideValues: map[string]any{}},
		},
		"the entry of another kind is skipped": {
			data: "- {group: other.org, version: v1, kind: Other, chart: elsewhere}\n" + entry("  maxConcurrentReconciles: 64\n"),
			want: watches.Settings{ReconcilePeriod: 10 * time.Minute, MaxConcurrentReconciles: 64, OverrideValues: map[string]any{}},
		},
		"reconcilePeriod of 1m and 1h are accepted": {
			data: entry("  reconcilePeriod: 1h\n  maxConcurrentReconciles: 1\n"),
			want: watches.Settings{ReconcilePeriod: time.Hour, MaxConcurrentReconciles: 1, OverrideValues: map[string]any{}},
		},
		"$NAME and ${NAME} expand, nested too; an unset variable drops its key": {
			data: entry("  overrideValues:\n    imageRegistry: $REGISTRY\n    image:\n      tag: ${TAG}\n    unset: $NOPE\n    literal: a $REGISTRY b\n    number: 3\n"),
			want: watches.Settings{ReconcilePeriod: 10 * time.Minute, MaxConcurrentReconciles: 1, OverrideValues: map[string]any{
				"imageRegistry": "mirror.example.com", "image": map[string]any{"tag": "2.4.1"},
				"literal": "a $REGISTRY b", "number": float64(3),
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := watches.Load([]byte(tc.data), gvk, chart, env(vars))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	cases := map[string]struct {
		data     string
		chart    string
		wantText string
	}{
		"an unknown field":                    {data: entry("  reconcilePeriods: 10m\n"), wantText: "reconcilePeriods"},
		"no entry for the kind":               {data: "- {group: other.org, version: v1, kind: Other, chart: x}\n", wantText: "no entry"},
		"an empty file":                       {data: "", wantText: "no entry"},
		"not a list":                          {data: "group: openbao.org\n", wantText: "invalid watches.yaml"},
		"a chart path the operator lacks":     {data: entry(""), chart: "helm-charts/other", wantText: "chart is"},
		"reconcilePeriod below one minute":    {data: entry("  reconcilePeriod: 30s\n"), wantText: `reconcilePeriod "30s"`},
		"reconcilePeriod that is no duration": {data: entry("  reconcilePeriod: abc\n"), wantText: `reconcilePeriod "abc"`},
		"maxConcurrentReconciles of -1":       {data: entry("  maxConcurrentReconciles: -1\n"), wantText: "maxConcurrentReconciles -1"},
		"maxConcurrentReconciles of 65":       {data: entry("  maxConcurrentReconciles: 65\n"), wantText: "maxConcurrentReconciles 65"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := chart
			if tc.chart != "" {
				c = tc.chart
			}
			_, err := watches.Load([]byte(tc.data), gvk, c, env(nil))
			if !errors.Is(err, watches.ErrInvalid) {
				t.Fatalf("error %v, want one wrapping ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not contain %q", err, tc.wantText)
			}
		})
	}
}

// TestLoadMaxConcurrentReconcilesZero: an explicit 0 is refused, not taken
// for an absent field.
func TestLoadMaxConcurrentReconcilesZero(t *testing.T) {
	_, err := watches.Load([]byte(entry("  maxConcurrentReconciles: 0\n")), gvk, chart, env(nil))
	if !errors.Is(err, watches.ErrInvalid) || !strings.Contains(err.Error(), "maxConcurrentReconciles") {
		t.Fatalf("error %v, want ErrInvalid naming maxConcurrentReconciles", err)
	}
}

func FuzzLoad(f *testing.F) {
	f.Add(operator.DefaultWatches, "X")
	f.Add([]byte(entry("  reconcilePeriod: 30s\n")), "")
	f.Add([]byte(entry("  overrideValues:\n    a: ${\n    b: $\n    c: ${}\n    d: {e: $X}\n")), "v")
	f.Add([]byte("- [1, 2]\n"), "")
	f.Add([]byte("{"), "")
	f.Fuzz(func(t *testing.T, data []byte, value string) {
		s, err := watches.Load(data, gvk, chart, func(string) string { return value })
		if err != nil {
			if !errors.Is(err, watches.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if s.ReconcilePeriod < time.Minute || s.MaxConcurrentReconciles < 1 || s.MaxConcurrentReconciles > 64 {
			t.Fatalf("accepted out-of-range settings %+v", s)
		}
	})
}
