// Command openbao-operator runs the OpenBao operator's controller manager.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// managerFlags are the command-line settings of the manager.
type managerFlags struct {
	metricsAddr    string
	probeAddr      string
	leaderElection bool
	leaderElectNS  string
}

func main() {
	var f managerFlags
	flag.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "address the Prometheus metrics endpoint binds to; \"0\" disables it")
	flag.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz endpoints bind to")
	flag.BoolVar(&f.leaderElection, "leader-elect", false, "elect one active manager among replicas through a Lease")
	flag.StringVar(&f.leaderElectNS, "leader-election-namespace", "", "namespace of the leader Lease (default: the pod's namespace)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := runManager(f); err != nil {
		fmt.Fprintf(os.Stderr, "openbao-operator: %v\n", err)
		os.Exit(1)
	}
}

func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	return scheme
}

func runManager(f managerFlags) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  newScheme(),
		Metrics:                 metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress:  f.probeAddr,
		LeaderElection:          f.leaderElection,
		LeaderElectionID:        "openbao-operator.openbao.org",
		LeaderElectionNamespace: f.leaderElectNS,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}
	ctrl.Log.WithName("setup").Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}
