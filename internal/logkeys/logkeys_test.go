package logkeys

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	uberzap "go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func capture(lines *[]string) logr.Logger {
	return funcr.New(func(prefix, args string) { *lines = append(*lines, prefix+" "+args) },
		funcr.Options{LogCaller: funcr.All})
}

// TestEveryLineCarriesReconcileID: a key controller-runtime adds to a
// reconcile's logger, and one passed to a line, both reach the output as
// reconcile_id; other keys and the caller are left as they were.
func TestEveryLineCarriesReconcileID(t *testing.T) {
	var lines []string
	log := New(capture(&lines)).WithName("openbaocluster").
		WithValues("controller", "openbaocluster", "namespace", "ns", "name", "bao", "reconcileID", "r-1")
	log.Info("reconciled", "step", "tls")
	log.Error(errors.New("boom"), "failed", "reconcileID", "r-2")
	log.V(0).WithValues("k", "v").Info("nested")
	if len(lines) != 3 {
		t.Fatalf("lines %v", lines)
	}
	for _, l := range lines {
		for _, want := range []string{`"controller"="openbaocluster"`, `"namespace"="ns"`, `"name"="bao"`, `"reconcile_id"="r-1"`} {
			if !strings.Contains(l, want) {
				t.Errorf("line %s lacks %s", l, want)
			}
		}
		if strings.Contains(l, "reconcileID") {
			t.Errorf("line %s still says reconcileID", l)
		}
		if !strings.Contains(l, "logkeys_test.go") {
			t.Errorf("line %s names another caller than this test", l)
		}
	}
	if !strings.Contains(lines[1], `"reconcile_id"="r-2"`) {
		t.Errorf("a key passed to the line was not renamed: %s", lines[1])
	}
}

// TestRenameLeavesTheCallersSliceAlone: the caller may reuse its slice.
func TestRenameLeavesTheCallersSliceAlone(t *testing.T) {
	kv := []any{"reconcileID", "x", "a", 1}
	if got := rename(kv); got[0] != "reconcile_id" || kv[0] != "reconcileID" {
		t.Fatalf("rename %v, caller's %v", got, kv)
	}
}

// TestTheManagersZapLoggerNamesTheCaller: with the zap logger the manager
// runs, callers on, a wrapped line names the line that logged it.
func TestTheManagersZapLoggerNamesTheCaller(t *testing.T) {
	var buf strings.Builder
	log := New(zap.New(zap.WriteTo(&buf), zap.JSONEncoder(), zap.RawZapOpts(uberzap.AddCaller())))
	log.WithValues("reconcileID", "r").Info("hello")
	out := buf.String()
	if !strings.Contains(out, `"caller":"logkeys/logkeys_test.go:`) || !strings.Contains(out, `"reconcile_id":"r"`) {
		t.Fatalf("line %s: want this test as the caller and reconcile_id", out)
	}
}
