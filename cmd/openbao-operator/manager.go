package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/operator-framework/operator-lib/proxy"
	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/delegated"
	"github.com/openbao/operator/internal/imagepolicy"
	"github.com/openbao/operator/internal/imageverify"
	"github.com/openbao/operator/internal/logkeys"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/internal/watches"
	"github.com/openbao/operator/internal/webhookcert"
	"github.com/openbao/operator/internal/wrapper"
)

// managerFlags are the command-line settings of the manager.
type managerFlags struct {
	metricsAddr    string
	pprofAddr      string
	metricsSecure  bool
	probeAddr      string
	leaderElection bool
	watchesFile    string
	namespace      string
	image          string
	// wrapperImage is the bao-wrapper image OpenBao pods install PID 1
	// from; see requireWrapperImage.
	wrapperImage string
	// executorImage is image pinned by digest (executorImage), which the
	// backup and restore executor runs unless a cluster names its own.
	executorImage string
	webhook       webhookFlags
	// tenancy: the namespaces are those OpenBaoTenants provisioned, and
	// the informers follow them; watchNamespaces: these, fixed at start.
	// Neither: every namespace (a cluster-wide install).
	tenancy         bool
	watchNamespaces string
	// images is the platform's image policy (--allowed-image-repositories).
	images imagepolicy.Policy
	// platform: the fields' allow-list and the signature policy.
	platform platformFlags
	// maxConcurrentRollouts bounds the clusters that roll at once when the
	// operator itself changed their pod template (an operator upgrade).
	maxConcurrentRollouts int
}

// webhookFlags configure the admission webhook and its certificate.
type webhookFlags struct {
	port                           int
	certDir                        string
	certManaged                    bool
	service, secret, configuration string
}

