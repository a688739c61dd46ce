package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/openbao/operator/test/localnode"
)

// demo brings the node up, installs the operator and, once the
// OpenBaoCluster API and its sample exist, a 3-replica cluster; it leaves
// everything running and prints how to use it.
func demo(ctx context.Context, c localnode.Config) error {
	start := time.Now()
	if err := up(ctx, c, "demo"); err != nil {
		return err
	}
	t, err := localnode.InstallOperator(ctx, c, logf)
	if err != nil {
		return fmt.Errorf("install operator (node left running; `make demo-down` removes it): %w", err)
	}
	logf("operator image built in %s, imported in %s, Ready %s after apply",
		r(t.Build), r(t.Import), r(t.Ready))
	sample := filepath.Join(c.RepoRoot, "config", "samples")
	_, statErr := os.Stat(sample)
	clusterReady := false
	if statErr == nil {
		logf("config/samples exists, but applying the OpenBaoCluster sample arrives with the bootstrap issue")
	} else if !errors.Is(statErr, os.ErrNotExist) {
		return fmt.Errorf("check %s: %w", sample, statErr)
	}
	logf("demo ready in %s", r(time.Since(start)))
	printUsage(c, clusterReady)
	return nil
}

func printUsage(c localnode.Config, clusterReady bool) {
	fmt.Printf(`
The local node is running with the operator installed; it stays up until `+"`make demo-down`"+`.

  export KUBECONFIG=%s
  ./bin/kubectl get nodes
  ./bin/kubectl -n %s get deployment,pods
  ./bin/kubectl get openbaoclusters -A
`, c.Kubeconfig(), localnode.OperatorNamespace)
	if !clusterReady {
		fmt.Print(`
Not done yet: the 3-replica OpenBao cluster in namespace openbao-demo.
The OpenBaoCluster API, its sample (config/samples) and the bootstrap
(initialization, root token Secret) arrive with the bootstrap issue; until
then the demo stops after the operator is Ready. Once it lands, the active
OpenBao Service is reachable from this host on its ClusterIP (kube-proxy's
rules apply to the host too), and the root token is in a Secret in
openbao-demo named by the cluster's status.
`)
	}
	fmt.Println("\nTear down: make demo-down")
}
