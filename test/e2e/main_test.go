// Package e2e_test is the end-to-end tier: a real single-node Kubernetes
// started by test/localnode once per run and shared by every test; the
// operator runs in it from its own image, installed from the install chart
// (helm-charts/openbao-operator) as a helm release.
//
// The run records the host facts before the node comes up and fails when
// they differ after it is torn down. A node that is already up (`make
// demo`) is reused and left running.
//
// A test that counts the operator's calls to OpenBao exactly stays serial,
// as does the one that kills the operator during bootstraps: a kill inside
// another test's sys/init would change that count. Go runs all serial
// tests before the first parallel one starts. The parallel tests that kill
// the operator (mid-rollout, mid-restore) kill it once their clusters have
// formed, and every parallel test's checks hold across a kill: they read
// every manager's log (operatorLogs, with the kept logs of killed ones),
// find the running manager (managerPod waits for it), and a test reading
// what a restart resets holds kills off meanwhile (holdOperatorKills).
package e2e_test

import (
	"os"
	"testing"

	"github.com/openbao/operator/test/localnode"
)

// node is the shared node of this run.
var node localnode.Config

// tier runs the e2e tests on the node (localnode.Tier).
var tier = &localnode.Tier{Name: "e2e", OnNode: func(c localnode.Config) error { node = c; return nil }}

// requireNode skips a test when the run has no node, and fails it under CI.
func requireNode(t testing.TB) { tier.Require(t) }

func logf(format string, args ...any) { tier.Logf(format, args...) }

func TestMain(m *testing.M) {
	code := tier.Main(m)
	keepGoneLogs(code)
	os.Exit(code)
}
