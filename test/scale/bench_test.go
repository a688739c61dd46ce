package scale_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/tenancy"
	"github.com/openbao/operator/test/testbin"
)

// settings are the benchmark's knobs, from the environment.
type settings struct {
	mode           string        // SCALE_MODE: modeClusterWide (default) or modeTenancy
	clusters       int           // SCALE_CLUSTERS, default 200 (tenancy: 1000)
	namespaces     int           // SCALE_NAMESPACES, default 20 (tenancy: 500)
	idle           time.Duration // SCALE_IDLE, default 3m
	workers        int           // SCALE_WORKERS: maxConcurrentReconciles; 0 keeps watches.yaml's
	audit          bool          // SCALE_AUDIT=0 turns off the API server's audit log and the split by path
	convergeMax    time.Duration // SCALE_CONVERGE_TIMEOUT, default 10m (tenancy: 30m)
	settleQuiet    time.Duration // no update, patch or delete by the operator for this long counts as idle
	settleMax      time.Duration // give up waiting for quiet after this long
	logDir, mdPath string        // SCALE_LOGDIR keeps the logs; BENCH_SCALE_OUT names BENCHMARKS.md
}

// The two installs the benchmark runs: the cluster-wide one (one watch per
// kind) and the tenancy one (internal/nscache: one watch per kind in each
// namespace an OpenBaoTenant provisioned).
const (
	modeClusterWide = "cluster-wide"
	modeTenancy     = "tenancy"
)

func loadSettings(b *testing.B) settings {
	b.Helper()
	s := settings{
		mode: modeClusterWide, clusters: 200, namespaces: 20, idle: 3 * time.Minute, audit: os.Getenv("SCALE_AUDIT") != "0",
		convergeMax: 10 * time.Minute, settleQuiet: 20 * time.Second, settleMax: time.Minute,
		logDir: os.Getenv("SCALE_LOGDIR"), mdPath: os.Getenv("BENCH_SCALE_OUT"),
	}
	switch v := os.Getenv("SCALE_MODE"); v {
	case "", modeClusterWide:
	case modeTenancy:
		// The idle window outlasts a reflector's watch timeout (5 to 10
		// min), so that it holds the re-watches of thousands of watches.
		// kube-controller-manager creates the thousand clusters' pods at
		// its own client's pace, minutes after the StatefulSets.
		s.mode, s.clusters, s.namespaces, s.idle, s.convergeMax = modeTenancy, 1000, 500, 12*time.Minute, 30*time.Minute
		s.settleMax = 5 * time.Minute
	default:
		b.Fatalf("SCALE_MODE=%q: want %s or %s", v, modeClusterWide, modeTenancy)
	}
	s.clusters = envCount(b, "SCALE_CLUSTERS", s.clusters)
	s.namespaces = envCount(b, "SCALE_NAMESPACES", s.namespaces)
	s.workers = envCount(b, "SCALE_WORKERS", 0)
	s.idle = envDuration(b, "SCALE_IDLE", s.idle)
	s.convergeMax = envDuration(b, "SCALE_CONVERGE_TIMEOUT", s.convergeMax)
	if s.logDir == "" {
		s.logDir = b.TempDir()
	} else if err := os.MkdirAll(s.logDir, 0o755); err != nil {
		b.Fatal(err)
	}
	return s
}

// envCount reads a positive number; def when unset.
func envCount(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a duration such as 3m", name, v)
	}
	return d
}

// harness is everything running for one benchmark.
type harness struct {
	s     settings
	k8s   client.Client
	api   *apiServer
	op    *operator
	kcm   *process
	prov  *process // the tenancy install's provisioner; nil cluster-wide
	audit string   // the API server's audit log; "" with SCALE_AUDIT=0
	build time.Duration
	// watchesBefore are the watches open on the API server before the
	// operator started (the controller manager's, the provisioner's).
	watchesBefore   map[string]float64
	apiserverBefore float64 // kube-apiserver's VmRSS then
}

// BenchmarkIdleAtScale creates many OpenBaoClusters at once against one
// operator and measures how long it takes to apply them all, the
// operator's memory, and what it costs once nothing changes: reconciles
// and API requests per cluster and minute. It is one long run, not a loop:
//
//	make bench-scale           # the cluster-wide install
//	make bench-scale-tenancy   # the tenancy install, a tenant per namespace
func BenchmarkIdleAtScale(b *testing.B) {
	if b.N > 1 {
		b.Skip("one run is the measurement: use -benchtime 1x")
	}
	began := time.Now()
	h := setUp(b, loadSettings(b))
	r := h.run(b)
	r.total = time.Since(began)
	r.print(os.Stdout)
	r.report(b)
	if h.s.mdPath != "" {
		if err := writeMarkdown(h.s.mdPath, r); err != nil {
			b.Fatalf("write %s: %v", h.s.mdPath, err)
		}
		b.Logf("wrote the %s section of %s", sectionOf(h.s.mode), h.s.mdPath)
	}
}

