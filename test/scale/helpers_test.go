package scale_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/test/auditlog"
)

// The harness's own pure parts are tested here; they run in `go test`
// without starting anything.

func TestNormalPath(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/scale-03/secrets/bao-003-tls-ca":                            "/api/v1/namespaces/{ns}/secrets/{cluster}-tls-ca",
		"/api/v1/namespaces/scale-499/pods/bao-0999-0":                                  "/api/v1/namespaces/{ns}/pods/{cluster}-0",
		"/api/v1/namespaces/scale-03/pods":                                              "/api/v1/namespaces/{ns}/pods",
		"/api/v1/pods":                                                                  "/api/v1/pods",
		"/apis/openbao.org/v1alpha1/namespaces/scale-01/openbaoclusters/bao-021/status": "/apis/openbao.org/v1alpha1/namespaces/{ns}/openbaoclusters/{cluster}/status",
		"/api/v1/namespaces/openbao-operator-system/pods/manager-1":                     "/api/v1/namespaces/{ns}/pods/{name}",
		"/api/v1/namespaces/scale-01":                                                   "/api/v1/namespaces/{name}",
		"/apis/monitoring.coreos.com/v1":                                                "/apis/monitoring.coreos.com/v1",
		"/apis":                                                                         "/apis",
	} {
		if got := normalPath(path); got != want {
			t.Errorf("normalPath(%s) = %q, want %q", path, got, want)
		}
	}
}

