// Package testfixture loads OpenBaoCluster manifests for tests, defaulted and
// validated through the generated CRD exactly as the API server would.
package testfixture

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/config/crd"
	"github.com/openbao/operator/internal/crdschema"
)

// DefaultNamespace is given to fixtures that name none.
const DefaultNamespace = "openbao-test"

// Files returns the fixture manifests: the user-facing samples in
// config/samples and the test-only clusters beside this file, by base name.
func Files(t testing.TB) map[string]string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	dir := filepath.Dir(here)
	files := map[string]string{}
	for _, pattern := range []string{
		filepath.Join(dir, "..", "..", "config", "samples", "*.yaml"),
		filepath.Join(dir, "clusters", "*.yaml"),
	} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			name := filepath.Base(m)
			if name == "kustomization.yaml" {
				continue
			}
			files[name[:len(name)-len(".yaml")]] = m
		}
	}
	if len(files) == 0 {
		t.Fatal("no fixture manifests found")
	}
	return files
}

// Names returns the fixture names in order.
func Names(files map[string]string) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Load reads a manifest, defaults and validates its spec through the CRD and
// keeps its status as written.
func Load(t testing.TB, path string) *v1alpha1.OpenBaoCluster {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	status := obj["status"]
	delete(obj, "status")
	schema, err := crdschema.Load(crd.OpenBaoClusters, v1alpha1.GroupVersion.Version)
	if err != nil {
		t.Fatal(err)
	}
	if errs := schema.Admit(context.Background(), obj, nil); len(errs) > 0 {
		t.Fatalf("%s is not a valid OpenBaoCluster: %v", path, errs.ToAggregate())
	}
	if status != nil {
		obj["status"] = status
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var c v1alpha1.OpenBaoCluster
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	return &c
}
