package localnode

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
)

// Tier is a test tier that runs on the local node: e2e, olm, release. Its
// Main reuses a node that is up (and leaves it running) or brings up its
// own and tears it down, also on SIGINT/SIGTERM, failing the run if the
// host facts differ afterwards. Without root no node runs, and every test
// skips through Require, or fails under CI (CI=true), where a tier that
// cannot run must not look like one that passed.
type Tier struct {
	// Name prefixes the tier's log lines and owns the node it brings up.
	Name string
	// Prepare runs once the node's config is read, before the node lock
	// (tool checks, a registry the tier serves); its stop, if any, runs
	// when the tier ends.
	Prepare func(c Config) (stop func(), err error)
	// OnNode runs on the node, its own or a reused one, before the tests.
	OnNode func(c Config) error

	noNode string
}

// Logf prints a line of the tier's log.
func (t *Tier) Logf(format string, args ...any) { fmt.Printf(t.Name+": "+format+"\n", args...) }

// Require skips a test when the run has no node, and fails it under CI.
func (t *Tier) Require(tb testing.TB) {
	tb.Helper()
	if t.noNode == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("the %s tier cannot run under CI: %s", t.Name, t.noNode)
	}
	tb.Skipf("SKIP: %s", t.noNode)
}

// Main runs the tier's tests and returns the exit code.
func (t *Tier) Main(m *testing.M) int {
	crlog.SetLogger(logr.Discard())
	if os.Geteuid() != 0 {
		t.noNode = "the local node needs root: run the " + t.Name + " tier as root"
		t.Logf("%s; every test skips", t.noNode)
		return m.Run()
	}
	c, err := DefaultConfig()
	if err != nil {
		t.Logf("%v", err)
		return 1
	}
	if t.Prepare != nil {
		stop, err := t.Prepare(c)
		if err != nil {
			t.Logf("%v", err)
			return 1
		}
		if stop != nil {
			defer stop()
		}
	}
	// The lock serializes runs from other checkouts on this machine; the
	// kernel releases it when this process exits, however it exits.
	unlock, err := Lock(c, t.Logf)
	if err != nil {
		t.Logf("%v", err)
		return 1
	}
	defer unlock()
	if _, up, err := Status(c); err != nil {
		t.Logf("%v", err)
		return 1
	} else if up {
		t.Logf("reusing the node that is already up in %s; it is left running", c.StateDir)
		return t.runTests(m, c)
	}
	return t.onOwnNode(m, c)
}

func (t *Tier) runTests(m *testing.M, c Config) int {
	if t.OnNode != nil {
		if err := t.OnNode(c); err != nil {
			t.Logf("%v", err)
			return 1
		}
	}
	return m.Run()
}

// onOwnNode brings the node up, runs the tests and tears the node down.
func (t *Tier) onOwnNode(m *testing.M, c Config) int {
	if err := EnsurePackages(t.Logf); err != nil {
		t.Logf("%v", err)
		return 1
	}
	before, err := SnapshotFacts(c)
	if err != nil {
		t.Logf("%v", err)
		return 1
	}
	var once sync.Once
	teardown := func() (code int) {
		once.Do(func() {
			if err := TearDown(context.Background(), c, before, t.Logf); err != nil {
				t.Logf("%v", err)
				code = 1
			}
		})
		return code
	}
	stopSignals := t.onSignal(func() { teardown(); os.Exit(1) })
	defer stopSignals()
	start := time.Now()
	code := 1
	if up, err := Up(context.Background(), c, t.Name, t.Logf); err != nil {
		t.Logf("node did not come up: %v", err)
	} else {
		t.Logf("node up in %s (control plane %s, node Ready %s, DNS %s)", up.Total, up.ControlPlane, up.NodeReady, up.DNSReady)
		code = t.runTests(m, c)
	}
	if code != 0 {
		KeepLogs(c, t.Logf)
	}
	t.Logf("tests done %s after start", time.Since(start).Round(time.Millisecond))
	if tc := teardown(); tc != 0 {
		return tc
	}
	return code
}

// onSignal runs f on SIGINT or SIGTERM until the returned stop is called.
func (t *Tier) onSignal(f func()) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			t.Logf("interrupted: tearing the node down")
			f()
		case <-done:
		}
	}()
	return func() { signal.Stop(sigs); close(done) }
}