func parseManagerFlags(args []string) (managerFlags, zap.Options, error) {
	var f managerFlags
	fs := flag.NewFlagSet("openbao-operator", flag.ContinueOnError)
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8443", "address the Prometheus metrics endpoint binds to; \"0\" disables it")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to scrapers whose token may GET /metrics (ClusterRole openbao-operator-metrics-reader); false serves plain HTTP to anyone")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz endpoints bind to")
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "",
		"address Go's profiles (/debug/pprof/) bind to, unauthenticated: a loopback address (127.0.0.1:8082) reached by kubectl port-forward; empty or \"0\" (the default) serves none")
	fs.BoolVar(&f.leaderElection, "leader-elect", false, "elect one active manager among replicas through a Lease")
	fs.StringVar(&f.watchesFile, "watches-file", "", "watches.yaml to use instead of the embedded one")
	fs.StringVar(&f.namespace, "operator-namespace", os.Getenv("OPERATOR_NAMESPACE"), "namespace the operator runs in (its pods may reach OpenBao's API port)")
	fs.StringVar(&f.image, "operator-image", os.Getenv("OPERATOR_IMAGE"), "the operator's image, which the backup and restore executor runs by default (default: read from the operator's own pod, POD_NAME)")
	fs.StringVar(&f.wrapperImage, "wrapper-image", os.Getenv("WRAPPER_IMAGE"),
		"the bao-wrapper image the init container of every OpenBao pod installs PID 1 from (required); versioned apart from the operator, so an operator upgrade restarts no server")
	fs.BoolVar(&f.tenancy, "tenancy", false,
		"manage clusters only in the namespaces OpenBaoTenants provisioned (the least-privilege install: the controller holds no cluster-wide rights on workloads or Secrets)")
	fs.StringVar(&f.watchNamespaces, "watch-namespace", os.Getenv("WATCH_NAMESPACE"),
		"comma-separated namespaces to manage clusters in, fixed at start (OLM's OwnNamespace and SingleNamespace modes); empty: all")
	fs.IntVar(&f.maxConcurrentRollouts, "max-concurrent-rollouts", 1,
		"how many clusters may roll their servers at once when the operator itself changed their pod template (a new --wrapper-image, or a new chart in an operator upgrade); "+
			"a rollout a cluster's spec asks for never waits for this. At least 1")
	fs.IntVar(&f.webhook.port, "webhook-port", 9443, "port of the admission webhook's HTTPS server; 0 runs no webhook")
	fs.StringVar(&f.webhook.certDir, "webhook-cert-dir", filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"),
		"directory of the webhook's tls.crt and tls.key")
	fs.BoolVar(&f.webhook.certManaged, "webhook-cert-managed", true,
		"issue and rotate the webhook's certificate and patch the CA bundle into its configuration; false when OLM provides the certificate")
	fs.StringVar(&f.webhook.service, "webhook-service", "openbao-operator-webhook-service", "the webhook's Service, in --operator-namespace")
	fs.StringVar(&f.webhook.secret, "webhook-cert-secret", "openbao-operator-webhook-cert", "the Secret, in --operator-namespace, holding the webhook's CA and certificate")
	fs.StringVar(&f.webhook.configuration, "webhook-configuration", "openbao-operator-validating-webhook", "the ValidatingWebhookConfiguration whose CA bundle the operator sets")
	// Audit lines of one bootstrap fall within a second; RFC 3339 with
	// nanoseconds keeps their order readable (--zap-time-encoding overrides).
	zapOpts := zap.Options{TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	fs.Func("allowed-image-repositories",
		"comma-separated registry hosts or repository paths (ghcr.io/openbao,registry.corp.example) every image a tenant names must come from: "+
			"spec.image and spec.backup.executorImage; empty (the default, or ALLOWED_IMAGE_REPOSITORIES) allows any",
		func(v string) (err error) { f.images, err = imagepolicy.Parse(v); return err })
	f.platform.bind(fs)
	zapOpts.BindFlags(fs)
	var err error
	if f.images, err = imagepolicy.Parse(os.Getenv("ALLOWED_IMAGE_REPOSITORIES")); err != nil {
		return f, zapOpts, fmt.Errorf("ALLOWED_IMAGE_REPOSITORIES: %w", err)
	}
	if err := fs.Parse(args); err != nil {
		return f, zapOpts, err
	}
	if f.maxConcurrentRollouts < 1 {
		return f, zapOpts, fmt.Errorf("--max-concurrent-rollouts is %d: at least 1 cluster must be able to roll at a time", f.maxConcurrentRollouts)
	}
	return f, zapOpts, nil
}

// heldFields is the allow-list the controller holds every cluster to:
// only without the webhook, which otherwise lets through, besides the
// allow-list, what the author may create themselves.
func (f managerFlags) heldFields() *delegated.Policy {
	if f.webhook.port != 0 {
		return nil
	}
	return &f.platform.fields
}