// setUp builds the operator and starts the API server, the controller
// manager, in the tenancy mode the provisioner, and the operator, in that
// order; cleanups stop them in reverse.
func setUp(b *testing.B, s settings) *harness {
	b.Helper()
	ctx := context.Background()
	root, err := testbin.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	h := &harness{s: s}
	t0 := time.Now()
	bin := buildOperator(b, root, s.logDir)
	h.build = time.Since(t0)
	env := newEnvtest(root)
	if s.audit {
		if h.audit, err = enableAudit(env, s.logDir, operatorUserOf(s.mode), provisionerUser); err != nil {
			b.Fatal(err)
		}
	}
	// envtest's default Service range, a /24, holds fewer ClusterIPs than
	// a thousand clusters ask for; the allocator then refuses the rest.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	startEnvtest(b, env)
	if h.k8s, err = newClient(env.Config); err != nil {
		b.Fatal(err)
	}
	if h.api, err = newAPIServer(env.Config); err != nil {
		b.Fatal(err)
	}
	if err := createNamespaces(ctx, h.k8s, s.namespaces); err != nil {
		b.Fatal(err)
	}
	h.kcm = startControllerManager(b, s.logDir, adminUser(b, env, "kube-controller-manager"))
	opCfg, opArgs := h.identities(b, env, root, bin)
	kubeconfig := writeKubeconfig(b, filepath.Join(s.logDir, "operator.kubeconfig"), opCfg)
	watches, workers := benchWatches(b, root, s.logDir, s.workers)
	token, err := metricsReaderToken(ctx, h.k8s)
	if err != nil {
		b.Fatal(err)
	}
	if h.watchesBefore, err = h.api.watches(ctx); err != nil {
		b.Fatal(err)
	}
	h.apiserverBefore = childRSS("kube-apiserver")
	h.op = startOperator(b, bin, s.logDir, kubeconfig, watches, token, append(webhookArgs(env), opArgs...)...)
	if h.op.workers == 0 {
		h.op.workers = workers
	}
	b.Logf("logs in %s; operator pid %d, kube-controller-manager pid %d", s.logDir, h.op.cmd.Process.Pid, h.kcm.cmd.Process.Pid)
	return h
}

// identities returns whom the operator runs as, and its extra flags. The
// cluster-wide install's operator is a cluster admin; the tenancy
// install's is the controller's ServiceAccount with config/tenancy's
// rights and --tenancy, and the provisioner runs beside it.
func (h *harness) identities(b *testing.B, env *envtest.Environment, root, bin string) (*rest.Config, []string) {
	b.Helper()
	if h.s.mode != modeTenancy {
		return adminUser(b, env, operatorUser), nil
	}
	if err := installTenancy(context.Background(), h.k8s, root); err != nil {
		b.Fatal(err)
	}
	h.prov = startProvisioner(b, bin, h.s.logDir, serviceAccountUser(b, env, tenancy.ProvisionerServiceAccount))
	return serviceAccountUser(b, env, tenancy.ControllerServiceAccount), []string{"--tenancy"}
}

// fatal reports what the operator and the controller manager logged last.
func (h *harness) fatal(b *testing.B, err error) {
	b.Helper()
	b.Logf("kube-controller-manager log tail:\n%s", h.kcm.tail(15))
	if h.prov != nil {
		b.Logf("provisioner log tail (%s):\n%s", h.prov.log, h.prov.tail(20))
	}
	b.Logf("operator log tail (%s):\n%s", h.op.log, h.op.tail(60))
	b.Fatal(err)
}

// describeStragglers names a few clusters that are not applied and why.
func (h *harness) describeStragglers(b *testing.B, cv *convergence) {
	list := &v1alpha1.OpenBaoClusterList{}
	if err := h.k8s.List(context.Background(), list); err != nil {
		b.Logf("list clusters: %v", err)
		return
	}
	shown := 0
	for i := range list.Items {
		c := &list.Items[i]
		if _, ok := cv.at[c.Namespace+"/"+c.Name]; ok || shown >= 5 {
			continue
		}
		shown++
		cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionDegraded)
		b.Logf("not applied: %s/%s generation %d observed %d, Degraded %+v", c.Namespace, c.Name,
			c.Generation, c.Status.ObservedGeneration, cond)
	}
}
