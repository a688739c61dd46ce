package main

import (
	"flag"
	"fmt"
	"os"

	rbacv1 "k8s.io/api/rbac/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/logkeys"
)

// runProvisioner is `openbao-operator provisioner`: the OpenBaoTenant
// reconciler, run as the provisioner's own identity.
func runProvisioner(args []string) error {
	fs := flag.NewFlagSet("openbao-operator provisioner", flag.ContinueOnError)
	namespace := fs.String("operator-namespace", os.Getenv("OPERATOR_NAMESPACE"), "namespace of the operator, whose controller ServiceAccount the tenant RoleBindings name")
	probeAddr := fs.String("health-probe-bind-address", ":8081", "address the /healthz and /readyz endpoints bind to")
	leaderElection := fs.Bool("leader-elect", false, "elect one active provisioner among replicas through a Lease")
	var zapOpts zap.Options
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *namespace == "" {
		return fmt.Errorf("set --operator-namespace (or OPERATOR_NAMESPACE)")
	}
	ctrl.SetLogger(logkeys.New(zap.New(zap.UseFlagOptions(&zapOpts))))
	applySoftMemoryLimit(ctrl.Log.WithName("setup"))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: newScheme(), HealthProbeBindAddress: *probeAddr,
		// It may not watch RoleBindings: it reads the one it names, live.
		Client:         client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&rbacv1.RoleBinding{}}}},
		NewCache:       controllers.WithLongWatches(nil), // as the controller's
		Metrics:        metricsserver.Options{BindAddress: "0"},
		LeaderElection: *leaderElection, LeaderElectionID: "openbao-operator-provisioner.openbao.org",
		LeaderElectionNamespace: *namespace, LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	tenants := &controllers.OpenBaoTenantReconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("openbao-operator-provisioner"), OperatorNamespace: *namespace,
	}
	if err := tenants.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up OpenBaoTenant controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}
	ctrl.Log.WithName("setup").Info("starting provisioner", "namespace", *namespace)
	return mgr.Start(ctrl.SetupSignalHandler())
}
