// Package crdschema validates and defaults custom resources offline, with the
// API server's own libraries and the generated CRD: OpenAPI schema, CEL rules
// and structural defaults, as an admission request would apply them.
package crdschema

import (
	"context"
	"fmt"
	"math"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"
)

// Schema is one version of a CRD, ready to validate and default objects.
type Schema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// Load reads a CRD manifest and prepares the schema of the named version.
func Load(crdYAML []byte, version string) (*Schema, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crdYAML, &crd); err != nil {
		return nil, fmt.Errorf("decode CRD: %w", err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Schema != nil {
			return newSchema(v.Schema.OpenAPIV3Schema)
		}
	}
	return nil, fmt.Errorf("CRD %s has no schema for version %s", crd.Name, version)
}

func newSchema(v1 *apiextensionsv1.JSONSchemaProps) (*Schema, error) {
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1, &internal, nil); err != nil {
		return nil, fmt.Errorf("convert schema: %w", err)
	}
	structural, err := structuralschema.NewStructural(&internal)
	if err != nil {
		return nil, fmt.Errorf("structural schema: %w", err)
	}
	if err := checkRulesCompile(structural, "", true); err != nil {
		return nil, err
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(&internal)
	if err != nil {
		return nil, fmt.Errorf("schema validator: %w", err)
	}
	return &Schema{
		structural: structural,
		validator:  validator,
		cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}, nil
}

// Admit prunes unknown fields, applies defaults and validates obj (a decoded
// JSON object) as the API server does on create; old, when not nil, is the
// stored object for update rules (transition rules such as immutability).
// It changes obj in place and returns every violation with its field path.
func (s *Schema) Admit(ctx context.Context, obj, old map[string]any) field.ErrorList {
	integers(obj)
	if old != nil {
		integers(old)
	}
	pruning.Prune(obj, s.structural, true)
	structuraldefaulting.Default(obj, s.structural)
	errs := apiservervalidation.ValidateCustomResource(nil, obj, s.validator)
	var oldObj any
	if old != nil {
		oldObj = old
	}
	celErrs, _ := s.cel.Validate(ctx, nil, s.structural, obj, oldObj, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// integers turns whole float64 numbers into int64 in place, as the API
// server's JSON decoder reads them: YAML and encoding/json give float64 for
// every number, which CEL refuses where the schema says integer.
func integers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = integers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = integers(e)
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return int64(x)
		}
	}
	return v
}

// checkRulesCompile walks the schema and reports the first validation rule
// that does not compile, as the API server does when the CRD is created.
func checkRulesCompile(s *structuralschema.Structural, path string, isRoot bool) error {
	if len(s.XValidations) > 0 {
		decl := model.SchemaDeclType(s, isRoot)
		if decl == nil {
			return fmt.Errorf("%s: validation rules on a field without a CEL type (schemaless JSON)", path)
		}
		results, err := cel.Compile(s, decl, celconfig.PerCallLimit,
			environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()), cel.StoredExpressionsEnvLoader())
		if err != nil {
			return fmt.Errorf("%s: compile validation rules: %w", path, err)
		}
		for i, r := range results {
			if r.Error != nil {
				return fmt.Errorf("%s: rule %q: %w", path, s.XValidations[i].Rule, r.Error)
			}
		}
	}
	for name, prop := range s.Properties {
		if err := checkRulesCompile(&prop, path+"."+name, prop.XEmbeddedResource); err != nil {
			return err
		}
	}
	if s.Items != nil {
		if err := checkRulesCompile(s.Items, path+"[*]", s.Items.XEmbeddedResource); err != nil {
			return err
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
		return checkRulesCompile(s.AdditionalProperties.Structural, path+"[*]", false)
	}
	return nil
}
