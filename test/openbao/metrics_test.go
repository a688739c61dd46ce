package openbao_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/test/baotest"
	"github.com/openbao/operator/test/fixtures"
	"github.com/openbao/operator/test/testbin"
)

// scrape is how the rendered ServiceMonitor's endpoint reaches a server.
type scrape struct {
	port       string // the Service port's name
	scheme     string
	path       string
	query      url.Values
	serverName string
	caSecret   string
}

// monitoredCluster renders the overrides fixture (serviceMonitor on) with
// the API listener left at its default, unauthenticatedMetricsAccess off,
// and returns its config.hcl, the ServiceMonitor's endpoint and the
// container port that endpoint's Service port leads to.
func monitoredCluster(t *testing.T) (hcl string, ep scrape, containerPort int64, caSecretName string) {
	t.Helper()
	c := fixtures.Load(t, fixtures.Files(t)["overrides"])
	c.Spec.Configuration.Listener.UnauthenticatedMetricsAccess = false
	in := values.InputFor(c, &c.Status)
	cfg, err := values.ConfigFor(in)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := values.Compute(in, values.Operator{Namespace: "openbao-operator-system"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := r.Render(c.Namespace, c.Name, vals)
	if err != nil {
		t.Fatal(err)
	}
	ep = serviceMonitorEndpoint(t, objs)
	return cfg.HCL, ep, servicePortTarget(t, objs, ep.port), c.TLSCASecretName()
}

func serviceMonitorEndpoint(t *testing.T, objs []*unstructured.Unstructured) scrape {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "ServiceMonitor" {
			continue
		}
		eps, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
		if len(eps) != 1 {
			t.Fatalf("ServiceMonitor has %d endpoints, want 1", len(eps))
		}
		e := eps[0].(map[string]any)
		ep := scrape{query: url.Values{}}
		ep.port, _, _ = unstructured.NestedString(e, "port")
		ep.scheme, _, _ = unstructured.NestedString(e, "scheme")
		ep.path, _, _ = unstructured.NestedString(e, "path")
		ep.serverName, _, _ = unstructured.NestedString(e, "tlsConfig", "serverName")
		ep.caSecret, _, _ = unstructured.NestedString(e, "tlsConfig", "ca", "secret", "name")
		params, _, _ := unstructured.NestedMap(e, "params")
		for k, v := range params {
			for _, s := range v.([]any) {
				ep.query.Add(k, s.(string))
			}
		}
		if _, ok := e["authorization"]; ok {
			t.Errorf("the ServiceMonitor sends a credential: %v", e["authorization"])
		}
		return ep
	}
	t.Fatal("no ServiceMonitor rendered with serviceMonitor.enabled")
	return scrape{}
}

// servicePortTarget follows the headless Service's named port to the
// container port of the OpenBao container it targets.
func servicePortTarget(t *testing.T, objs []*unstructured.Unstructured, name string) int64 {
	t.Helper()
	var target string
	for _, o := range objs {
		if o.GetKind() != "Service" || o.GetLabels()["openbao.org/service"] != "internal" {
			continue
		}
		ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
		for _, p := range ports {
			if p.(map[string]any)["name"] == name {
				target, _ = p.(map[string]any)["targetPort"].(string)
			}
		}
	}
	for _, o := range objs {
		if o.GetKind() != "StatefulSet" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			ports, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
			for _, p := range ports {
				if p.(map[string]any)["name"] == target {
					n, _, _ := unstructured.NestedFieldNoCopy(p.(map[string]any), "containerPort")
					var port int64
					if _, err := fmt.Sscan(fmt.Sprint(n), &port); err != nil {
						t.Fatalf("container port %v: %v", n, err)
					}
					return port
				}
			}
		}
	}
	t.Fatalf("the headless Service's port %q leads to no container port", name)
	return 0
}

