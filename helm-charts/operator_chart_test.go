package helmcharts_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/test/golden"
)

// The operator's install chart is read from disk, not embedded: the
// operator never renders it, only `helm install` and these tests do.
const (
	operatorChart = "openbao-operator"
	namespace     = "openbao-operator-system"
)

var kubeVersion = chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}

// operatorChartCases are the values each golden file is rendered from.
var operatorChartCases = map[string]map[string]any{
	"defaults": nil,
	"everything-on": {
		"image":            map[string]any{"digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		"wrapper":          map[string]any{"image": map[string]any{"digest": "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"}},
		"imagePullSecrets": []any{map[string]any{"name": "registry"}},
		"replicaCount":     2,
		"proxy":            map[string]any{"httpProxy": "http://proxy:3128", "httpsProxy": "http://proxy:3128", "noProxy": ".svc,10.0.0.0/8"},
		"metrics":          map[string]any{"secure": true},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"},
			"endpoint": map[string]any{"scheme": "https"}},
		"nodeSelector":      map[string]any{"kubernetes.io/os": "linux"},
		"commonLabels":      map[string]any{"team": "platform"},
		"extraArgs":         []any{"--zap-encoder=console"},
		"logLevel":          "debug",
		"extraEnv":          []any{map[string]any{"name": "GOMEMLIMIT", "value": "200MiB"}},
		"podLabels":         map[string]any{"cost-center": "platform", "app.kubernetes.io/name": "not-the-chart's"},
		"podAnnotations":    map[string]any{"example.com/owner": "platform"},
		"priorityClassName": "system-cluster-critical",
		"tolerations":       []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"}},
		"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
			"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "openbao-operator", "control-plane": "controller-manager"}}}},
		"serviceAccount":        map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/openbao-operator"}},
		"maxConcurrentRollouts": 3,
		"grafanaDashboard":      map[string]any{"enabled": true, "namespace": "monitoring", "annotations": map[string]any{"grafana_folder": "OpenBao"}},
	},
	"platform-policy": {
		"imagePolicy": map[string]any{"allowedRepositories": []any{"ghcr.io/openbao"},
			"signature": map[string]any{"publicKeyConfigMap": "platform-cosign"}},
		"tenantFields": map[string]any{"allowedPriorityClasses": []any{"openbao"}, "allowedTolerationKeys": []any{"dedicated", "gpu"},
			"allowedAnnotationPrefixes": []any{"nginx.ingress.kubernetes.io/"}},
	},
	"platform-keyless-no-webhook": {
		"webhook": map[string]any{"enabled": false},
		"imagePolicy": map[string]any{"signature": map[string]any{"keyless": map[string]any{
			"issuer": "https://token.actions.githubusercontent.com", "subjectRegExp": "^https://github.com/corp/",
			"trustedRootConfigMap": "sigstore-root"}}},
	},
	"tenancy": {"tenancy": map[string]any{"enabled": true}, "podLabels": map[string]any{"cost-center": "platform"},
		"priorityClassName": "openbao-operator", "securityContext": map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
			"capabilities": map[string]any{"drop": []any{"ALL"}}, "runAsUser": 65532}},
	"air-gapped-mirror": {
		"global":  map[string]any{"imageRegistry": "mirror.corp.example:5000/openbao-mirror"},
		"image":   map[string]any{"digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		"wrapper": map[string]any{"image": map[string]any{"repository": "openbao/bao-wrapper"}},
		"tenancy": map[string]any{"enabled": true},
	},
	"scrape-with-own-token": {
		"serviceMonitor": map[string]any{"enabled": true, "alerts": map[string]any{"enabled": false},
			"endpoint": map[string]any{"authorization": map[string]any{"credentials": map[string]any{"name": "prometheus-token", "key": "token"}}}},
	},
	"service-account-not-created": {"serviceAccount": map[string]any{"create": false}},
	"watch-namespaces":            {"watchNamespaces": []any{"team-a", "team-b"}},
	"webhook-cert-from-secret": {
		"webhook": map[string]any{"certManaged": false, "certSecret": "openbao-operator-webhook-tls"},
	},
	"no-drain-guard": {"webhook": map[string]any{"drainGuard": false}},
	"no-webhook-no-policies": {
		"webhook":           map[string]any{"enabled": false},
		"admissionPolicies": map[string]any{"enabled": false},
		"leaderElection":    false,
		"metrics":           map[string]any{"service": map[string]any{"enabled": false}},
	},
}

func loadOperatorChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.LoadDir(operatorChart)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// renderOperatorChart renders the templates as `helm template` would, in
// file order, one document per object.
func renderOperatorChart(t *testing.T, c *chart.Chart, values map[string]any) []byte {
	t.Helper()
	return renderOperatorChartIn(t, c, values, namespace)
}

func renderOperatorChartIn(t *testing.T, c *chart.Chart, values map[string]any, namespace string) []byte {
	t.Helper()
	files := renderFilesOf(t, c, values, namespace)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var out bytes.Buffer
	for _, name := range names {
		if filepath.Ext(name) != ".yaml" {
			continue
		}
		for _, doc := range documents(t, files[name]) {
			out.WriteString("---\n# Source: " + name + "\n")
			out.Write(doc)
		}
	}
	return out.Bytes()
}

// renderFiles renders every template of the chart, NOTES.txt too, by name.
func renderFiles(t *testing.T, values map[string]any, namespace string) map[string]string {
	t.Helper()
	return renderFilesOf(t, loadOperatorChart(t), values, namespace)
}

func renderFilesOf(t *testing.T, c *chart.Chart, values map[string]any, namespace string) map[string]string {
	t.Helper()
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = kubeVersion
	vals, err := chartutil.ToRenderValues(c, values,
		chartutil.ReleaseOptions{Name: "openbao-operator", Namespace: namespace, IsInstall: true}, caps)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Engine{Strict: true}.Render(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// documents splits rendered YAML and re-marshals each object, which fails
// on YAML that does not parse and skips empty documents.
func documents(t *testing.T, rendered string) [][]byte {
	t.Helper()
	var docs [][]byte
	reader := utilyaml.NewYAMLReader(bufioReader(rendered))
	for {
		raw, err := reader.Read()
		if err != nil {
			break
		}
		var obj map[string]any
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, raw)
		}
		if len(obj) == 0 {
			continue
		}
		data, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, data)
	}
	return docs
}

func TestOperatorChartGolden(t *testing.T) {
	c := loadOperatorChart(t)
	dir := filepath.Join("testdata", operatorChart)
	set := golden.NewSet(t, dir)
	for name, values := range operatorChartCases {
		t.Run(name, func(t *testing.T) {
			got := renderOperatorChart(t, c, values)
			strictDecodeBuiltins(t, got)
			set.Assert(t, filepath.Join(dir, name+".yaml"), got)
		})
	}
}

// strictDecodeBuiltins decodes every object of a built-in kind strictly, so
// a misspelt or misplaced field fails here rather than at install.
func strictDecodeBuiltins(t *testing.T, rendered []byte) {
	t.Helper()
	decoder := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	for _, doc := range bytes.Split(rendered, []byte("\n---\n")) {
		doc = bytes.TrimPrefix(doc, []byte("---\n"))
		if bytes.Contains(doc, []byte("kind: ServiceMonitor")) || bytes.Contains(doc, []byte("kind: PrometheusRule")) {
			continue // not a built-in kind; test/monitoring checks the rule with promtool
		}
		if _, _, err := decoder.Decode(doc, nil, nil); err != nil {
			t.Errorf("strict decode: %v\n%s", err, doc)
		}
	}
}

func TestOperatorChartLint(t *testing.T) {
	for name, values := range operatorChartCases {
		t.Run(name, func(t *testing.T) {
			linter := lint.AllWithKubeVersion(operatorChart, values, namespace, &kubeVersion)
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				}
			}
		})
	}
}

