package scale_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/test/testbin"
)

// settings are the benchmark's knobs, from the environment.
type settings struct {
	clusters       int           // SCALE_CLUSTERS, default 200
	idle           time.Duration // SCALE_IDLE, default 3m
	workers        int           // SCALE_WORKERS: maxConcurrentReconciles; 0 keeps watches.yaml's
	audit          bool          // SCALE_AUDIT=0 turns off the API server's audit log and the split by path
	convergeMax    time.Duration // SCALE_CONVERGE_TIMEOUT, default 10m
	settleQuiet    time.Duration // no reconcile for this long counts as idle
	settleMax      time.Duration // give up waiting for quiet after this long
	logDir, mdPath string        // SCALE_LOGDIR keeps the logs; BENCH_SCALE_OUT names BENCHMARKS.md
}

func loadSettings(b *testing.B) settings {
	b.Helper()
	s := settings{
		clusters: 200, idle: 3 * time.Minute, audit: os.Getenv("SCALE_AUDIT") != "0",
		convergeMax: 10 * time.Minute, settleQuiet: 20 * time.Second, settleMax: time.Minute,
		logDir: os.Getenv("SCALE_LOGDIR"), mdPath: os.Getenv("BENCH_SCALE_OUT"),
	}
	if v := os.Getenv("SCALE_CLUSTERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("SCALE_CLUSTERS=%q: want a positive number", v)
		}
		s.clusters = n
	}
	if v := os.Getenv("SCALE_WORKERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("SCALE_WORKERS=%q: want a positive number", v)
		}
		s.workers = n
	}
	s.idle = envDuration(b, "SCALE_IDLE", s.idle)
	s.convergeMax = envDuration(b, "SCALE_CONVERGE_TIMEOUT", s.convergeMax)
	if s.logDir == "" {
		s.logDir = b.TempDir()
	} else if err := os.MkdirAll(s.logDir, 0o755); err != nil {
		b.Fatal(err)
	}
	return s
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
	op    *operator
	kcm   *process
	audit string // the API server's audit log; "" with SCALE_AUDIT=0
	build time.Duration
}

// BenchmarkIdleAtScale creates many OpenBaoClusters at once against one
// operator and measures how long it takes to apply them all, the
// operator's memory, and what it costs once nothing changes: reconciles
// and API requests per cluster and minute. It is one long run, not a loop:
//
//	make bench-scale
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
		b.Logf("wrote the bench-scale section of %s", h.s.mdPath)
	}
}

// setUp builds the operator and starts the API server, the controller
// manager and the operator, in that order; cleanups stop them in reverse.
func setUp(b *testing.B, s settings) *harness {
	b.Helper()
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
		if h.audit, err = enableAudit(env, s.logDir); err != nil {
			b.Fatal(err)
		}
	}
	startEnvtest(b, env)
	if h.k8s, err = newClient(env.Config); err != nil {
		b.Fatal(err)
	}
	if err := createNamespaces(context.Background(), h.k8s); err != nil {
		b.Fatal(err)
	}
	h.kcm = startControllerManager(b, s.logDir, adminUser(b, env, "kube-controller-manager"))
	opCfg := adminUser(b, env, operatorUser)
	kubeconfig := writeKubeconfig(b, filepath.Join(s.logDir, "operator.kubeconfig"), opCfg)
	watches, workers := benchWatches(b, root, s.logDir, s.workers)
	token, err := metricsReaderToken(context.Background(), h.k8s)
	if err != nil {
		b.Fatal(err)
	}
	h.op = startOperator(b, bin, s.logDir, kubeconfig, watches, token)
	if h.op.workers == 0 {
		h.op.workers = workers
	}
	b.Logf("logs in %s; operator pid %d, kube-controller-manager pid %d", s.logDir, h.op.cmd.Process.Pid, h.kcm.cmd.Process.Pid)
	return h
}

// fatal reports what the operator and the controller manager logged last.
func (h *harness) fatal(b *testing.B, err error) {
	b.Helper()
	b.Logf("kube-controller-manager log tail:\n%s", h.kcm.tail(15))
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
