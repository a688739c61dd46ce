// Package scale_test measures one operator against many OpenBaoClusters:
// envtest's real kube-apiserver and etcd, the real kube-controller-manager
// (StatefulSet and garbage-collector controllers) and the operator binary
// itself, each a subprocess, so that the operator's memory and its API
// traffic are its own and nothing of the harness is counted.
//
//	make bench-scale
//	make bench-scale-tenancy   # SCALE_MODE=tenancy: the tenancy install
//	SCALE_CLUSTERS=50 SCALE_IDLE=1m go test -run '^$' -bench IdleAtScale -benchtime 1x -timeout 90m -v ./test/scale
package scale_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestMain starts nothing itself: every process belongs to the benchmark,
// so `go test ./test/...` (no -bench) costs nothing here. It says so,
// because a silent "ok" would read as a benchmark that passed.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		fmt.Fprintln(os.Stderr, "test/scale: no benchmark selected; run `make bench-scale` to measure")
	}
	// envtest logs through controller-runtime: warnings and errors only.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.WarnLevel)))
	os.Exit(m.Run())
}
