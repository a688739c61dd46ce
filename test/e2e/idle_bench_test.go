package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/test/auditlog"
	"github.com/openbao/operator/test/localnode"
)

// BenchmarkIdle (make bench-idle): IDLE_BENCH_CLUSTERS (default 10)
// one-server clusters on the local node, each in its own namespace with a
// stdout audit device, formed and settled; then IDLE_BENCH_WINDOW
// (default 30m) in which nothing changes. What the operator asks in the
// window is counted where it arrives: at the API server's audit log (the
// operator's service accounts only; by verb and path) and at each
// server's audit device (every request OpenBao audits: nobody else
// talks to these servers, and OpenBao audits no unauthenticated request
// such as sys/health or sys/leader). Goals (#31): 0 writes, reads of
// OpenBao at most 1 per cluster per resync period. It writes
// BENCHMARKS.md.
func BenchmarkIdle(b *testing.B) {
	cl := installOperator(b)
	ctx := context.Background()
	n := envInt(b, "IDLE_BENCH_CLUSTERS", 10)
	window := envDuration(b, "IDLE_BENCH_WINDOW", 30*time.Minute)
	created := time.Now()
	namespaces := formIdleClusters(ctx, b, cl, n)
	settled := waitNoOperatorWrites(ctx, b, time.Minute, 15*time.Minute)
	uids := serverUIDs(ctx, b, cl, namespaces)
	logf("%d clusters settled %s after formation; idle window of %s from %s", n, settled.Round(time.Second), window,
		time.Now().UTC().Format("15:04:05"))
	from := time.Now()
	time.Sleep(window)
	to := time.Now()
	if now := serverUIDs(ctx, b, cl, namespaces); fmt.Sprint(now) != fmt.Sprint(uids) {
		b.Fatalf("a server pod was replaced in the idle window: %v, then %v", uids, now)
	}
	clusters := operatorRequests(b, aboutClusters, from, to)
	own := operatorRequests(b, func(e auditlog.Event) bool { return !aboutClusters(e) }, from, to)
	bao := openBaoRequests(ctx, b, cl, namespaces, from, to)
	// The same count over the formation proves that the devices write
	// and the lines parse: a window's 0 is then a figure.
	formation := openBaoRequests(ctx, b, cl, namespaces, created, from)
	if len(formation) == 0 {
		b.Fatal("no request audited by OpenBao while the clusters formed: the audit devices do not write, or their lines do not parse")
	}
	logf("OpenBao audited while the clusters formed and settled: %v", formation)
	writeBenchSection(b, "<!-- bench-idle:begin -->", "<!-- bench-idle:end -->", idleSection(idleRun{clusters: n, window: window,
		api: clusters, own: own, bao: bao, at: time.Now().UTC().Format("2006-01-02 15:04 UTC"), provenance: provenance()}))
}

// aboutClusters says whether a request of the operator's is about the
// clusters: anything but what it asks in its own namespace (its leader
// election leases, a cost per operator however many clusters it runs).
func aboutClusters(e auditlog.Event) bool {
	return !strings.Contains(e.RequestURI, "/namespaces/"+localnode.OperatorNamespace+"/")
}

// operatorRequests counts the operator's requests that keep accepts
// between from and to, by verb and path.
func operatorRequests(b *testing.B, keep func(auditlog.Event) bool, from, to time.Time) map[string]float64 {
	c, err := auditlog.Count(node.AuditLogPath(), keep, auditlog.NormalPath, auditlog.Span{From: from, To: to})
	if err != nil {
		b.Fatalf("the API server's audit log: %v", err)
	}
	return c[0]
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a positive duration such as 30m", name, s)
	}
	return d
}

