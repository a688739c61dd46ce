package scale_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The harness's own pure parts are tested here; they run in `go test`
// without starting anything.

func TestRequestKey(t *testing.T) {
	for _, tc := range []struct{ method, url, want string }{
		{"GET", "/api/v1/namespaces/scale-03/secrets/bao-003-tls-ca", "get /api/v1/namespaces/{ns}/secrets/{cluster}-tls-ca"},
		{"GET", "/api/v1/namespaces/scale-03/pods?labelSelector=x", "list /api/v1/namespaces/{ns}/pods"},
		{"GET", "/api/v1/pods?watch=true&resourceVersion=1", "watch /api/v1/pods"},
		{"PUT", "/apis/openbao.org/v1alpha1/namespaces/scale-01/openbaoclusters/bao-021/status", "update /apis/openbao.org/v1alpha1/namespaces/{ns}/openbaoclusters/{cluster}/status"},
		{"PATCH", "/apis/apps/v1/namespaces/scale-01/statefulsets/bao-021", "patch /apis/apps/v1/namespaces/{ns}/statefulsets/{cluster}"},
		{"POST", "/apis/events.k8s.io/v1/namespaces/scale-01/events", "create /apis/events.k8s.io/v1/namespaces/{ns}/events"},
		{"GET", "/api/v1/namespaces/openbao-operator-system/pods/manager-1", "get /api/v1/namespaces/{ns}/pods/{name}"},
		{"GET", "/api/v1/namespaces/scale-01", "get /api/v1/namespaces/{name}"},
		{"GET", "/apis", "get /apis"},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestKey(tc.method, u); got != tc.want {
			t.Errorf("requestKey(%s %s) = %q, want %q", tc.method, tc.url, got, tc.want)
		}
	}
}

func TestWriteMarkdownKeepsOtherSections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	other := "# Benchmarks\n\n<!-- other:begin -->\nkeep me\n<!-- other:end -->\n"
	if err := os.WriteFile(path, []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &result{s: settings{clusters: 2}, workers: 2}
	for range 2 { // the second write replaces the first section
		if err := writeMarkdown(path, r); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if !strings.HasPrefix(text, other) || strings.Count(text, markBegin) != 1 || strings.Count(text, markEnd) != 1 {
		t.Errorf("unexpected file:\n%s", text)
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
