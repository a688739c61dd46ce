package render_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/openbao/operator/internal/children"
	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/test/fixtures"
)

// TestObjectsComeInApplyOrder: every fixture renders only kinds the
// operator can prune, sorted by children.Rendered() rank and then by name.
func TestObjectsComeInApplyOrder(t *testing.T) {
	rank := map[schema.GroupVersionKind]int{}
	for i, gvk := range children.Rendered() {
		rank[gvk] = i
	}
	r := newRenderer(t)
	files := fixtures.Files(t)
	for _, name := range fixtures.Names(files) {
		t.Run(name, func(t *testing.T) {
			_, _, objs := renderFixture(t, r, fixtures.Load(t, files[name]))
			for i, obj := range objs {
				if _, ok := rank[obj.GroupVersionKind()]; !ok {
					t.Fatalf("%s is not in children.Rendered()", obj.GroupVersionKind())
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
