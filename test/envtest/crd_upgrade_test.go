package envtest_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/test/testbin"
)

// TestTheDocumentedCRDUpgradeTakesTheCRDsOverFromHelm does what
// docs/install.md's "Upgrading the operator" says, on a real API server:
// helm created the chart's CRDs at install (field manager "helm", as its
// client creates them), and the new release's CRDs, in which a field
// changed, are applied by `kubectl apply --server-side`, field manager
// "kubectl". Without --force-conflicts that apply stops at the changed
// field; with it (as documented) the CRD is the new release's. A copy of
// the OpenBaoTenant CRD under a group of its own stands in for the chart's,
// so the suite's CRDs stay as they are.
func TestTheDocumentedCRDUpgradeTakesTheCRDsOverFromHelm(t *testing.T) {
	command := documentedCRDApply(t)
	for _, flag := range []string{"--server-side", "--force-conflicts"} {
		if !strings.Contains(command, flag) {
			t.Fatalf("docs/install.md applies the CRDs with %q, without %s", command, flag)
		}
	}
	ctx := context.Background()
	old := standInCRD(t, "the release installed by helm")
	if err := k8s.Create(ctx, old, client.FieldOwner("helm")); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, old) }()

	next := standInCRD(t, "the next release")
	err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(next), client.FieldOwner("kubectl"))
	if !apierrors.IsConflict(err) {
		t.Fatalf("kubectl apply --server-side without --force-conflicts: %v, want a conflict with helm", err)
	}
	if err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(standInCRD(t, "the next release")),
		client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
		t.Fatalf("kubectl apply --server-side --force-conflicts: %v", err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(old.GroupVersionKind())
	if err := k8s.Get(ctx, client.ObjectKey{Name: old.GetName()}, got); err != nil {
		t.Fatal(err)
	}
	if desc := specDescription(got); desc != "the next release" {
		t.Errorf("after the documented apply the CRD says %q, want the next release's", desc)
	}
}

// documentedCRDApply is the kubectl line of the install guide's upgrade.
func documentedCRDApply(t *testing.T) string {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## Upgrading the operator")
	line := regexp.MustCompile(`(?m)^kubectl apply .*crds/$`).FindString(section)
	if line == "" {
		t.Fatal("docs/install.md's upgrade section applies no crds/ directory with kubectl")
	}
	return line
}

// standInCRD is the chart's OpenBaoTenant CRD in the group
// upgrade.test.openbao.org, whose spec description says which release it is.
func standInCRD(t *testing.T, release string) *unstructured.Unstructured {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "helm-charts", "openbao-operator", "crds", "openbao.org_openbaotenants.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(string(raw), "openbao.org", "upgrade.test.openbao.org")), &crd.Object); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for i := range versions {
		v := versions[i].(map[string]any)
		if err := unstructured.SetNestedField(v, release, "schema", "openAPIV3Schema", "properties", "spec", "description"); err != nil {
			t.Fatal(err)
		}
	}
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	return crd
}

func specDescription(crd *unstructured.Unstructured) string {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) == 0 {
		return ""
	}
	desc, _, _ := unstructured.NestedString(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "description")
	return desc
}