// TestTheServiceMonitorScrapesOpenBaoWithoutATokenWhileTheAPIPortAsksForOne
// starts the real server on the config.hcl the operator renders with
// monitoring on, scrapes it as the rendered ServiceMonitor says (port,
// scheme, path, params, CA and server name) and without a credential, and
// parses the answer as Prometheus text holding every OpenBao series the
// Grafana dashboard reads. The API port still refuses the same request
// without a token.
func TestTheServiceMonitorScrapesOpenBaoWithoutATokenWhileTheAPIPortAsksForOne(t *testing.T) {
	t.Parallel()
	hcl, ep, containerPort, caSecret := monitoredCluster(t)
	if ep.caSecret != caSecret {
		t.Fatalf("the ServiceMonitor trusts Secret %q, want the cluster's CA %q", ep.caSecret, caSecret)
	}
	c := fixtures.Load(t, fixtures.Files(t)["overrides"])
	config := strings.NewReplacer(
		`"/etc/bao/tls/`, `"{{dir}}/`,
		`"file:///etc/bao/unseal/key"`, `"file://{{dir}}/unseal.key"`,
		`":8200"`, `"127.0.0.1:{{api_port}}"`,
		`":8201"`, `"127.0.0.1:{{cluster_port}}"`,
		`":8204"`, `"127.0.0.1:{{metrics_port}}"`,
		`"127.0.0.1:8205"`, `"127.0.0.1:{{metrics_cluster_port}}"`,
		`"`+c.PodAPIAddress(0)+`"`, `"https://127.0.0.1:{{api_port}}"`,
		`"/bao/data"`, `"{{dir}}/raft"`,
		"service_registration \"kubernetes\" {\n}\n", "",
	).Replace(hcl)
	if strings.Contains(config, "/etc/bao") || strings.Contains(config, ".svc:") {
		t.Fatalf("remapping left pod paths or addresses behind:\n%s", config)
	}
	files := operatorTLSFiles(t, c)
	bao := baotest.Start(t, baotest.Options{
		Config: config, Files: files, TLS: true, Ports: []string{"metrics_port", "metrics_cluster_port"},
		Env: []string{"BAO_API_ADDR=https://127.0.0.1:{{api_port}}",
			"BAO_CLUSTER_ADDR=https://127.0.0.1:{{cluster_port}}", "BAO_RAFT_NODE_ID={{node_id}}"},
	})
	t.Cleanup(func() { dumpLog(t, bao) })
	status, body := call(t, bao, http.MethodPut, "/v1/sys/init", "{}")
	if status != http.StatusOK {
		t.Fatalf("init: %d %s", status, body)
	}
	waitForHealth(t, bao, http.StatusOK)
	// One request with a token, so that the request series exist as they
	// do on any server in use.
	var init struct {
		RootToken string `json:"root_token"`
	}
	if err := json.Unmarshal([]byte(body), &init); err != nil || init.RootToken == "" {
		t.Fatalf("init answer without a root token: %v", err)
	}
	req, err := http.NewRequest(http.MethodGet, bao.Addr+"/v1/sys/mounts", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Vault-Token", init.RootToken)
	if resp, err := bao.Client.Do(req); err != nil || resp.Body.Close() != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET sys/mounts with the root token: %v %v", resp, err)
	}

	loopback := map[int64]int{8200: portOf(t, bao.Addr), 8204: bao.Ports["metrics_port"]}
	port, ok := loopback[containerPort]
	if !ok {
		t.Fatalf("the ServiceMonitor scrapes container port %d, which this test did not start", containerPort)
	}
	client := scrapeClient(t, files["ca.crt"], ep.serverName)
	target := fmt.Sprintf("%s://127.0.0.1:%d%s?%s", ep.scheme, port, ep.path, ep.query.Encode())
	status, body = waitForScrape(t, client, target, dashboardSeries(t))
	if status != http.StatusOK {
		t.Fatalf("the ServiceMonitor's scrape of %s: %d %s", target, status, body)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the scrape is no Prometheus text: %v\n%s", err, body)
	}
	for _, name := range append(dashboardSeries(t), "vault_core_unsealed") {
		if _, ok := families[name]; !ok {
			t.Errorf("the scrape lacks %s, which the Grafana dashboard or this test reads; got %d families", name, len(families))
		}
	}

	api := fmt.Sprintf("https://127.0.0.1:%d%s?%s", loopback[8200], ep.path, ep.query.Encode())
	if status, body := get(t, client, api); status != http.StatusForbidden {
		t.Errorf("the API port answered an unauthenticated %s with %d, want 403:\n%.300s", ep.path, status, body)
	}
}

// scrapeClient trusts the cluster's CA and checks the name the
// ServiceMonitor's tlsConfig names, as Prometheus does.
func scrapeClient(t *testing.T, caPEM []byte, serverName string) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("the cluster's CA bundle holds no certificate")
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12},
	}}
}

// waitForScrape retries until every named family is in the answer:
// OpenBao's sink fills over its first seconds, and its gauges arrive on
// their own periods.
func waitForScrape(t *testing.T, client *http.Client, target string, families []string) (int, string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, body := get(t, client, target)
		complete := status == http.StatusOK
		for _, f := range append(families, "vault_core_unsealed") {
			complete = complete && strings.Contains(body, "# TYPE "+f+" ")
		}
		if complete || time.Now().After(deadline) {
			return status, body
		}
		time.Sleep(time.Second)
	}
}

// dashboardSeries are the OpenBao metric families the Grafana dashboard
// queries; a summary's _count and _sum series belong to its family.
func dashboardSeries(t *testing.T) []string {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "grafana", "openbao-operator-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range regexp.MustCompile(`\bvault_[a-zA-Z0-9_]+`).FindAllString(string(raw), -1) {
		name := strings.TrimSuffix(strings.TrimSuffix(m, "_count"), "_sum")
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		t.Fatal("the dashboard queries none of OpenBao's series")
	}
	return out
}

func get(t *testing.T, client *http.Client, target string) (int, string) {
	t.Helper()
	resp, err := client.Get(target)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(raw)
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	u, err := url.Parse(addr)
	if err != nil {
		t.Fatal(err)
	}
	var port int
	if _, err := fmt.Sscan(u.Port(), &port); err != nil {
		t.Fatalf("no port in %s: %v", addr, err)
	}
	return port
}