// watchNamespace returns --watch-namespace's namespaces; nil for all.
func (f managerFlags) watchNamespace() []string {
	var out []string
	for _, ns := range strings.Split(f.watchNamespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// managerSettings are the flags' settings of the manager.
func (f managerFlags) managerSettings() controllers.ManagerSettings {
	return controllers.ManagerSettings{
		Scheme: newScheme(), MetricsAddr: f.metricsAddr, MetricsPlainHTTP: !f.metricsSecure,
		ProbeAddr: f.probeAddr, PprofAddr: f.pprofAddr, LeaderElection: f.leaderElection, Namespace: f.namespace,
		WebhookPort: f.webhook.port, WebhookCertDir: f.webhook.certDir,
		WatchNamespaces: f.watchNamespace(),
	}
}

func runManager(args []string) error {
	f, zapOpts, err := parseManagerFlags(args)
	if err != nil {
		return err
	}
	if f.tenancy && f.watchNamespace() != nil {
		return fmt.Errorf("--tenancy and --watch-namespace exclude each other: tenants decide the namespaces, or the flag does")
	}
	if err := f.requireWrapperImage(); err != nil {
		return err
	}
	ctrl.SetLogger(logkeys.New(zap.New(zap.UseFlagOptions(&zapOpts))))
	applySoftMemoryLimit(ctrl.Log.WithName("setup"))
	settings, err := loadWatches(f.watchesFile)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	openshift, err := isOpenShift(cfg)
	if err != nil {
		return err
	}
	if f.image == "" {
		if f.image, err = ownImage(cfg, f.namespace, os.Getenv("POD_NAME")); err != nil {
			return err
		}
	}
	f.executorImage = executorImage(cfg, f.namespace, os.Getenv("POD_NAME"), f.image)
	managerSettings := f.managerSettings()
	var scope *controllers.TenantScope
	if f.tenancy {
		managerSettings.NewCache, scope = controllers.NewTenancy()
	}
	mgr, err := ctrl.NewManager(cfg, controllers.ManagerOptions(managerSettings))
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	var s controllers.Scope
	if scope != nil {
		scope.Reader = mgr.GetClient()
		if err := scope.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("set up the tenant scope: %w", err)
		}
		s = scope
	}
	reconciler, err := setUpReconcilers(mgr, cfg, f, settings, openshift, s)
	if err != nil {
		return err
	}
	if err := setUpWebhook(mgr, f, reconciler); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}
	ctrl.Log.WithName("setup").Info("starting manager", "openshift", openshift, "namespace", f.namespace, "image", describeImage(f.image, f.executorImage), "wrapperImage", f.wrapperImage)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// requireWrapperImage: --wrapper-image has no fallback. Falling back to
// the operator's own image would tie every OpenBao pod template to the
// operator's version again (an upgrade would restart every server) and
// would need /bao-wrapper in the operator's image; the chart, config/manager
// and the CSV always set it, and `go run` needs --operator-image anyway.
func (f managerFlags) requireWrapperImage() error {
	if f.wrapperImage == "" {
		return fmt.Errorf("set --wrapper-image (or WRAPPER_IMAGE): the bao-wrapper image OpenBao pods install PID 1 from, "+
			"ghcr.io/openbao/bao-wrapper:%s for this operator", wrapper.Version)
	}
	return nil
}

// clusterOperator is what of the operator's settings shapes every cluster's
// chart values. The operator's own image is not among them, so that a new
// operator image changes no OpenBao pod template.
func (f managerFlags) clusterOperator(openshift bool, overrideValues map[string]any) values.Operator {
	return values.Operator{
		Namespace: f.namespace, WrapperImage: f.wrapperImage, OpenShift: openshift, OverrideValues: overrideValues,
	}
}

// isOpenShift reports whether the API serves OpenShift's security API, whose
// restricted SCC assigns pod user and group IDs.
func isOpenShift(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("discovery client: %w", err)
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		return false, fmt.Errorf("list API groups: %w", err)
	}
	for _, g := range groups.Groups {
		if g.Name == "security.openshift.io" {
			return true, nil
		}
	}
	return false, nil
}

// ownImage reads the image of the operator's own manager container, so that
// whatever rewrote it (kustomize, OLM, a mirror) also applies to the
// backup and restore executor's default image.
func ownImage(cfg *rest.Config, namespace, podName string) (string, error) {
	if podName == "" || namespace == "" {
		return "", fmt.Errorf("set --operator-image (or OPERATOR_IMAGE), or run in a pod with POD_NAME and OPERATOR_NAMESPACE")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("clientset: %w", err)
	}
	pod, err := cs.CoreV1().Pods(namespace).Get(context.Background(), podName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read the operator's pod %s/%s for its image: %w", namespace, podName, err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == "manager" {
			return c.Image, nil
		}
	}
	return "", fmt.Errorf("the operator's pod %s/%s has no container named manager", namespace, podName)
}

