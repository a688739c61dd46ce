package helmcharts_test

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// What may differ between the chart's defaults and config/default, and why.
var (
	// Labels the installers put on every object: the chart's common labels
	// (openbao-operator.labels in _helpers.tpl) and kustomize's part-of,
	// which it puts on the CRDs too while the chart installs crds/ as
	// copied. Every other label is compared.
	installerLabels = []string{"app.kubernetes.io/name", "app.kubernetes.io/part-of",
		"app.kubernetes.io/managed-by", "app.kubernetes.io/version", "helm.sh/chart"}
	// Kustomize does not know these kinds are cluster-scoped and gives them
	// its namespace; the API server drops it.
	clusterScoped = []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
	// The chart spells out manager flags that config/manager leaves at
	// the manager's defaults (cmd/openbao-operator/manager.go).
	defaultFlags = []string{"--metrics-secure=true", "--webhook-port=9443", "--webhook-cert-managed=true"}
	// The Namespace is config/manager/namespace.yaml, applied before helm
	// install (the chart creates none); the metrics Service is a chart
	// value (metrics.service.enabled, on by default).
	onlyInConfig = []string{"Namespace/openbao-operator-system"}
	onlyInChart  = []string{"Service/openbao-operator-metrics"}
)

// TestOperatorChartInstallsWhatConfigDefaultDoes renders the chart with its
// defaults and the image config/manager names, and kustomize's
// config/default, and compares them object by object: the chart and
// config/ describe one installation, so any other difference is drift.
func TestOperatorChartInstallsWhatConfigDefaultDoes(t *testing.T) {
	c := loadOperatorChart(t)
	values := map[string]any{"image": map[string]any{"repository": "ghcr.io/openbao/openbao-operator", "tag": "latest"}}
	fromChart := chartObjects(t, c, renderOperatorChart(t, c, values))
	fromConfig := kustomizeObjects(t, "../config/default")
	for _, key := range onlyInConfig {
		if _, ok := fromConfig[key]; !ok {
			t.Errorf("config/default no longer renders %s: update onlyInConfig", key)
		}
		delete(fromConfig, key)
	}
	for _, key := range onlyInChart {
		if _, ok := fromChart[key]; !ok {
			t.Errorf("the chart no longer renders %s by default: update onlyInChart", key)
		}
		delete(fromChart, key)
	}
	if got, want := sortedKeys(fromChart), sortedKeys(fromConfig); !reflect.DeepEqual(got, want) {
		t.Fatalf("the chart renders\n  %s\nconfig/default renders\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for key, want := range fromConfig {
		got := fromChart[key]
		if !reflect.DeepEqual(got, want) {
			g, _ := yaml.Marshal(got)
			w, _ := yaml.Marshal(want)
			t.Errorf("%s differs.\nchart:\n%s\nconfig/default:\n%s", key, g, w)
		}
	}
}

// chartObjects are the rendered templates and the CRDs of crds/,
// normalized and keyed by kind and name.
func chartObjects(t *testing.T, c *chart.Chart, rendered []byte) map[string]map[string]any {
	t.Helper()
	docs := bytes.Split(rendered, []byte("\n---\n"))
	for _, crd := range c.CRDObjects() {
		docs = append(docs, crd.File.Data)
	}
	objs := map[string]map[string]any{}
	for _, doc := range docs {
		var obj map[string]any
		if err := yaml.Unmarshal(bytes.TrimPrefix(doc, []byte("---\n")), &obj); err != nil {
			t.Fatal(err)
		}
		addNormalized(t, objs, obj)
	}
	return objs
}

// kustomizeObjects builds a kustomization in process, as `kustomize build`
// does, normalized and keyed by kind and name.
func kustomizeObjects(t *testing.T, dir string) map[string]map[string]any {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]map[string]any{}
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		addNormalized(t, objs, obj)
	}
	return objs
}

// addNormalized removes what the installers differ in by design (see the
// variables above) and adds the object under its kind and name, which are
// unique within the installation.
func addNormalized(t *testing.T, objs map[string]map[string]any, obj map[string]any) {
	t.Helper()
	if len(obj) == 0 {
		return
	}
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	dropLabels(meta)
	if slices.Contains(clusterScoped, kind) {
		delete(meta, "namespace")
	}
	if kind == "Deployment" {
		normalizeDeployment(obj)
	}
	key := fmt.Sprintf("%s/%s", kind, meta["name"])
	if _, dup := objs[key]; dup {
		t.Fatalf("%s rendered twice", key)
	}
	objs[key] = obj
}

func normalizeDeployment(obj map[string]any) {
	spec, _ := obj["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	tmplMeta, _ := tmpl["metadata"].(map[string]any)
	dropLabels(tmplMeta)
	podSpec, _ := tmpl["spec"].(map[string]any)
	containers, _ := podSpec["containers"].([]any)
	for _, raw := range containers {
		ctr, _ := raw.(map[string]any)
		args, _ := ctr["args"].([]any)
		ctr["args"] = slices.DeleteFunc(slices.Clone(args), func(a any) bool {
			flag, _ := a.(string)
			return slices.Contains(defaultFlags, flag)
		})
	}
}

func dropLabels(meta map[string]any) {
	labels, _ := meta["labels"].(map[string]any)
	for _, l := range installerLabels {
		delete(labels, l)
	}
	if len(labels) == 0 {
		delete(meta, "labels")
	}
}

func sortedKeys(m map[string]map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestTheChartScrapesAsConfigPrometheusDoes: serviceMonitor.enabled renders
// what config/prometheus installs for kustomize (its Service, the
// scraper's ServiceAccount, token Secret and ClusterRoleBinding, the
// ServiceMonitor and its rule): one way to scrape the secure metrics.
func TestTheChartScrapesAsConfigPrometheusDoes(t *testing.T) {
	c := loadOperatorChart(t)
	fromChart := chartObjects(t, c, renderOperatorChart(t, c, map[string]any{"serviceMonitor": map[string]any{"enabled": true}}))
	fromConfig := kustomizeObjects(t, "../config/prometheus")
	if len(fromConfig) == 0 {
		t.Fatal("config/prometheus renders nothing")
	}
	for key, want := range fromConfig {
		got, ok := fromChart[key]
		if !ok {
			t.Errorf("the chart does not render %s", key)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			g, _ := yaml.Marshal(got)
			w, _ := yaml.Marshal(want)
			t.Errorf("%s differs.\nchart:\n%s\nconfig/prometheus:\n%s", key, g, w)
		}
	}
}