// TestOperatorChartMatchesConfig guards the copies the chart keeps of
// config/: the CRDs (helm installs crds/ as they are), the manager's
// ClusterRole rules, the webhooks and the admission policies. `make
// generate` refreshes them; a copy that drifted fails here.
func TestOperatorChartMatchesConfig(t *testing.T) {
	copies := map[string]string{
		"files/manager-role.yaml":                       "../config/rbac/role.yaml",
		"files/openbao_editor_role.yaml":                "../config/rbac/openbao_editor_role.yaml",
		"files/openbao_viewer_role.yaml":                "../config/rbac/openbao_viewer_role.yaml",
		"files/webhook.yaml":                            "../config/webhook/manifests.yaml",
		"files/admission/replicas-warning.yaml":         "../config/admission/replicas-warning.yaml",
		"files/admission/disruption-budget.yaml":        "../config/admission/disruption-budget.yaml",
		"files/tenancy/tenant_role.yaml":                "../config/tenancy/roles/tenant_role.yaml",
		"files/tenancy/controller_role.yaml":            "../config/tenancy/roles/controller_role.yaml",
		"files/tenancy/provisioner_role.yaml":           "../config/tenancy/roles/provisioner_role.yaml",
		"files/tenancy/tenant-bindings-policy.yaml":     "../config/tenancy/tenant-bindings-policy.yaml",
		"files/grafana/openbao-operator-dashboard.json": "../config/grafana/openbao-operator-dashboard.json",
	}
	bases, err := filepath.Glob("../config/crd/bases/*.yaml")
	if err != nil || len(bases) == 0 {
		t.Fatalf("no CRDs under config/crd/bases: %v", err)
	}
	for _, base := range bases {
		copies["crds/"+filepath.Base(base)] = base
	}
	crds, err := filepath.Glob(filepath.Join(operatorChart, "crds", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		if _, ok := copies["crds/"+filepath.Base(crd)]; !ok {
			t.Errorf("%s is no CRD of config/crd/bases", crd)
		}
	}
	for inChart, source := range copies {
		want, err := os.ReadFile(source)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(operatorChart, inChart))
		if err != nil {
			t.Errorf("the chart lacks %s: %v (run make generate)", inChart, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s (run make generate)", inChart, source)
		}
	}
}

// TestOperatorChartRendersEveryRule checks that the ClusterRole the chart
// renders holds every rule of the copied role, so a template that drops
// rules is caught even when the copy itself is right.
func TestOperatorChartRendersEveryRule(t *testing.T) {
	role, err := os.ReadFile("../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Rules []any `json:"rules"`
	}
	if err := yaml.Unmarshal(role, &want); err != nil {
		t.Fatal(err)
	}
	rendered := renderOperatorChart(t, loadOperatorChart(t), nil)
	for _, doc := range bytes.Split(rendered, []byte("\n---\n")) {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Rules []any `json:"rules"`
		}
		if err := yaml.Unmarshal(bytes.TrimPrefix(doc, []byte("---\n")), &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind != "ClusterRole" || obj.Metadata.Name != "openbao-operator-manager" {
			continue
		}
		if len(want.Rules) == 0 || !reflect.DeepEqual(obj.Rules, want.Rules) {
			t.Fatalf("the chart's manager ClusterRole rules differ from config/rbac/role.yaml's:\n%v\n%v", obj.Rules, want.Rules)
		}
		return
	}
	t.Fatal("the chart renders no ClusterRole openbao-operator-manager")
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }

// The managed-objects lock lets the operator through by its
// ServiceAccount's full name: in the release's namespace, wherever that is.
func TestTheLockNamesTheOperatorInTheReleaseNamespace(t *testing.T) {
	out := string(renderOperatorChartIn(t, loadOperatorChart(t), map[string]any{}, "vault-ops"))
	if !strings.Contains(out, "system:serviceaccount:vault-ops:openbao-operator-controller-manager") ||
		strings.Contains(out, "system:serviceaccount:openbao-operator-system:") {
		t.Fatal("the managed-objects lock does not name the operator's ServiceAccount in the release namespace")
	}
}

// TestTheDashboardConfigMapCarriesTheDashboardForTheGrafanaSidecar: the
// ConfigMap holds config/grafana's dashboard byte for byte, labelled for
// the sidecar.
func TestTheDashboardConfigMapCarriesTheDashboardForTheGrafanaSidecar(t *testing.T) {
	want, err := os.ReadFile("../config/grafana/openbao-operator-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	rendered := renderOperatorChart(t, loadOperatorChart(t), map[string]any{"grafanaDashboard": map[string]any{"enabled": true}})
	for _, doc := range bytes.Split(rendered, []byte("\n---\n")) {
		var cm struct {
			Kind     string
			Metadata struct {
				Name      string
				Namespace string
				Labels    map[string]string
			}
			Data map[string]string
		}
		if err := yaml.Unmarshal(doc, &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Kind != "ConfigMap" || cm.Metadata.Name != "openbao-operator-dashboard" {
			continue
		}
		if cm.Metadata.Labels["grafana_dashboard"] != "1" || cm.Metadata.Namespace != namespace {
			t.Errorf("labels %v in %s, want grafana_dashboard=1 in %s", cm.Metadata.Labels, cm.Metadata.Namespace, namespace)
		}
		if got := cm.Data["openbao-operator-dashboard.json"]; got != strings.TrimRight(string(want), "\n") {
			t.Errorf("the ConfigMap's dashboard differs from config/grafana's (%d bytes, want %d)", len(got), len(want))
		}
		return
	}
	t.Fatal("no dashboard ConfigMap with grafanaDashboard.enabled")
}
