package children_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/openbao/operator/api/v1alpha1"
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
		gvks, _, err := testScheme.ObjectKinds(k.New())
		if err != nil || len(gvks) != 1 || gvks[0] != k.GVK {
			t.Errorf("%s: the typed object is %v (%v)", k.GVK, gvks, err)
		}
	}
}

var testScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = scheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}()

func TestCachedHoldsEveryKindWatchedByLabel(t *testing.T) {
	want := 0
	for _, r := range []children.Reconciler{children.ClusterReconciler, children.BackupReconciler} {
		want += len(children.WatchedBy(r, children.ByOwner)) + len(children.WatchedBy(r, children.ByClusterLabel))
	}
	if got := len(children.Cached()); got != want || got == 0 {
		t.Errorf("%d cached kinds, want %d", got, want)
	}
	for _, obj := range children.Cached() {
		if _, ok := obj.(*v1alpha1.OpenBaoBackup); ok {
			t.Error("OpenBaoBackups, which users create without our label, are cached by label")
		}
	}
}

func TestBackupJobsFeedTheBackupReconcilerOnly(t *testing.T) {
	for _, k := range children.Watched(children.ByOwner) {
		if k.GVK.Kind == "Job" {
			t.Error("the cluster reconciler owns Jobs")
		}
	}
	if jobs := children.WatchedBy(children.BackupReconciler, children.ByOwner); len(jobs) != 1 || jobs[0].GVK.Kind != "Job" {
		t.Errorf("the backup reconciler owns %v", jobs)
	}
}

func TestRenderedReturnsACopy(t *testing.T) {
	kinds := children.Rendered()
	kinds[0].Kind = "changed"
	if children.Rendered()[0].Kind == "changed" {
		t.Error("Rendered returns the package's own slice")
	}
}
