package olm_test

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

const ui = "urn:alm:descriptor:com.tectonic.ui:"

// Maps of free-form keys: one descriptor for the whole field, the console
// shows them as YAML (advanced).
var freeForm = map[string]bool{"config": true, "values": true}

// widgets are the console's own controls for a whole Kubernetes type: the
// field gets one descriptor, and its parts none.
var widgets = map[string]string{
	"resources":       ui + "resourceRequirements",
	"nodeAffinity":    ui + "nodeAffinity",
	"podAffinity":     ui + "podAffinity",
	"podAntiAffinity": ui + "podAntiAffinity",
}

// consoleFields lists the spec fields a user sets in the console's form:
// every field of the top two levels (objects with fields of their own are
// opened), each Secret reference once, by its name.
func consoleFields(schema apiextensionsv1.JSONSchemaProps) map[string]apiextensionsv1.JSONSchemaProps {
	fields := map[string]apiextensionsv1.JSONSchemaProps{}
	var walk func(prefix string, node apiextensionsv1.JSONSchemaProps, depth int)
	walk = func(prefix string, node apiextensionsv1.JSONSchemaProps, depth int) {
		for name, sub := range node.Properties {
			path := prefix + name
			fields[path] = sub
			if strings.HasSuffix(name, "SecretRef") || freeForm[name] && depth == 0 || widgets[name] != "" {
				continue
			}
			if sub.Type == "object" && len(sub.Properties) > 0 && depth < 2 {
				walk(path+".", sub, depth+1)
			}
		}
	}
	walk("", schema, 0)
	return fields
}

// wantXDescriptors is what the console needs to draw a field as a proper
// control: a switch, a select of every allowed value, a Secret or
// ConfigMap picker, a pod count.
func wantXDescriptors(name string, field apiextensionsv1.JSONSchemaProps) []string {
	switch {
	case widgets[name] != "":
		return []string{widgets[name]}
	case name == "replicas":
		return []string{"urn:alm:descriptor:com.tectonic.ui:podCount"}
	case strings.HasSuffix(name, "SecretRef"):
		return []string{"urn:alm:descriptor:io.kubernetes:Secret"}
	case strings.HasSuffix(name, "ConfigMapRef"):
		return []string{"urn:alm:descriptor:io.kubernetes:ConfigMap"}
	case field.Type == "boolean":
		return []string{ui + "booleanSwitch"}
	case len(field.Enum) > 0:
		var selects []string
		for _, v := range field.Enum {
			selects = append(selects, ui+"select:"+strings.Trim(string(v.Raw), `"`))
		}
		return selects
	}
	return nil
}

func TestEverySpecFieldHasADescriptor(t *testing.T) {
	b := loadBundle(t)
	for _, owned := range b.CSV.Spec.CustomResourceDefinitions.Owned {
		t.Run(owned.Kind, func(t *testing.T) {
			schema := ownedSchema(t, b.V1CRDs, owned)
			byPath := map[string]v1alpha1.SpecDescriptor{}
			for _, d := range owned.SpecDescriptors {
				if d.DisplayName == "" || d.Description == "" {
					t.Errorf("descriptor %s lacks a display name or description", d.Path)
				}
				byPath[d.Path] = d
			}
			fields := consoleFields(schema.Properties["spec"])
			for _, path := range sortedKeys(fields) {
				name := path[strings.LastIndex(path, ".")+1:]
				d, ok := byPath[path]
				if strings.HasSuffix(name, "SecretRef") || strings.HasSuffix(name, "ConfigMapRef") {
					if named, has := byPath[path+".name"]; has {
						d, ok = named, true
					}
				}
				if !ok {
					t.Errorf("spec.%s has no spec descriptor", path)
					continue
				}
				if slices.Contains(d.XDescriptors, ui+"hidden") {
					continue // out of the form: it needs no control
				}
				for _, x := range wantXDescriptors(name, fields[path]) {
					if !slices.Contains(d.XDescriptors, x) {
						t.Errorf("spec.%s: descriptor lacks %s (has %v)", path, x, d.XDescriptors)
					}
				}
			}
			for path := range byPath {
				if _, ok := fields[strings.TrimSuffix(path, ".name")]; !ok {
					t.Errorf("descriptor %s names no spec field", path)
				}
			}
		})
	}
}

func TestStatusDescriptors(t *testing.T) {
	b := loadBundle(t)
	want := map[string]string{
		"phase":      "urn:alm:descriptor:io.kubernetes.phase",
		"conditions": "urn:alm:descriptor:io.kubernetes.conditions",
	}
	for _, owned := range b.CSV.Spec.CustomResourceDefinitions.Owned {
		status := ownedSchema(t, b.V1CRDs, owned).Properties["status"]
		for field, x := range want {
			if _, ok := status.Properties[field]; !ok {
				continue
			}
			if !slices.ContainsFunc(owned.StatusDescriptors, func(d v1alpha1.StatusDescriptor) bool {
				return d.Path == field && slices.Contains(d.XDescriptors, x)
			}) {
				t.Errorf("%s: status.%s has no descriptor %s", owned.Kind, field, x)
			}
		}
		for _, d := range owned.StatusDescriptors {
			if _, ok := status.Properties[strings.Split(d.Path, ".")[0]]; !ok {
				t.Errorf("%s: status descriptor %s names no status field", owned.Kind, d.Path)
			}
		}
	}
}

func ownedSchema(t *testing.T, crds []*apiextensionsv1.CustomResourceDefinition, owned v1alpha1.CRDDescription) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, crd := range crds {
		if crd.Name != owned.Name {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == owned.Version {
				return *v.Schema.OpenAPIV3Schema
			}
		}
	}
	t.Fatalf("the bundle has no CRD %s %s", owned.Name, owned.Version)
	return apiextensionsv1.JSONSchemaProps{}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
