package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/test/freeport"
)

// A real Prometheus (bin/prometheus, Debian's 2.42 package) runs on this
// host and reads what the Prometheus Operator would give it: the
// ServiceMonitors and PrometheusRules stored on the node's API server, as
// the install chart and the operator rendered them. The Prometheus
// Operator itself is not built here (see docs/development.md); promConfig
// translates those objects the way it does: role endpoints discovery, the
// relabelings that keep the Service the selector names and the endpoint's
// port, job from the Service's name, honorLabels, scheme, path, params,
// interval, TLS and the bearer token from the Secret the endpoint names.
// Debian builds Prometheus without Kubernetes service discovery (client-go
// is not packaged there), so endpointsSD stands in for
// kubernetes_sd_configs: it serves the targets of the namespace's
// Endpoints, read from the API server at each refresh, with the
// __meta_kubernetes_* labels that discovery gives them, over
// http_sd_configs; the relabelings act on them unchanged. Rules are copied
// with their expressions, labels and annotations as rendered; only each
// `for:` is divided by forScale, so an alert held 5m in a user's cluster is
// held 5s here.
const (
	forScale = 60
	// promEvalInterval divides every shortened hold (whole seconds), so
	// a hold ends on an evaluation and the bound of expectFiring needs no
	// rounding up to the next one.
	promEvalInterval = time.Second
	// promSDDelay is how long Prometheus' discovery manager may hold a
	// change of the targets before handing it to the scrapers.
	promSDDelay = 5 * time.Second
)

type promServer struct {
	url    string
	scrape time.Duration // the longest scrape interval of the config
}

// prometheusBinary is bin/prometheus; without it the test is skipped,
// and fails under CI.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	path := filepath.Join(node.BinDir, "prometheus")
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bin/prometheus is missing (make tools): %v", err)
		}
		t.Skipf("bin/prometheus is missing (make tools): %v", err)
	}
	return path
}

// startPrometheus runs Prometheus on 127.0.0.1 with the configuration
// translated from the monitoring objects of namespaces, and stops it by
// its PID when the test ends.
func startPrometheus(ctx context.Context, t *testing.T, cl client.Client, namespaces ...string) *promServer {
	t.Helper()
	bin := prometheusBinary(t)
	dir := t.TempDir()
	sd := httptest.NewServer(endpointsSD(cl))
	t.Cleanup(sd.Close)
	cfg, scrape := promConfig(ctx, t, cl, dir, sd.URL, namespaces)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := freeport.Get("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logPrometheusState(t, "http://"+addr)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logFile.Name())
			t.Logf("prometheus log:\n%s\nconfig:\n%s", out, cfg)
		}
	})
	p := &promServer{url: "http://" + addr, scrape: scrape}
	waitFor(ctx, t, 30*time.Second, "prometheus ready", func() (bool, string) {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return p
}

// logPrometheusState logs what a failed test needs to see: the targets
// and the series up, as Prometheus has them.
func logPrometheusState(t *testing.T, base string) {
	for _, path := range []string{"/api/v1/targets?state=active", "/api/v1/query?query=up", "/api/v1/alerts"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Logf("GET %s: %v", path, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("GET %s at %s: %s", path, time.Now().Format(time.TimeOnly), body)
	}
}

// promConfig is Prometheus' configuration for the ServiceMonitors and
// PrometheusRules of namespaces, with the files it names written to dir,
// and the longest scrape interval in it.
func promConfig(ctx context.Context, t *testing.T, cl client.Client, dir, sdURL string, namespaces []string) ([]byte, time.Duration) {
	t.Helper()
	var scrapes []map[string]any
	var ruleFiles []string
	longest := time.Duration(0)
	for _, ns := range namespaces {
		for _, sm := range listMonitoring(ctx, t, cl, ns, "ServiceMonitor") {
			endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			for i, ep := range endpoints {
				sc := scrapeConfig(ctx, t, cl, dir, sm, i, ep.(map[string]any))
				sc["http_sd_configs"] = []map[string]any{{"url": sdURL + "/" + ns, "refresh_interval": "1s"}}
				scrapes = append(scrapes, sc)
				if d, _ := model.ParseDuration(sc["scrape_interval"].(string)); time.Duration(d) > longest {
					longest = time.Duration(d)
				}
			}
		}
		for _, pr := range listMonitoring(ctx, t, cl, ns, "PrometheusRule") {
			groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
			file := filepath.Join(dir, "rules-"+ns+"-"+pr.GetName()+".yaml")
			writeYAMLFile(t, file, map[string]any{"groups": shortenHolds(t, groups)})
			ruleFiles = append(ruleFiles, file)
		}
	}
	if len(scrapes) == 0 || len(ruleFiles) == 0 {
		t.Fatalf("namespaces %v hold %d ServiceMonitor endpoints and %d PrometheusRules; want both", namespaces, len(scrapes), len(ruleFiles))
	}
	out, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "5s", "evaluation_interval": model.Duration(promEvalInterval).String()},
		"scrape_configs": scrapes, "rule_files": ruleFiles,
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, longest
}

func listMonitoring(ctx context.Context, t *testing.T, cl client.Client, ns, kind string) []unstructured.Unstructured {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("monitoring.coreos.com/v1")
	list.SetKind(kind + "List")
	if err := cl.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatalf("list %ss in %s: %v", kind, ns, err)
	}
	return list.Items
}