// setUpReconcilers registers the OpenBaoCluster, OpenBaoBackup and
// OpenBaoRestore reconcilers with the manager; it returns the first, whose
// ways of reaching OpenBao the drain guard shares.
func setUpReconcilers(mgr ctrl.Manager, cfg *rest.Config, f managerFlags, settings watches.Settings, openshift bool, scope controllers.Scope) (*controllers.OpenBaoClusterReconciler, error) {
	issuer, err := controllers.NewIssuerSource(cfg, clock.RealClock{})
	if err != nil {
		return nil, err
	}
	verification, err := f.platform.verification()
	if err != nil {
		return nil, err
	}
	// One verifier, whose cache of verified digests the three share.
	verifier := imageverify.NewCosign(imageverify.DefaultCacheSize, nil)
	reconciler, err := controllers.NewReconciler(mgr, controllers.Options{
		Operator:     f.clusterOperator(openshift, settings.OverrideValues),
		ResyncPeriod: settings.ReconcilePeriod, OpenBao: openbao.New, Issuer: issuer, Scope: scope, ImagePolicy: f.images,
		HeldFields: f.heldFields(), PlatformVerification: verification, ImageVerifier: verifier,
		MaxConcurrentRollouts: f.maxConcurrentRollouts,
	})
	if err != nil {
		return nil, err
	}
	if err := reconciler.SetupWithManager(mgr, settings.MaxConcurrentReconciles); err != nil {
		return nil, fmt.Errorf("set up OpenBaoCluster controller: %w", err)
	}
	backups := &controllers.OpenBaoBackupReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("openbao-operator"),
		Clock: clock.RealClock{}, OperatorImage: f.executorImage, Scope: scope, ProxyEnv: proxy.ReadProxyVarsFromEnv(),
		ImagePolicy: f.images, Operations: reconciler.Operations, PlatformVerification: verification, ImageVerifier: verifier,
	}
	if err := backups.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up OpenBaoBackup controller: %w", err)
	}
	restores := &controllers.OpenBaoRestoreReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("openbao-operator"),
		Clock: clock.RealClock{}, OperatorImage: f.executorImage, Servers: reconciler, Scope: scope, ProxyEnv: proxy.ReadProxyVarsFromEnv(),
		ImagePolicy: f.images, Operations: reconciler.Operations, PlatformVerification: verification, ImageVerifier: verifier,
	}
	if err := restores.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up OpenBaoRestore controller: %w", err)
	}
	return reconciler, nil
}

// setUpWebhook registers the admission webhook and, unless OLM provides
// the certificate, issues it before the webhook server starts (which needs
// the files) and keeps it rotated. The server's readiness is the pod's, so
// the Service sends the API server to replicas that serve.
func setUpWebhook(mgr ctrl.Manager, f managerFlags, r *controllers.OpenBaoClusterReconciler) error {
	if f.webhook.port == 0 {
		return nil
	}
	controllers.SetupWebhooks(mgr, controllers.Platform{Images: f.images, Fields: f.platform.fields})
	// Served always; the chart's webhook.drainGuard.enabled decides whether
	// the API server calls it.
	controllers.SetupEvictionWebhook(mgr, r, controllers.DefaultDrainBound)
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("add webhook ready check: %w", err)
	}
	if !f.webhook.certManaged {
		return nil
	}
	if f.namespace == "" {
		return fmt.Errorf("the webhook certificate needs --operator-namespace (or OPERATOR_NAMESPACE)")
	}
	cert := &controllers.WebhookCert{
		Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Clock: clock.RealClock{},
		Settings:   webhookcert.Settings{Namespace: f.namespace, Service: f.webhook.service},
		SecretName: f.webhook.secret, ConfigurationName: f.webhook.configuration, CertDir: f.webhook.certDir,
	}
	if _, err := cert.Ensure(context.Background()); err != nil {
		return fmt.Errorf("webhook certificate: %w", err)
	}
	if err := mgr.Add(cert); err != nil {
		return fmt.Errorf("add webhook certificate rotation: %w", err)
	}
	return nil
}
