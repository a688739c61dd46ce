package children_test

import (
	"testing"

	"k8s.io/client-go/kubernetes/scheme"

	"github.com/openbao/operator/internal/children"
)

func TestEveryWatchedKindIsTypedAsDeclared(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range children.All() {
		if seen[k.GVK.String()] {
			t.Errorf("%s is listed twice", k.GVK)
		}
		seen[k.GVK.String()] = true
		if (k.Watch == children.NotWatched) != (k.New == nil) {
			t.Errorf("%s: a watched kind needs a typed object, an unwatched one has none", k.GVK)
			continue
		}
		if k.New == nil {
			continue
		}
		gvks, _, err := scheme.Scheme.ObjectKinds(k.New())
		if err != nil || len(gvks) != 1 || gvks[0] != k.GVK {
			t.Errorf("%s: the typed object is %v (%v)", k.GVK, gvks, err)
		}
	}
}

func TestCachedHoldsEveryWatchedKind(t *testing.T) {
	want := len(children.Watched(children.ByOwner)) + len(children.Watched(children.ByClusterLabel))
	if got := len(children.Cached()); got != want || got == 0 {
		t.Errorf("%d cached kinds, want %d", got, want)
	}
}

func TestRenderedReturnsACopy(t *testing.T) {
	kinds := children.Rendered()
	kinds[0].Kind = "changed"
	if children.Rendered()[0].Kind == "changed" {
		t.Error("Rendered returns the package's own slice")
	}
}
