package scale_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/test/testbin"
)

// scrape is one reading of the operator's Prometheus endpoint.
type scrape struct {
	at       time.Time
	families map[string]*dto.MetricFamily
}

func scrapeMetrics(ctx context.Context, url, token string) (scrape, error) {
	resp, err := getMetrics(ctx, url, token)
	if err != nil {
		return scrape{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return scrape{}, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	s, err := parseMetrics(resp.Body, time.Now())
	if err != nil {
		return scrape{}, fmt.Errorf("parse metrics of %s: %w", url, err)
	}
	return s, nil
}

// getMetrics GETs the operator's HTTPS metrics endpoint with a bearer
// token. Its certificate is self-signed: the benchmark measures, it does
// not check who serves.
func getMetrics(ctx context.Context, url, token string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// The text format: expfmt's TextParser reads nothing else.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	req.Header.Set("Authorization", "Bearer "+token)
	return insecureClient.Do(req)
}

var insecureClient = &http.Client{Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the operator's self-signed endpoint

// metricsReaderToken is a token of a ServiceAccount bound to the ClusterRole
// config/rbac gives scrapers, as Prometheus would hold one.
func metricsReaderToken(ctx context.Context, c client.Client) (string, error) {
	root, err := testbin.RepoRoot()
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "rbac", "metrics_reader_role.yaml"))
	if err != nil {
		return "", err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "metrics-scraper"}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-scraper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}}
	for _, obj := range []client.Object{role, sa, binding} {
		if err := c.Create(ctx, obj); err != nil {
			return "", fmt.Errorf("create %s: %w", obj.GetName(), err)
		}
	}
	// Longer than the longest benchmark run.
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(6 * 3600))}}
	if err := c.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", fmt.Errorf("request a token of %s: %w", sa.Name, err)
	}
	return req.Status.Token, nil
}

func parseMetrics(in io.Reader, at time.Time) (scrape, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(in)
	if err != nil {
		return scrape{}, err
	}
	return scrape{at: at, families: fams}, nil
}

// has reports whether the operator exports the named metric at all.
func (s scrape) has(name string) bool {
	_, ok := s.families[name]
	return ok
}

// sum adds up a counter, gauge or untyped metric over the series whose
// labels match every pair in match.
func (s scrape) sum(name string, match map[string]string) float64 {
	var total float64
	for _, m := range s.series(name, match) {
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Untyped != nil:
			total += m.Untyped.GetValue()
		}
	}
	return total
}

// histogram adds up a histogram's sample sum and count over matching series.
func (s scrape) histogram(name string, match map[string]string) (sum, count float64) {
	for _, m := range s.series(name, match) {
		if h := m.Histogram; h != nil {
			sum += h.GetSampleSum()
			count += float64(h.GetSampleCount())
		}
	}
	return sum, count
}

// by sums a metric per value of one label.
func (s scrape) by(name, label string, match map[string]string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range s.series(name, match) {
		v := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				v = l.GetValue()
			}
		}
		out[v] += m.GetCounter().GetValue()
	}
	return out
}

func (s scrape) series(name string, match map[string]string) []*dto.Metric {
	fam, ok := s.families[name]
	if !ok {
		return nil
	}
	var out []*dto.Metric
	for _, m := range fam.GetMetric() {
		if labelsMatch(m, match) {
			out = append(out, m)
		}
	}
	return out
}