// shortenHolds returns the groups with each rule's `for:` divided by
// forScale (at least a second); nothing else changes.
func shortenHolds(t *testing.T, groups []any) []any {
	t.Helper()
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			r := r.(map[string]any)
			hold, ok := r["for"].(string)
			if !ok {
				continue
			}
			d, err := model.ParseDuration(hold)
			if err != nil {
				t.Fatalf("rule %v: for %q: %v", r["alert"], hold, err)
			}
			r["for"] = model.Duration(max(time.Duration(d)/forScale, time.Second)).String()
		}
	}
	return groups
}

var labelNameChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// scrapeConfig is the scrape job the Prometheus Operator makes of
// endpoint i of ServiceMonitor sm.
func scrapeConfig(ctx context.Context, t *testing.T, cl client.Client, dir string, sm unstructured.Unstructured, i int, ep map[string]any) map[string]any {
	t.Helper()
	ns := sm.GetNamespace()
	port, _ := ep["port"].(string)
	if port == "" {
		t.Fatalf("ServiceMonitor %s/%s endpoint %d has no port name; only named ports are translated", ns, sm.GetName(), i)
	}
	if exprs, _, _ := unstructured.NestedSlice(sm.Object, "spec", "selector", "matchExpressions"); len(exprs) > 0 {
		t.Fatalf("ServiceMonitor %s/%s: matchExpressions are not translated", ns, sm.GetName())
	}
	match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	var relabel []map[string]any
	for k, v := range match {
		name := labelNameChars.ReplaceAllString(k, "_")
		relabel = append(relabel, map[string]any{"action": "keep", "regex": "(" + regexp.QuoteMeta(v) + ");true",
			"source_labels": []string{"__meta_kubernetes_service_label_" + name, "__meta_kubernetes_service_labelpresent_" + name}})
	}
	relabel = append(relabel,
		map[string]any{"action": "keep", "regex": regexp.QuoteMeta(port), "source_labels": []string{"__meta_kubernetes_endpoint_port_name"}},
		map[string]any{"source_labels": []string{"__meta_kubernetes_namespace"}, "target_label": "namespace"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_service_name"}, "target_label": "service"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_pod_name"}, "target_label": "pod"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_pod_container_name"}, "target_label": "container"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_service_name"}, "target_label": "job"},
		map[string]any{"target_label": "endpoint", "replacement": port})
	sc := map[string]any{
		"job_name":        fmt.Sprintf("serviceMonitor/%s/%s/%d", ns, sm.GetName(), i),
		"honor_labels":    ep["honorLabels"] == true,
		"scheme":          orDefault(ep["scheme"], "http"),
		"metrics_path":    orDefault(ep["path"], "/metrics"),
		"scrape_interval": orDefault(ep["interval"], "30s"),
		"relabel_configs": relabel,
	}
	if params, ok := ep["params"]; ok {
		sc["params"] = params
	}
	if tc, ok := ep["tlsConfig"].(map[string]any); ok {
		sc["tls_config"] = tlsConfigOf(ctx, t, cl, dir, ns, tc)
	}
	if ref := tokenRef(ep); ref != nil {
		file := secretFile(ctx, t, cl, dir, ns, ref)
		sc["authorization"] = map[string]any{"type": "Bearer", "credentials_file": file}
	}
	return sc
}

func orDefault(v any, def string) string {
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	return def
}

// endpointsSD serves, at /<namespace>, Prometheus' HTTP service
// discovery format for every address (ready or not) and port of every
// Endpoints object of the namespace, labelled as kubernetes_sd_configs
// with role endpoints labels them (those the relabelings read).
func endpointsSD(cl client.Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns := strings.TrimPrefix(r.URL.Path, "/")
		groups, err := endpointTargets(r.Context(), cl, ns)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(groups)
	})
}

type targetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

