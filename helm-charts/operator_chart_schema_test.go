package helmcharts_test

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// renderErr renders the chart as `helm install` does, values checked
// against values.schema.json first, and returns the error.
func renderErr(values map[string]any) error {
	c, err := loader.LoadDir(operatorChart)
	if err != nil {
		return err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = kubeVersion
	vals, err := chartutil.ToRenderValues(c, values,
		chartutil.ReleaseOptions{Name: "openbao-operator", Namespace: namespace, IsInstall: true}, caps)
	if err != nil {
		return err
	}
	_, err = engine.Engine{Strict: true}.Render(c, vals)
	return err
}

// TestTheSchemaRefusesWhatNoTemplateReads: a misspelled or mistyped value
// is refused by helm before anything renders, with the schema's message
// naming the value, instead of being ignored (a typo) or rendered into a
// manifest the API server refuses later.
func TestTheSchemaRefusesWhatNoTemplateReads(t *testing.T) {
	cases := map[string]struct {
		values map[string]any
		want   []string // all in the error
	}{
		"a misspelled top-level value": {map[string]any{"replicaCont": 2},
			[]string{"additional properties 'replicaCont' not allowed"}},
		"the value replicaCount replaced": {map[string]any{"replicas": 2},
			[]string{"additional properties 'replicas' not allowed"}},
		"a misspelled nested value": {map[string]any{"serviceMonitor": map[string]any{"enabeld": true}},
			[]string{"/serviceMonitor", "additional properties 'enabeld' not allowed"}},
		"a count given as a word": {map[string]any{"replicaCount": "two"},
			[]string{"/replicaCount", "got string, want integer"}},
		"no manager at all": {map[string]any{"replicaCount": 0},
			[]string{"/replicaCount", "minimum: got 0, want 1"}},
		"a switch given as a string": {map[string]any{"webhook": map[string]any{"enabled": "yes"}},
			[]string{"/webhook/enabled", "got string, want boolean"}},
		"a log level the manager does not know": {map[string]any{"logLevel": "verbose"},
			[]string{"/logLevel", "value must be one of 'debug', 'info', 'error', 'panic'"}},
		"an environment variable without a name": {map[string]any{"extraEnv": []any{map[string]any{"value": "x"}}},
			[]string{"/extraEnv/0", "missing property 'name'"}},
		"a pull policy Kubernetes does not know": {map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}},
			[]string{"/image/pullPolicy", "'Always'"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := renderErr(tc.values)
			if err == nil {
				t.Fatalf("helm rendered %v", tc.values)
			}
			t.Log(err)
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q:\n%v", want, err)
				}
			}
		})
	}
}

// TestTheSchemaAdmitsEveryLogLevelTheManagerTakes: --zap-log-level takes
// these names and any integer of 1 or more.
func TestTheSchemaAdmitsEveryLogLevelTheManagerTakes(t *testing.T) {
	for _, level := range []any{"debug", "info", "error", "panic", 1, 4} {
		if err := renderErr(map[string]any{"logLevel": level}); err != nil {
			t.Errorf("logLevel %v: %v", level, err)
		}
	}
}

// TestTheSchemaDescribesEveryValue walks values.yaml and the schema
// together: every key of values.yaml is a property of the schema, down to
// the maps the schema leaves free-form (resources, securityContext, ...),
// and every property of the schema is a value, so the two cannot drift.
func TestTheSchemaDescribesEveryValue(t *testing.T) {
	c := loadOperatorChart(t)
	if c.Schema == nil {
		t.Fatal("the chart has no values.schema.json")
	}
	var schema map[string]any
	if err := json.Unmarshal(c.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	if schema["additionalProperties"] != false {
		t.Error("the schema admits values it does not name at the top level")
	}
	var missing []string
	definitions, _ := schema["definitions"].(map[string]any)
	walkSchema("", c.Values, schema, definitions, &missing)
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("values.yaml and values.schema.json differ:\n  %s", strings.Join(missing, "\n  "))
	}
}

func walkSchema(path string, values, schema, definitions map[string]any, missing *[]string) {
	if ref, ok := schema["$ref"].(string); ok {
		schema, _ = definitions[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
	}
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		return // free-form: the schema names no keys
	}
	for key, v := range values {
		sub, ok := props[key].(map[string]any)
		if !ok {
			*missing = append(*missing, "the schema lacks "+path+key)
			continue
		}
		if m, ok := v.(map[string]any); ok {
			walkSchema(path+key+".", m, sub, definitions, missing)
		}
	}
	for key := range props {
		if _, ok := values[key]; !ok {
			*missing = append(*missing, "values.yaml lacks "+path+key)
		}
	}
}
