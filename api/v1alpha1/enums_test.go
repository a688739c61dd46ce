package v1alpha1_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// openBaoSpelled are the enum fields whose values OpenBao defines and the
// operator writes into config.hcl as they are: they keep OpenBao's
// spelling, and their comments say so.
var openBaoSpelled = map[string]bool{
	"OpenBaoCluster spec.unseal.type":                          true,
	"OpenBaoCluster spec.selfInit.requests[].operation":        true,
	"OpenBaoCluster spec.configuration.listener.tlsMinVersion": true,
	"OpenBaoCluster spec.configuration.logging.level":          true,
	"OpenBaoCluster spec.configuration.logging.format":         true,
}

var upperCamel = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// TestOperatorEnumsAreUpperCamel: every enum value the operator defines is
// UpperCamel, as Kubernetes spells its own; a field that keeps OpenBao's
// spelling is one of openBaoSpelled and its description says "OpenBao's
// own name ..., as written in config.hcl" (the package's rule).
func TestOperatorEnumsAreUpperCamel(t *testing.T) {
	files, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		for _, v := range crd.Spec.Versions {
			walkEnums(crd.Spec.Names.Kind, "", v.Schema.OpenAPIV3Schema, func(path string, s *apiextensionsv1.JSONSchemaProps) {
				seen[path] = true
				if openBaoSpelled[path] {
					if desc := strings.Join(strings.Fields(s.Description), " "); !strings.Contains(desc, "OpenBao's own name") || !strings.Contains(desc, "as written in config.hcl") {
						t.Errorf("%s keeps OpenBao's spelling; its comment must say \"OpenBao's own name ..., as written in config.hcl\"", path)
					}
					return
				}
				for _, e := range s.Enum {
					if value := strings.Trim(string(e.Raw), `"`); !upperCamel.MatchString(value) {
						t.Errorf("%s: enum value %q is not UpperCamel; the operator spells the values it defines like Kubernetes does", path, value)
					}
				}
			})
		}
	}
	var stale []string
	for path := range openBaoSpelled {
		if !seen[path] {
			stale = append(stale, path)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("openBaoSpelled names fields with no enum: %v", stale)
	}
}

func walkEnums(kind, path string, s *apiextensionsv1.JSONSchemaProps, visit func(string, *apiextensionsv1.JSONSchemaProps)) {
	if s == nil {
		return
	}
	if len(s.Enum) > 0 {
		visit(kind+" "+strings.TrimPrefix(path, "."), s)
	}
	for name, p := range s.Properties {
		walkEnums(kind, path+"."+name, &p, visit)
	}
	if s.Items != nil {
		walkEnums(kind, path+"[]", s.Items.Schema, visit)
	}
	if s.AdditionalProperties != nil {
		walkEnums(kind, path+"{}", s.AdditionalProperties.Schema, visit)
	}
}