// TestCountAudit: a watch counts once, when its response starts; other
// users and other stages are left out, and so are the reviews the metrics
// endpoint asks about the benchmark's scrapes; the span bounds are [from, to).
func TestCountAudit(t *testing.T) {
	event := func(stage, verb, uri, user string, at int) string {
		return fmt.Sprintf(`{"stage":%q,"verb":%q,"requestURI":%q,"user":{"username":%q},"requestReceivedTimestamp":%q}`,
			stage, verb, uri, user, time.Unix(int64(at), 0).UTC().Format(time.RFC3339Nano))
	}
	lines := []string{
		event("ResponseComplete", "get", "/api/v1/namespaces/scale-01/secrets/bao-001-root-token", operatorUser, 10),
		event("ResponseComplete", "get", "/api/v1/namespaces/scale-02/secrets/bao-002-root-token", operatorUser, 11),
		event("ResponseStarted", "watch", "/api/v1/pods?watch=true", operatorUser, 12),
		event("ResponseComplete", "watch", "/api/v1/pods?watch=true", operatorUser, 12),
		event("ResponseComplete", "get", "/api/v1/namespaces/scale-01/pods/bao-001-0", "someone-else", 13),
		event("ResponseComplete", "create", "/apis/authentication.k8s.io/v1/tokenreviews", operatorUser, 14),
		event("ResponseComplete", "create", "/apis/authorization.k8s.io/v1/subjectaccessreviews", operatorUser, 14),
		event("ResponseComplete", "list", "/api/v1/namespaces/scale-01/secrets?labelSelector=x", operatorUser, 20),
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	counts, err := countAudit(path, operatorUser, auditlog.Span{From: time.Unix(10, 0), To: time.Unix(20, 0)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"get /api/v1/namespaces/{ns}/secrets/{cluster}-root-token": 2, "watch /api/v1/pods": 1}
	if fmt.Sprint(counts[0]) != fmt.Sprint(want) {
		t.Errorf("counts = %v, want %v", counts[0], want)
	}
}

// TestOpenWatches: a watch is open from its ResponseStarted to its
// ResponseComplete; a watch closed and watched again counts once; other
// users' watches and other verbs do not count.
func TestOpenWatches(t *testing.T) {
	event := func(stage, verb, uri, user string, at int) string {
		ts := time.Unix(int64(at), 0).UTC().Format(time.RFC3339Nano)
		return fmt.Sprintf(`{"stage":%q,"verb":%q,"requestURI":%q,"user":{"username":%q},"requestReceivedTimestamp":%q,"stageTimestamp":%q}`,
			stage, verb, uri, user, ts, ts)
	}
	secrets := "/api/v1/namespaces/scale-001/secrets?watch=true"
	lines := []string{
		event("ResponseStarted", "watch", secrets, controllerUser, 10),
		event("ResponseStarted", "watch", "/api/v1/namespaces/scale-002/secrets?watch=true", controllerUser, 10),
		event("ResponseStarted", "watch", "/api/v1/namespaces/scale-001/pods?watch=true", controllerUser, 10),
		event("ResponseComplete", "watch", secrets, controllerUser, 20), // timed out, and watched again:
		event("ResponseStarted", "watch", secrets, controllerUser, 21),
		event("ResponseComplete", "watch", "/api/v1/namespaces/scale-001/pods?watch=true", controllerUser, 40), // after the instant
		event("ResponseStarted", "watch", secrets, provisionerUser, 10),
		event("ResponseComplete", "list", "/api/v1/namespaces/scale-001/secrets", controllerUser, 10),
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := openWatches(path, controllerUser, time.Unix(30, 0))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"/api/v1/namespaces/{ns}/secrets": 2, "/api/v1/namespaces/{ns}/pods": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("open watches = %v, want %v", got, want)
	}
}

// TestWriteMarkdownKeepsOtherSections: each mode rewrites its own section
// only, the cluster-wide one and the tenancy one side by side.
func TestWriteMarkdownKeepsOtherSections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	other := "# Benchmarks\n\n<!-- other:begin -->\nkeep me\n<!-- other:end -->\n"
	if err := os.WriteFile(path, []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{modeClusterWide, modeTenancy, modeClusterWide, modeTenancy} {
		r := &result{s: settings{mode: mode, clusters: 2, namespaces: 1}, workers: 2}
		if mode == modeTenancy {
			r.tenants = &tenantPhase{}
		}
		if err := writeMarkdown(path, r); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if !strings.HasPrefix(text, other) {
		t.Errorf("the other section was not kept:\n%s", text)
	}
	for _, mode := range []string{modeClusterWide, modeTenancy} {
		begin, end := markersOf(mode)
		if strings.Count(text, begin) != 1 || strings.Count(text, end) != 1 {
			t.Errorf("want one %s section:\n%s", sectionOf(mode), text)
		}
	}
	if !strings.Contains(text, "Many tenants, one operator") || !strings.Contains(text, "Many clusters, one operator") {
		t.Errorf("a mode's heading is missing:\n%s", text)
	}
}

func TestDiffReadsTheOperatorMetrics(t *testing.T) {
	before := mustParse(t, 0, 10, 1, 0)
	after := mustParse(t, 60, 70, 4, 3)
	w := diff(before, after)
	if w.seconds != 60 || w.reconciles != 60 || w.reads != 60 || w.writes != 3 || !w.renderPresent || w.renders != 3 {
		t.Fatalf("window = %+v", w)
	}
	if got := w.perClusterMinute(w.reads, 2); got != 30 {
		t.Errorf("reads per cluster per minute = %v, want 30", got)
	}
	if got := 1000 * w.renderSum / w.renders; got < 1.99 || got > 2.01 {
		t.Errorf("render ms/pass = %v, want 2", got)
	}
}

// mustParse builds a scrape at second at: reconciles and GETs as given,
// renders 2 ms each, PUTs as given.
func mustParse(t *testing.T, at, gets, renders, puts int) scrape {
	t.Helper()
	text := fmt.Sprintf(`# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="openbaocluster",result="requeue_after"} %d
controller_runtime_reconcile_total{controller="other",result="success"} 7
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="h",method="GET"} %d
rest_client_requests_total{code="200",host="h",method="PUT"} %d
# TYPE openbao_render_duration_seconds histogram
openbao_render_duration_seconds_bucket{le="+Inf"} %d
openbao_render_duration_seconds_sum %g
openbao_render_duration_seconds_count %d
`, gets, gets, puts, renders, 0.002*float64(renders), renders)
	s, err := parseMetrics(strings.NewReader(text), time.Unix(int64(at), 0))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseStat(t *testing.T) {
	line := "4242 (kube-apiserver) S 17 4242 17 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
	name, ppid, cpu, ok := parseStat(line)
	if !ok || name != "kube-apiserver" || ppid != 17 || cpu != 3 {
		t.Errorf("parseStat = %q %d %v %v, want kube-apiserver 17 3 true", name, ppid, cpu, ok)
	}
}
