package controllers

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/openbao/operator/internal/bootstrap"
)

// ManagerSettings are what the operator's flags set on its manager.
type ManagerSettings struct {
	Scheme      *runtime.Scheme
	MetricsAddr string
	// MetricsPlainHTTP serves metrics without TLS or authentication; the
	// zero value is the authenticated HTTPS endpoint.
	MetricsPlainHTTP bool
	ProbeAddr        string
	// PprofAddr serves net/http/pprof; "" or "0": not served.
	PprofAddr      string
	LeaderElection bool
	Namespace      string // the operator's own, for the leader lease
	// WebhookPort and WebhookCertDir configure the admission webhook's
	// server; it runs only once webhooks are registered (SetupWebhooks).
	WebhookPort    int
	WebhookCertDir string
	// WatchNamespaces, when set, are the only namespaces the manager's
	// cache serves (a namespaced install).
	WatchNamespaces []string
	// NewCache, when set, builds the manager's cache (a tenancy install's
	// nscache); it gets CacheOptions.
	NewCache cache.NewCacheFunc
}

func cacheOptions(namespaces []string) cache.Options {
	opts := CacheOptions()
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// ManagerOptions builds the manager's options as the operator runs them.
// The envtest suite builds its manager from the same function, so that it
// sees the same cache (only labelled objects) the production operator sees.
func ManagerOptions(s ManagerSettings) ctrl.Options {
	return ctrl.Options{
		Scheme:                  s.Scheme,
		Metrics:                 MetricsServerOptions(s.MetricsAddr, s.MetricsPlainHTTP),
		HealthProbeBindAddress:  s.ProbeAddr,
		PprofBindAddress:        s.PprofAddr,
		LeaderElection:          s.LeaderElection,
		LeaderElectionID:        "openbao-operator.openbao.org",
		LeaderElectionNamespace: s.Namespace,
		// The manager exits right after its context ends, so it may hand
		// the lease over at once instead of making a successor wait for
		// its expiry.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOptions(s.WatchNamespaces),
		NewCache:                      WithLongWatches(s.NewCache),
		WebhookServer:                 webhook.NewServer(webhook.Options{Port: s.WebhookPort, CertDir: s.WebhookCertDir}),
		// A pass inside sys/init finishes storing the token before the
		// manager exits; the Deployment's terminationGracePeriodSeconds
		// (50) leaves room for this.
		GracefulShutdownTimeout: ptr.To(bootstrap.CriticalDeadline + 5*time.Second),
	}
}
