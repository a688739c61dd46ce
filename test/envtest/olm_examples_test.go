package envtest_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/test/testbin"
)

// exampleOrder is the order a user creates the examples in: a backup or a
// restore names a cluster, which must exist for the webhook to admit it.
var exampleOrder = []string{"OpenBaoCluster", "OpenBaoBackup", "OpenBaoRestore"}

// TestBundleExamplesAreAdmittedTogether creates every alm-example of the
// OLM bundle's CSV, the objects the OpenShift console starts its forms
// from, in the namespace the CSV suggests, clusters first, on an API
// server with the CRDs and the operator's validating webhook: each must
// pass the schema, the CEL rules and the webhook, which refuses a backup
// or restore of a cluster that does not exist or has no spec.backup.
// (Whether each then reaches its ready state needs OpenBao servers and an
// object store: the OLM tier.)
func TestBundleExamplesAreAdmittedTogether(t *testing.T) {
	annotations := bundleCSVAnnotations(t)
	var examples []map[string]any
	if err := json.Unmarshal([]byte(annotations["alm-examples"]), &examples); err != nil {
		t.Fatalf("alm-examples: %v", err)
	}
	if len(examples) == 0 {
		t.Fatal("the CSV has no alm-examples")
	}
	var ns corev1.Namespace
	if err := json.Unmarshal([]byte(annotations["operatorframework.io/suggested-namespace-template"]), &ns); err != nil {
		t.Fatalf("operatorframework.io/suggested-namespace-template: %v", err)
	}
	c := startWebhook(t)
	ctx := context.Background()
	if err := c.Create(ctx, &ns); err != nil {
		t.Fatalf("create the suggested namespace: %v", err)
	}
	slices.SortStableFunc(examples, func(a, b map[string]any) int {
		return slices.Index(exampleOrder, a["kind"].(string)) - slices.Index(exampleOrder, b["kind"].(string))
	})
	for _, example := range examples {
		obj := &unstructured.Unstructured{Object: example}
		if !slices.Contains(exampleOrder, obj.GetKind()) {
			t.Errorf("the %s example %q is of a kind this test does not order", obj.GetKind(), obj.GetName())
			continue
		}
		obj.SetNamespace(ns.Name)
		if err := c.Create(ctx, obj); err != nil {
			t.Errorf("the API server refuses the %s example %q: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

func bundleCSVAnnotations(t *testing.T) map[string]string {
	t.Helper()
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
	return csv.Metadata.Annotations
}
