package scale_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
