// Package e2e_test is the end-to-end tier: a real single-node Kubernetes
// started by test/localnode once per run and shared by every test; the
// operator runs in it from its own image, installed from the install chart
// (helm-charts/openbao-operator) as a helm release.
//
// The run records the host facts before the node comes up and fails when
// they differ after it is torn down. A node that is already up (`make
// demo`) is reused and left running.
//
// A test that kills the operator (killManager) stays serial, as does one
// that counts the operator's calls to OpenBao exactly; every other test
// calls t.Parallel. Go runs all serial tests before the first parallel one
// starts, so no kill lands while a parallel test needs the one manager pod,
// its log (audit lines), its metrics or a bootstrap it would cut.
package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openbao/operator/test/localnode"
)

// node is the shared node of this run.
var node localnode.Config

// noNode says why this run has no local node; every test and benchmark
// then skips through requireNode, so that `go test` reports what did not
// run instead of an ok for tests that never started.
var noNode string

// requireNode skips a test when the run has no node, and fails it under CI
// (CI=true), where a tier that cannot run must not look like one that
// passed.
func requireNode(t testing.TB) {
	t.Helper()
	if noNode == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("the e2e tier cannot run under CI: %s", noNode)
	}
	t.Skipf("SKIP: %s", noNode)
}

func logf(format string, args ...any) { fmt.Printf("e2e: "+format+"\n", args...) }

func TestMain(m *testing.M) {
	crlog.SetLogger(logr.Discard())
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		noNode = "the local node needs root: run the e2e tier as root"
		logf("%s; every test skips", noNode)
		return m.Run()
	}
	var err error
	if node, err = localnode.DefaultConfig(); err != nil {
		logf("%v", err)
		return 1
	}
	// The lock serializes runs from other checkouts on this machine; the
	// kernel releases it when this process exits, however it exits.
	unlock, err := localnode.Lock(node, logf)
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer unlock()
	if _, up, err := localnode.Status(node); err != nil {
		logf("%v", err)
		return 1
	} else if up {
		logf("reusing the node that is already up in %s; it is left running", node.StateDir)
		return m.Run()
	}
	return runOnOwnNode(m)
}

// runOnOwnNode brings the node up, runs the tests, tears the node down
// (also on SIGINT/SIGTERM) and compares the host facts.
func runOnOwnNode(m *testing.M) int {
	if err := localnode.EnsurePackages(logf); err != nil {
		logf("%v", err)
		return 1
	}
	before, err := localnode.SnapshotFacts(node)
	if err != nil {
		logf("%v", err)
		return 1
	}
	var once sync.Once
	teardown := func() int {
		code := 0
		once.Do(func() { code = tearDown(before) })
		return code
	}
	stopSignals := onSignal(func() { teardown(); os.Exit(1) })
	defer stopSignals()
	start := time.Now()
	t, err := localnode.Up(context.Background(), node, "e2e", logf)
	if err != nil {
		logf("node did not come up: %v", err)
		localnode.KeepLogs(node, logf)
		teardown()
		return 1
	}
	logf("node up in %s (control plane %s, node Ready %s, DNS %s)", t.Total, t.ControlPlane, t.NodeReady, t.DNSReady)
	code := m.Run()
	if code != 0 {
		localnode.KeepLogs(node, logf)
	}
	logf("tests done %s after start", time.Since(start).Round(time.Millisecond))
	if tc := teardown(); tc != 0 {
		return tc
	}
	return code
}

// tearDown stops the node and fails the run if the host is not as before.
func tearDown(before localnode.Facts) int {
	if err := localnode.TearDown(context.Background(), node, before, logf); err != nil {
		logf("%v", err)
		return 1
	}
	return 0
}

func onSignal(f func()) func() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			logf("interrupted: tearing the node down")
			f()
		case <-done:
		}
	}()
	return func() { signal.Stop(sigs); close(done) }
}
