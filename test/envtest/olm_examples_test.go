package envtest_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/test/testbin"
)

// TestBundleExamplesAreAccepted creates each alm-example of the OLM
// bundle's CSV, the objects the OpenShift console starts its forms from,
// as a dry run: the API server applies the CRD's schema, defaults and CEL
// rules, and nothing is stored for the reconcilers to act on.
func TestBundleExamplesAreAccepted(t *testing.T) {
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "bundle", "manifests", "openbao-operator.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var csv struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(data, &csv); err != nil {
		t.Fatal(err)
	}
	var examples []map[string]any
	if err := json.Unmarshal([]byte(csv.Metadata.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatalf("alm-examples: %v", err)
	}
	if len(examples) == 0 {
		t.Fatal("the CSV has no alm-examples")
	}
	createNamespace(t, "bundle-examples")
	for _, example := range examples {
		obj := &unstructured.Unstructured{Object: example}
		obj.SetNamespace("bundle-examples")
		if err := k8s.Create(context.Background(), obj, client.DryRunAll); err != nil {
			t.Errorf("the API server refuses the %s example %q: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}
