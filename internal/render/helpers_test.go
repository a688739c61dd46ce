package render_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/test/fixtures"
)

// sample is the user-facing sample every targeted test starts from.
const sample = "openbao_v1alpha1_openbaocluster"

func newRenderer(t testing.TB) *render.Renderer {
	t.Helper()
	r, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fixture loads a named fixture through the CRD, as the API server would
// store it, and applies the changes in opts to the typed object.
func fixture(t testing.TB, name string, opts ...func(*v1alpha1.OpenBaoCluster)) *v1alpha1.OpenBaoCluster {
	t.Helper()
	files := fixtures.Files(t)
	path, ok := files[name]
	if !ok {
		t.Fatalf("no fixture %q", name)
	}
	c := fixtures.Load(t, path)
	for _, o := range opts {
		o(c)
	}
	return c
}

// valuesWith computes a cluster's chart values with the given operator
// settings, as the reconciler does.
func valuesWith(t testing.TB, c *v1alpha1.OpenBaoCluster, op values.Operator) map[string]any {
	t.Helper()
	cfg, err := values.ConfigFor(values.InputFor(c, &c.Status))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	vals, err := values.Compute(values.InputFor(c, &c.Status), op, cfg)
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	return vals
}

// renderWith renders a cluster with the given operator settings.
func renderWith(t testing.TB, r *render.Renderer, c *v1alpha1.OpenBaoCluster, op values.Operator) []*unstructured.Unstructured {
	t.Helper()
	objs, err := r.Render(c.Namespace, c.Name, valuesWith(t, c, op))
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return objs
}

// find returns the rendered objects of a kind.
func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// typed converts the single rendered object of a kind into out.
func typed(t testing.TB, objs []*unstructured.Unstructured, kind string, out any) {
	t.Helper()
	found := find(objs, kind)
	if len(found) != 1 {
		t.Fatalf("rendered %d %s objects, want 1", len(found), kind)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(found[0].Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", kind, found[0].GetName(), err)
	}
}

// statefulSets are every StatefulSet rendered: the voters', and the read
// replicas' where the cluster has them.
func statefulSets(t testing.TB, objs []*unstructured.Unstructured) []*appsv1.StatefulSet {
	t.Helper()
	var out []*appsv1.StatefulSet
	for _, obj := range find(objs, "StatefulSet") {
		sts := &appsv1.StatefulSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, sts, true); err != nil {
			t.Fatalf("StatefulSet %s: %v", obj.GetName(), err)
		}
		out = append(out, sts)
	}
	if len(out) == 0 {
		t.Fatal("rendered no StatefulSet")
	}
	return out
}

func statefulSet(t testing.TB, objs []*unstructured.Unstructured) *appsv1.StatefulSet {
	t.Helper()
	var sts appsv1.StatefulSet
	typed(t, objs, "StatefulSet", &sts)
	return &sts
}