// formIdleClusters creates n one-server clusters "bao", one per namespace,
// with the production sample's stdout audit device, and waits for each to
// run with its voter.
func formIdleClusters(ctx context.Context, b *testing.B, cl client.Client, n int) []string {
	namespaces := make([]string, n)
	for i := range namespaces {
		namespaces[i] = createNamespace(ctx, b, cl, "bench-idle")
		u := clusterObject(b, namespaces[i], "bao", nil)
		spec := u.Object["spec"].(map[string]any)
		spec["replicas"] = int64(1)
		spec["config"] = map[string]any{"audit": []any{map[string]any{
			"type": "file", "path": "stdout", "options": map[string]any{"file_path": "/dev/stdout"}}}}
		if err := cl.Create(ctx, u); err != nil {
			b.Fatalf("create the cluster in %s: %v", namespaces[i], err)
		}
	}
	for _, ns := range namespaces { // they form at once; the waits take turns
		waitRunning(ctx, b, cl, ns, 1)
	}
	return namespaces
}

// waitNoOperatorWrites waits until the API server's audit log shows no
// write of the operator's about the clusters for quiet, and returns how
// long that took.
func waitNoOperatorWrites(ctx context.Context, b *testing.B, quiet, timeout time.Duration) time.Duration {
	start := time.Now()
	waitFor(ctx, b, timeout, fmt.Sprintf("no write of the operator's for %s", quiet), func() (bool, string) {
		now := time.Now()
		writes := map[string]float64{}
		for k, v := range operatorRequests(b, aboutClusters, now.Add(-quiet), now) {
			if auditlog.Writes(k) {
				writes[k] = v
			}
		}
		return time.Since(start) >= quiet && len(writes) == 0, fmt.Sprintf("writes in the last %s: %v", quiet, writes)
	})
	return time.Since(start) - quiet
}

// serverUIDs names each server pod by its UID: the same map before and
// after the window says no server restarted in it.
func serverUIDs(ctx context.Context, b *testing.B, cl client.Client, namespaces []string) map[string]types.UID {
	out := map[string]types.UID{}
	for _, ns := range namespaces {
		for _, p := range serverPods(ctx, b, cl, ns, 1) {
			out[ns+"/"+p.Name] = p.UID
		}
	}
	return out
}

// baoAuditLine is the part of an OpenBao audit entry a count needs.
type baoAuditLine struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Request struct {
		Path      string `json:"path"`
		Operation string `json:"operation"`
	} `json:"request"`
}

// openBaoRequests counts, by operation and path, the requests the servers
// audited in the window (each request once: its "request" entry).
func openBaoRequests(ctx context.Context, b *testing.B, cl client.Client, namespaces []string, from, to time.Time) map[string]int {
	out := map[string]int{}
	cs := clientset(b)
	for _, ns := range namespaces {
		for _, p := range serverPods(ctx, b, cl, ns, 1) {
			sc := bufio.NewScanner(strings.NewReader(podLogs(ctx, b, cs, &p)))
			sc.Buffer(make([]byte, 1<<20), 16<<20)
			for sc.Scan() {
				var l baoAuditLine
				if json.Unmarshal(sc.Bytes(), &l) != nil || l.Type != "request" || l.Time.Before(from) || !l.Time.Before(to) {
					continue
				}
				out[l.Request.Operation+" "+l.Request.Path]++
			}
		}
	}
	return out
}

// idleRun is what one run of BenchmarkIdle counted.
type idleRun struct {
	clusters int
	window   time.Duration
	// api and own are the operator's requests about the clusters and in
	// its own namespace, by verb and path; bao OpenBao's audited
	// requests, by operation and path.
	api, own map[string]float64
	bao      map[string]int
	// at and provenance say when and from what the figures come.
	at, provenance string
}

// idleKind sorts a request of the operator's at the API server: a write
// that stores something; a TokenRequest (a create that signs a token for
// a login to OpenBao and stores nothing); a watch (re-opened by each
// informer when the API server ends it); or a read.
func idleKind(key string) string {
	switch {
	case strings.HasPrefix(key, "create ") && strings.HasSuffix(key, "/token"):
		return "token"
	case auditlog.Writes(key):
		return "write"
	case strings.HasPrefix(key, "watch "):
		return "watch"
	}
	return "read"
}

