// Package crdgen finishes the CRDs controller-gen writes with what its
// markers cannot say: schemaless maps whose operator-owned keys are rejected
// at admission. CEL cannot type schemaless JSON, so each owned key becomes a
// declared property that no value satisfies; the API server's error then
// names the key's path in its message ("spec.config.listener" must not
// validate the schema), as it does offline in internal/crdschema.
package crdgen

import (
	"fmt"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/internal/baoconfig"
	"github.com/openbao/operator/internal/values"
)

// Forbidden is one schemaless map field of the spec and its owned keys.
type Forbidden struct {
	Field  string   // property of .spec, such as "config"
	Keys   []string // keys the user may not set
	Reason string   // appended to each key's description
	// Nested protects keys inside maps of the field (label maps of
	// spec.values), each with its reason.
	Nested []Forbidden
	// Declared keys are allowed but declared (schemaless), so that a CEL
	// rule can test their presence: the spec.values keys a typed field
	// also sets.
	Declared map[string]values.TypedValuesKey
}

// Protect rewrites the named spec fields of every version in crdYAML.
func Protect(crdYAML []byte, fields []Forbidden) ([]byte, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crdYAML, &crd); err != nil {
		return nil, fmt.Errorf("decode CRD: %w", err)
	}
	for vi := range crd.Spec.Versions {
		v := &crd.Spec.Versions[vi]
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			return nil, fmt.Errorf("version %s has no spec", v.Name)
		}
		for _, f := range fields {
			prop, ok := spec.Properties[f.Field]
			if !ok {
				return nil, fmt.Errorf("version %s: spec has no field %s", v.Name, f.Field)
			}
			spec.Properties[f.Field] = protectField(prop, f)
		}
		v.Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	return yaml.Marshal(&crd)
}

// protectField turns a schemaless map into an object that keeps unknown
// fields and declares each owned key as a property that never validates.
// Structural schemas forbid properties beside additionalProperties, so the
// map's additionalProperties give way to x-kubernetes-preserve-unknown-fields.
func protectField(prop apiextensionsv1.JSONSchemaProps, f Forbidden) apiextensionsv1.JSONSchemaProps {
	keep := true
	prop.Type = "object"
	prop.XPreserveUnknownFields = &keep
	prop.AdditionalProperties = nil
	prop.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
	keys := append([]string(nil), f.Keys...)
	sort.Strings(keys)
	for _, key := range keys {
		prop.Properties[key] = apiextensionsv1.JSONSchemaProps{
			Description:            fmt.Sprintf("%s is %s.", key, f.Reason),
			XPreserveUnknownFields: &keep,
			Not:                    &apiextensionsv1.JSONSchemaProps{},
		}
	}
	for _, n := range f.Nested {
		prop.Properties[n.Field] = protectField(apiextensionsv1.JSONSchemaProps{}, n)
	}
	for key, d := range f.Declared {
		open := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &keep}
		decl := open
		if d.List {
			decl = apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &open}}
		}
		decl.Description = d.Description
		prop.Properties[key] = decl
	}
	return prop
}

// OpenBaoClusterFields are the protected fields of the OpenBaoCluster
// spec: the keys of spec.config the operator renders, the chart values of
// spec.values it derives, and the labels it owns in spec.values' label maps.
func OpenBaoClusterFields() []Forbidden {
	const labelReason = "a label the operator, OpenBao or the StatefulSet controller owns: the operator selects, prunes and maps pods by it"
	return []Forbidden{
		{Field: "config", Keys: baoconfig.ProtectedKeys(), Reason: "rendered by the operator and cannot be set in spec.config"},
		{Field: "values", Keys: values.CRProtectedKeys(), Reason: "set by the operator from the spec and cannot be overridden in spec.values",
			Nested: []Forbidden{
				{Field: "podLabels", Keys: values.ProtectedLabels(), Reason: labelReason},
				{Field: "commonLabels", Keys: values.ProtectedLabels(), Reason: labelReason},
			},
			Declared: values.TypedValuesKeys()},
	}
}

// Rules are admission rules for one field, which markers cannot hold
// because they are generated (for example from a grammar in Go).
type Rules struct {
	// Path names the field from the root of the schema, such as
	// spec, backup, schedule.
	Path  []string
	Rules apiextensionsv1.ValidationRules
}

// SetRules replaces the x-kubernetes-validations of each field named in
// fields, in every version of crdYAML; a second run changes nothing.
func SetRules(crdYAML []byte, fields []Rules) ([]byte, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crdYAML, &crd); err != nil {
		return nil, fmt.Errorf("decode CRD: %w", err)
	}
	for vi := range crd.Spec.Versions {
		v := &crd.Spec.Versions[vi]
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		for _, f := range fields {
			if err := setRules(v.Schema.OpenAPIV3Schema, f.Path, f.Rules); err != nil {
				return nil, fmt.Errorf("version %s: %w", v.Name, err)
			}
		}
	}
	return yaml.Marshal(&crd)
}

func setRules(schema *apiextensionsv1.JSONSchemaProps, path []string, rules apiextensionsv1.ValidationRules) error {
	if len(path) == 0 {
		schema.XValidations = rules
		return nil
	}
	prop, ok := schema.Properties[path[0]]
	if !ok {
		return fmt.Errorf("no field %s", path[0])
	}
	if err := setRules(&prop, path[1:], rules); err != nil {
		return fmt.Errorf("%s.%w", path[0], err)
	}
	schema.Properties[path[0]] = prop
	return nil
}
