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
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/openbao/operator/test/localnode"
)

// node is the local node of this run; reg is the registry every release
// is pushed to, 127.0.0.1:<port>, which containerd on this host pulls from.
var (
	node localnode.Config
	reg  string
)

// tier serves the registry, points the node's containerd at it and runs
// the tests (localnode.Tier); TestMain sets its steps, which log through it.
var tier = &localnode.Tier{Name: "release"}

// requireNode skips a test when the run has no node, and fails it under CI.
func requireNode(t testing.TB) { tier.Require(t) }

func logf(format string, args ...any) { tier.Logf(format, args...) }

func TestMain(m *testing.M) {
	tier.Prepare = func(c localnode.Config) (func(), error) {
		node = c
		return startRegistry()
	}
	tier.OnNode = func(c localnode.Config) error { return localnode.TrustRegistry(c, reg) }
	os.Exit(tier.Main(m))
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
