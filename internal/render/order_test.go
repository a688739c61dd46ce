package render_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/internal/testfixture"
)

// TestObjectsComeInApplyOrder: every fixture renders only kinds the
// operator can prune, sorted by Kinds() rank and then by name.
func TestObjectsComeInApplyOrder(t *testing.T) {
	rank := map[schema.GroupVersionKind]int{}
	for i, gvk := range render.Kinds() {
		rank[gvk] = i
	}
	r := newRenderer(t)
	files := testfixture.Files(t)
	for _, name := range testfixture.Names(files) {
		t.Run(name, func(t *testing.T) {
			_, _, objs := renderFixture(t, r, testfixture.Load(t, files[name]))
			for i, obj := range objs {
				if _, ok := rank[obj.GroupVersionKind()]; !ok {
					t.Fatalf("%s is not in Kinds()", obj.GroupVersionKind())
				}
				if i == 0 {
					continue
				}
				prev := objs[i-1]
				rp, ro := rank[prev.GroupVersionKind()], rank[obj.GroupVersionKind()]
				if rp > ro || (rp == ro && prev.GetName() >= obj.GetName()) {
					t.Errorf("%s %s comes after %s %s", obj.GetKind(), obj.GetName(), prev.GetKind(), prev.GetName())
				}
			}
		})
	}
}

func TestKindsReturnsACopy(t *testing.T) {
	kinds := render.Kinds()
	kinds[0].Kind = "changed"
	if render.Kinds()[0].Kind == "changed" {
		t.Error("Kinds returns the package's own slice")
	}
}

func TestHashSeparatesInputs(t *testing.T) {
	vals := map[string]any{"a": 1}
	base, err := render.Hash("ns", "bao", vals)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		namespace, name string
		values          map[string]any
	}{
		"another namespace":                    {"ns2", "bao", vals},
		"another name":                         {"ns", "bao2", vals},
		"other values":                         {"ns", "bao", map[string]any{"a": 2}},
		"name and namespace split differently": {"nsb", "ao", vals},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h, err := render.Hash(tc.namespace, tc.name, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			if h == base {
				t.Error("same hash as the base inputs")
			}
		})
	}
	again, _ := render.Hash("ns", "bao", map[string]any{"a": 1})
	if again != base {
		t.Error("equal inputs hash differently")
	}
}
