package crdgen_test

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/config/crd"
	"github.com/openbao/operator/internal/crdgen"
	"github.com/openbao/operator/internal/crdschema"
)

// smallCRD has one schemaless map, as controller-gen writes for
// map[string]apiextensionsv1.JSON.
const smallCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                settings:
                  type: object
                  additionalProperties:
                    x-kubernetes-preserve-unknown-fields: true
`

func protectedSchema(t *testing.T) *crdschema.Schema {
	t.Helper()
	out, err := crdgen.Protect([]byte(smallCRD), []crdgen.Forbidden{
		{Field: "settings", Keys: []string{"owned", "alsoOwned"}, Reason: "set by the operator"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := crdschema.Load(out, "v1")
	if err != nil {
		t.Fatalf("the protected CRD does not load: %v\n%s", err, out)
	}
	return s
}

func TestProtectRejectsOwnedKeysOnly(t *testing.T) {
	s := protectedSchema(t)
	cases := map[string]struct {
		settings map[string]any
		wantPath string // "" when admitted
	}{
		"no settings are admitted":             {},
		"a free key is admitted":               {settings: map[string]any{"free": map[string]any{"a": 1}}},
		"a free scalar is admitted":            {settings: map[string]any{"free": "x"}},
		"an owned key is rejected by its path": {settings: map[string]any{"owned": "x"}, wantPath: "spec.settings.owned"},
		"an owned key holding an object is rejected": {
			settings: map[string]any{"alsoOwned": map[string]any{}}, wantPath: "spec.settings.alsoOwned",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := map[string]any{}
			if tc.settings != nil {
				spec["settings"] = tc.settings
			}
			obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
				"metadata": map[string]any{"name": "w"}, "spec": spec}
			errs := s.Admit(context.Background(), obj, nil)
			if tc.wantPath == "" {
				if len(errs) > 0 {
					t.Fatalf("rejected: %v", errs.ToAggregate())
				}
				if tc.settings != nil && !reflect.DeepEqual(spec["settings"], tc.settings) {
					t.Errorf("free keys were pruned: %v", spec["settings"])
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.wantPath) {
				t.Errorf("want an error naming %s, got %v", tc.wantPath, errs)
			}
		})
	}
}

func TestProtectErrors(t *testing.T) {
	cases := map[string]struct {
		crd  string
		want string
	}{
		"a field the spec lacks":  {crd: smallCRD, want: "no field nope"},
		"a CRD with unknown keys": {crd: smallCRD + "bogus: 1\n", want: "decode CRD"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := crdgen.Protect([]byte(tc.crd), []crdgen.Forbidden{{Field: "nope", Keys: []string{"k"}}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestGeneratedCRDIsFresh fails when the owned key lists changed and
// nobody ran `make generate`.
func TestGeneratedCRDIsFresh(t *testing.T) {
	var c apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(crd.OpenBaoClusters, &c); err != nil {
		t.Fatal(err)
	}
	for _, v := range c.Spec.Versions {
		for _, f := range crdgen.OpenBaoClusterFields() {
			t.Run(v.Name+"/spec."+f.Field, func(t *testing.T) {
				checkDeclared(t, "spec."+f.Field, v.Schema.OpenAPIV3Schema.Properties["spec"].Properties[f.Field], f)
			})
		}
	}
}

// checkDeclared holds a field's schema to exactly the forbidden keys, the
// nested maps and the declared (allowed) keys of f.
func checkDeclared(t *testing.T, path string, prop apiextensionsv1.JSONSchemaProps, f crdgen.Forbidden) {
	t.Helper()
	nested := map[string]crdgen.Forbidden{}
	for _, n := range f.Nested {
		nested[n.Field] = n
	}
	var got []string
	for k, p := range prop.Properties {
		if n, ok := nested[k]; ok {
			checkDeclared(t, path+"."+k, p, n)
			continue
		}
		if d, ok := f.Declared[k]; ok {
			if p.Not != nil || p.Description != d.Description {
				t.Errorf("%s.%s is declared for the typed-field rules, but %+v", path, k, p)
			}
			continue
		}
		got = append(got, k)
		if p.Not == nil {
			t.Errorf("%s.%s is declared but not forbidden", path, k)
		}
	}
	for k := range f.Declared {
		if _, ok := prop.Properties[k]; !ok {
			t.Errorf("%s.%s is not declared: the typed-field rules cannot see it (run `make generate`)", path, k)
		}
	}
	sort.Strings(got)
	want := append([]string(nil), f.Keys...)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CRD %s properties %v\nwant %v (run `make generate`)", path, got, want)
	}
}

// TestProtectIsIdempotent: running crdgen again on the generated CRD
// changes nothing, so `make generate` is stable.
func TestProtectIsIdempotent(t *testing.T) {
	out, err := crdgen.Protect(crd.OpenBaoClusters, crdgen.OpenBaoClusterFields())
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(crd.OpenBaoClusters) {
		t.Error("crdgen.Protect changes the committed CRD: run `make generate`")
	}
}