func idleSection(r idleRun) string {
	perMin := func(v float64) float64 { return v / float64(r.clusters) / r.window.Minutes() }
	perResync := func(v float64) float64 { return v / float64(r.clusters) / (r.window.Minutes() / 10) }
	kinds := map[string]float64{}
	var rows strings.Builder
	for _, k := range slices.Sorted(maps.Keys(r.api)) {
		kinds[idleKind(k)] += r.api[k]
		fmt.Fprintf(&rows, "| API server: %s | %.0f | %.3f |\n", k, r.api[k], perMin(r.api[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(r.own)) {
		fmt.Fprintf(&rows, "| API server, the operator's own namespace: %s | %.0f | (%.1f / min) |\n", k, r.own[k], r.own[k]/r.window.Minutes())
	}
	var baoReads, baoLogins float64
	for _, k := range slices.Sorted(maps.Keys(r.bao)) {
		if strings.HasSuffix(k, "/login") {
			baoLogins += float64(r.bao[k])
		} else {
			baoReads += float64(r.bao[k])
		}
		fmt.Fprintf(&rows, "| OpenBao: %s | %d | %.3f |\n", k, r.bao[k], perMin(float64(r.bao[k])))
	}
	all := kinds["write"] + kinds["token"] + kinds["watch"] + kinds["read"]
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "not met"
	}
	return fmt.Sprintf(`<!-- bench-idle:begin -->
## Idle real clusters (make bench-idle)

%d one-server clusters on the local node, each in its own namespace (handed over by an OpenBaoTenant, so
the operator watches each kind in each namespace) with a stdout audit device, formed, then settled (no
write of the operator's for 1 min); then %s in which nothing changes and no server restarts, with the
install's resync period (10 min, watches.yaml). Counted where the requests arrive: the API server's
audit log (the operator's service accounts only) and each server's audit device (OpenBao audits every
authenticated request; it does not audit unauthenticated ones such as sys/health and sys/leader, which
the operator's reads of Raft progress use). The operator's requests in its own namespace (leader
election: a cost per operator, not per cluster) are listed apart and left out of the per-cluster
figures. A TokenRequest signs a ServiceAccount token for a login to OpenBao and stores nothing; a watch
is counted each time an informer opens it again: the API server ends each watch after the time it asked
for (the operator's cache asks for 30 to 60 min since commit d523685; client-go's default is 5 to 10 min).

Measured %s, %s.

| figure | measured | goal | |
|---|---|---|---|
| API writes that store something | %.0f | 0 | %s |
| API requests / cluster / min: all | %.3f | ≤ 1 | %s |
| of which reads (get, list) / watches re-opened / TokenRequests | %.3f / %.3f / %.3f | | |
| OpenBao reads / cluster / resync period | %.2f | ≤ 1 | %s |
| OpenBao logins / cluster / resync period | %.2f | | |

| request | in the window | per cluster / min |
|---|---|---|
%s<!-- bench-idle:end -->
`, r.clusters, r.window, r.at, r.provenance,
		kinds["write"], verdict(kinds["write"] == 0), perMin(all), verdict(perMin(all) <= 1),
		perMin(kinds["read"]), perMin(kinds["watch"]), perMin(kinds["token"]),
		perResync(baoReads), verdict(perResync(baoReads) <= 1), perResync(baoLogins), rows.String())
}

// provenance says where figures come from: the CPUs and the commit.
func provenance() string {
	out, _ := exec.Command("git", "-C", node.RepoRoot, "describe", "--always", "--dirty").Output()
	return fmt.Sprintf("%d CPUs, commit %s", runtime.NumCPU(), strings.TrimSpace(string(out)))
}