func labelsMatch(m *dto.Metric, match map[string]string) bool {
	for k, want := range match {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == want {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// The metrics the benchmark reads. The render histogram is the operator's
// own and may be absent from the build under test.
const (
	metricRequests      = "rest_client_requests_total"
	metricReconciles    = "controller_runtime_reconcile_total"
	metricReconcileTime = "controller_runtime_reconcile_time_seconds"
	metricRender        = "openbao_render_duration_seconds"
	metricQueueDepth    = "workqueue_depth"
	metricQueueWait     = "workqueue_queue_duration_seconds"
)

// window holds the differences of the counters between two scrapes.
type window struct {
	seconds       float64
	reconciles    float64
	byResult      map[string]float64
	reads, writes float64
	byMethod      map[string]float64
	reconcileSum  float64 // seconds spent in Reconcile
	renderSum     float64
	renders       float64
	renderPresent bool
	queueWaitSum  float64 // seconds requests waited in the work queue
	queueWaits    float64
}

func diff(a, b scrape) window {
	w := window{seconds: b.at.Sub(a.at).Seconds()}
	ours := map[string]string{"controller": reconcileControllerID}
	w.reconciles = b.sum(metricReconciles, ours) - a.sum(metricReconciles, ours)
	w.byResult = subtract(a.by(metricReconciles, "result", ours), b.by(metricReconciles, "result", ours))
	w.byMethod = subtract(a.by(metricRequests, "method", nil), b.by(metricRequests, "method", nil))
	for method, n := range w.byMethod {
		if isRead(method) {
			w.reads += n
		} else {
			w.writes += n
		}
	}
	s0, _ := a.histogram(metricReconcileTime, ours)
	s1, _ := b.histogram(metricReconcileTime, ours)
	w.reconcileSum = s1 - s0
	w.renderPresent = b.has(metricRender)
	r0, n0 := a.histogram(metricRender, nil)
	r1, n1 := b.histogram(metricRender, nil)
	w.renderSum, w.renders = r1-r0, n1-n0
	queue := map[string]string{"name": reconcileControllerID}
	q0, c0 := a.histogram(metricQueueWait, queue)
	q1, c1 := b.histogram(metricQueueWait, queue)
	w.queueWaitSum, w.queueWaits = q1-q0, c1-c0
	return w
}

// changes counts the operator's updates, patches and deletes: its writes
// less creates (the POSTs of the metrics endpoint's token and access
// reviews come with every scrape).
func (s scrape) changes() float64 {
	var n float64
	for method, c := range s.by(metricRequests, "method", nil) {
		switch method {
		case http.MethodPut, http.MethodPatch, http.MethodDelete:
			n += c
		}
	}
	return n
}

// isRead: client-go labels requests with the HTTP method, so get, list and
// watch all count as GET (HEAD and OPTIONS do not occur).
func isRead(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	return false
}

func subtract(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// perClusterMinute scales a count in the window to one cluster and minute.
func (w window) perClusterMinute(n float64, clusters int) float64 {
	if w.seconds <= 0 || clusters == 0 {
		return 0
	}
	return n / float64(clusters) / (w.seconds / 60)
}

// reconcileMean is the mean duration of a pass in the window, in seconds.
func (w window) reconcileMean() float64 {
	if w.reconciles == 0 {
		return 0
	}
	return w.reconcileSum / w.reconciles
}

// queueWaitMean is how long a request waited for a worker, in seconds.
func (w window) queueWaitMean() float64 {
	if w.queueWaits == 0 {
		return 0
	}
	return w.queueWaitSum / w.queueWaits
}

// sortedKeys lists a map's keys in order, for stable output.
func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// metricLongRunning is kube-apiserver's gauge of the long-running requests
// it serves now, by verb and resource: its WATCH series are the watches
// open, of every client.
const metricLongRunning = "apiserver_longrunning_requests"

// apiServer reads kube-apiserver's own /metrics as the harness's admin.
type apiServer struct {
	client *http.Client
	url    string
}

func newAPIServer(cfg *rest.Config) (*apiServer, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("API server HTTP client: %w", err)
	}
	return &apiServer{client: hc, url: strings.TrimSuffix(cfg.Host, "/") + "/metrics"}, nil
}

// watches returns the watches open on the API server, by resource.
func (a *apiServer) watches(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape the API server: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape the API server: %s", resp.Status)
	}
	s, err := parseMetrics(resp.Body, time.Now())
	if err != nil {
		return nil, fmt.Errorf("parse the API server's metrics: %w", err)
	}
	out := map[string]float64{}
	for _, m := range s.series(metricLongRunning, map[string]string{"verb": "WATCH"}) {
		resource := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "resource" {
				resource = l.GetValue()
			}
		}
		out[resource] += m.GetGauge().GetValue()
	}
	return out, nil
}

// total adds up counts.
func total(m map[string]float64) float64 {
	var n float64
	for _, v := range m {
		n += v
	}
	return n
}
