// Package release_test is the release tier: it releases the operator as
// `make release` does (internal/release) into an OCI registry on loopback,
// which the local node pulls from (containerd pointed at it by a
// hosts.toml; nothing is imported), installs it by Helm from the OCI chart
// named by digest, forms a cluster, checks the signatures and the SBOM,
// then upgrades the operator to a second release and checks that no
// OpenBao server restarted.
//
// As the e2e tier: a node that is already up is reused and left running;
// otherwise the run starts its own (owner "release") and tears it down,
// and fails if the host facts differ afterwards. Without root every test
// skips, and under CI=true it fails.
package release_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/registry"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openbao/operator/test/localnode"
)

// node is the local node of this run; reg is the registry every release
// is pushed to, 127.0.0.1:<port>, which containerd on this host pulls from.
var (
	node localnode.Config
	reg  string
)

// noNode says why this run has no node; every test then skips through
// requireNode (fails under CI).
var noNode string

func requireNode(t testing.TB) {
	t.Helper()
	if noNode == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("the release tier cannot run under CI: %s", noNode)
	}
	t.Skipf("SKIP: %s", noNode)
}

func logf(format string, args ...any) { fmt.Printf("release: "+format+"\n", args...) }

func TestMain(m *testing.M) {
	crlog.SetLogger(logr.Discard())
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		noNode = "the local node needs root: run the release tier as root"
		logf("%s; every test skips", noNode)
		return m.Run()
	}
	var err error
	if node, err = localnode.DefaultConfig(); err != nil {
		logf("%v", err)
		return 1
	}
	stop, err := startRegistry()
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer stop()
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
		return trustAndRun(m)
	}
	return runOnOwnNode(m)
}

// startRegistry serves go-containerregistry's registry (in memory, with
// the referrers API that cosign's bundles use) on a free loopback port.
func startRegistry() (stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the registry: %w", err)
	}
	srv := &http.Server{
		Handler:           registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logf("registry stopped: %v", err)
		}
	}()
	reg = ln.Addr().String()
	logf("registry on %s", reg)
	return func() { _ = srv.Close() }, nil
}

// trustAndRun points containerd at the registry, then runs the tests.
func trustAndRun(m *testing.M) int {
	if err := localnode.TrustRegistry(node, reg); err != nil {
		logf("%v", err)
		return 1
	}
	return m.Run()
}

// runOnOwnNode brings the node up, runs the tests, tears the node down and
// compares the host facts.
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
	start := time.Now()
	t, err := localnode.Up(context.Background(), node, "release", logf)
	code := 1
	if err != nil {
		logf("node did not come up: %v", err)
	} else {
		logf("node up in %s (control plane %s, node Ready %s, DNS %s)", t.Total, t.ControlPlane, t.NodeReady, t.DNSReady)
		code = trustAndRun(m)
	}
	if code != 0 {
		localnode.KeepLogs(node, logf)
	}
	logf("tests done %s after start", time.Since(start).Round(time.Millisecond))
	if err := localnode.TearDown(context.Background(), node, before, logf); err != nil {
		logf("%v", err)
		return 1
	}
	return code
}