func endpointTargets(ctx context.Context, cl client.Client, ns string) ([]targetGroup, error) {
	var services corev1.ServiceList
	var endpoints corev1.EndpointsList
	if err := cl.List(ctx, &services, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	if err := cl.List(ctx, &endpoints, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	serviceLabels := map[string]map[string]string{}
	for _, s := range services.Items {
		serviceLabels[s.Name] = s.Labels
	}
	groups := []targetGroup{}
	for _, ep := range endpoints.Items {
		for _, subset := range ep.Subsets {
			for _, port := range subset.Ports {
				for ready, addrs := range map[string][]corev1.EndpointAddress{"true": subset.Addresses, "false": subset.NotReadyAddresses} {
					for _, a := range addrs {
						labels := map[string]string{"__meta_kubernetes_namespace": ns, "__meta_kubernetes_service_name": ep.Name,
							"__meta_kubernetes_endpoint_port_name": port.Name, "__meta_kubernetes_endpoint_ready": ready}
						for k, v := range serviceLabels[ep.Name] {
							name := labelNameChars.ReplaceAllString(k, "_")
							labels["__meta_kubernetes_service_label_"+name] = v
							labels["__meta_kubernetes_service_labelpresent_"+name] = "true"
						}
						if a.TargetRef != nil && a.TargetRef.Kind == "Pod" {
							labels["__meta_kubernetes_pod_name"] = a.TargetRef.Name
						}
						target := net.JoinHostPort(a.IP, strconv.Itoa(int(port.Port)))
						groups = append(groups, targetGroup{Targets: []string{target}, Labels: labels})
					}
				}
			}
		}
	}
	return groups, nil
}

// tokenRef is the Secret key an endpoint's bearer token is read from:
// authorization.credentials, or the older bearerTokenSecret.
func tokenRef(ep map[string]any) map[string]any {
	if auth, ok := ep["authorization"].(map[string]any); ok {
		ref, _ := auth["credentials"].(map[string]any)
		return ref
	}
	ref, _ := ep["bearerTokenSecret"].(map[string]any)
	return ref
}

func tlsConfigOf(ctx context.Context, t *testing.T, cl client.Client, dir, ns string, tc map[string]any) map[string]any {
	t.Helper()
	out := map[string]any{}
	if v, ok := tc["insecureSkipVerify"].(bool); ok {
		out["insecure_skip_verify"] = v
	}
	if v, ok := tc["serverName"].(string); ok {
		out["server_name"] = v
	}
	if ca, ok := tc["ca"].(map[string]any); ok {
		ref, ok := ca["secret"].(map[string]any)
		if !ok {
			t.Fatalf("tlsConfig.ca %v: only a Secret is translated", ca)
		}
		out["ca_file"] = secretFile(ctx, t, cl, dir, ns, ref)
	}
	return out
}

// secretFile writes the Secret key ref names (as Prometheus Operator
// mounts it) to a file, once the key holds a value: a ServiceAccount
// token Secret is filled in by Kubernetes' token controller.
func secretFile(ctx context.Context, t *testing.T, cl client.Client, dir, ns string, ref map[string]any) string {
	t.Helper()
	name, _ := ref["name"].(string)
	key, _ := ref["key"].(string)
	var value []byte
	waitFor(ctx, t, 30*time.Second, fmt.Sprintf("Secret %s/%s key %s", ns, name, key), func() (bool, string) {
		s := &corev1.Secret{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return false, err.Error()
		}
		value = s.Data[key]
		return len(value) > 0, "empty"
	})
	file := filepath.Join(dir, "secret-"+ns+"-"+name+"-"+key)
	if err := os.WriteFile(file, value, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func writeYAMLFile(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// promAlert is one alert of /api/v1/alerts.
type promAlert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
}

// promRule is one alerting rule of /api/v1/rules.
type promRule struct {
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels"`
	Duration float64           `json:"duration"`
	Health   string            `json:"health"`
	// LastEvaluation is when the rule was last evaluated.
	LastEvaluation time.Time `json:"lastEvaluation"`
	Error          string    `json:"lastError"`
}

func (p *promServer) get(t *testing.T, path string, query url.Values, into any) {
	t.Helper()
	resp, err := http.Get(p.url + path + "?" + query.Encode())
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		t.Fatalf("GET %s: %s %v %s", path, resp.Status, err, body.Error)
	}
	if err := json.Unmarshal(body.Data, into); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// alerts are the pending and firing alerts named alert whose labels hold match.
func (p *promServer) alerts(t *testing.T, alert string, match map[string]string) []promAlert {
	t.Helper()
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	p.get(t, "/api/v1/alerts", nil, &data)
	var out []promAlert
	for _, a := range data.Alerts {
		if a.Labels["alertname"] == alert && labelsHold(a.Labels, match) {
			out = append(out, a)
		}
	}
	return out
}

func labelsHold(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// rules are the loaded alerting rules, checked to evaluate without error.
func (p *promServer) rules(t *testing.T) []promRule {
	t.Helper()
	var data struct {
		Groups []struct {
			Rules []promRule `json:"rules"`
		} `json:"groups"`
	}
	p.get(t, "/api/v1/rules", url.Values{"type": {"alert"}}, &data)
	var out []promRule
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			if r.Health == "err" {
				t.Errorf("rule %s does not evaluate: %s", r.Name, r.Error)
			}
			out = append(out, r)
		}
	}
	return out
}

// hold is the (shortened) `for:` of alert with the given severity.
func (p *promServer) hold(t *testing.T, alert, severity string) time.Duration {
	t.Helper()
	for _, r := range p.rules(t) {
		if r.Name == alert && r.Labels["severity"] == severity {
			return time.Duration(r.Duration * float64(time.Second))
		}
	}
	t.Fatalf("no rule %s of severity %s loaded", alert, severity)
	return 0
}

// expectFiring waits for alert (of severity, labels holding match) to
// fire no later than its hold plus one evaluation and one scrape (and
// extra, a discovery delay where targets change) after inPlace, when the
// fault was in place where Prometheus reads it. It returns when it fired.
func (p *promServer) expectFiring(ctx context.Context, t *testing.T, alert, severity string, match map[string]string, inPlace time.Time, extra time.Duration) {
	t.Helper()
	match = withSeverity(match, severity)
	bound := p.hold(t, alert, severity) + promEvalInterval + p.scrape + extra
	// The poll's own period is added: the alert is seen up to one poll late.
	const poll = 250 * time.Millisecond
	waitEvery(ctx, t, poll, time.Until(inPlace.Add(bound+poll)), fmt.Sprintf("%s (%s) firing within %s of the fault", alert, severity, bound),
		func() (bool, string) {
			as := p.alerts(t, alert, match)
			return len(as) > 0 && as[0].State == "firing", fmt.Sprintf("%+v", as)
		})
	logf("alert %s (%s) fired %s after the fault was in place (bound %s)", alert, severity,
		time.Since(inPlace).Round(100*time.Millisecond), bound)
}

// expectResolved waits until alert (severity, match) is neither pending
// nor firing, within timeout.
func (p *promServer) expectResolved(ctx context.Context, t *testing.T, alert, severity string, match map[string]string, timeout time.Duration) {
	t.Helper()
	match = withSeverity(match, severity)
	start := time.Now()
	waitEvery(ctx, t, 250*time.Millisecond, timeout, alert+" resolved", func() (bool, string) {
		as := p.alerts(t, alert, match)
		return len(as) == 0, fmt.Sprintf("%+v", as)
	})
	logf("alert %s (%s) resolved %s after the fault was removed", alert, severity, time.Since(start).Round(100*time.Millisecond))
}

func withSeverity(match map[string]string, severity string) map[string]string {
	out := map[string]string{"severity": severity}
	for k, v := range match {
		out[k] = v
	}
	return out
}

// query evaluates an instant PromQL query and returns the series' values.
func (p *promServer) query(t *testing.T, q string) []float64 {
	t.Helper()
	var data struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	p.get(t, "/api/v1/query", url.Values{"query": {q}}, &data)
	var out []float64
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("query %s: value %v", q, r.Value)
		}
		out = append(out, v)
	}
	return out
}

// expectQuiet checks that alert (severity, match) is neither pending nor
// firing at an evaluation that saw the series q, which must hold a value:
// a quiet alert over no data proves nothing.
func (p *promServer) expectQuiet(ctx context.Context, t *testing.T, alert, severity string, match map[string]string, q string) {
	t.Helper()
	waitEvery(ctx, t, 250*time.Millisecond, time.Minute, "series "+q+" scraped", func() (bool, string) {
		return len(p.query(t, q)) > 0, "no series"
	})
	seen := time.Now()
	waitEvery(ctx, t, 250*time.Millisecond, time.Minute, alert+" evaluated after "+q+" was seen", func() (bool, string) {
		for _, r := range p.rules(t) {
			if r.Name == alert && r.Labels["severity"] == severity {
				return r.LastEvaluation.After(seen), "last evaluated " + r.LastEvaluation.String()
			}
		}
		return false, "no such rule"
	})
	if as := p.alerts(t, alert, withSeverity(match, severity)); len(as) > 0 {
		t.Errorf("%s (%s) is %s over %s, want quiet", alert, severity, as[0].State, q)
	}
}
