// Package render turns chart values into the Kubernetes objects of one
// OpenBao cluster, using Helm's template engine in process on the embedded
// openbao-cluster chart. It does no I/O beyond reading the embedded chart.
package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	helmcharts "github.com/openbao/operator/helm-charts"
	"github.com/openbao/operator/internal/children"
)

// KubeVersion is the Kubernetes version the chart is rendered for. It is
// pinned so that rendering does not depend on the library's build.
var KubeVersion = chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}

// Renderer renders the embedded chart. It is safe for concurrent use and
// keeps the most recent renders, keyed by a hash of their inputs.
type Renderer struct {
	chart *chart.Chart
	caps  *chartutil.Capabilities

	mu    sync.Mutex
	cache map[string][]*unstructured.Unstructured
	order []string
}

// cacheSize bounds the render cache: a few entries per cluster suffice,
// since only a spec or status change alters the values.
const cacheSize = 256

// New loads the embedded openbao-cluster chart.
func New() (*Renderer, error) {
	c, err := loadChart(helmcharts.OpenBaoCluster, helmcharts.OpenBaoClusterDir)
	if err != nil {
		return nil, err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = KubeVersion
	return &Renderer{chart: c, caps: caps, cache: map[string][]*unstructured.Unstructured{}}, nil
}

func loadChart(fsys fs.FS, dir string) (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: strings.TrimPrefix(p, dir+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read embedded chart %s: %w", dir, err)
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("load embedded chart %s: %w", dir, err)
	}
	return c, nil
}

// Hash identifies a render: the same namespace, name and values always give
// the same objects.
func Hash(namespace, name string, values map[string]any) (string, error) {
	data, err := json.Marshal(values) // map keys are sorted: deterministic
	if err != nil {
		return "", fmt.Errorf("encode values: %w", err)
	}
	sum := sha256.New()
	fmt.Fprintf(sum, "%s\x00%s\x00", namespace, name)
	sum.Write(data)
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// Render returns the chart's objects for the values, sorted in apply order.
// Callers receive copies they may change.
func (r *Renderer) Render(namespace, name string, values map[string]any) ([]*unstructured.Unstructured, error) {
	key, err := Hash(namespace, name, values)
	if err != nil {
		return nil, err
	}
	if objs, ok := r.cached(key); ok {
		return objs, nil
	}
	objs, err := r.render(namespace, name, values)
	if err != nil {
		return nil, err
	}
	r.remember(key, objs)
	return deepCopy(objs), nil
}

func (r *Renderer) render(namespace, name string, values map[string]any) ([]*unstructured.Unstructured, error) {
	// The engine and schema validation may change maps they are given.
	vals, err := chartutil.ToRenderValues(r.chart, copyValues(values),
		chartutil.ReleaseOptions{Name: name, Namespace: namespace, IsInstall: true}, r.caps)
	if err != nil {
		return nil, &ValuesError{Err: err}
	}
	files, err := engine.Engine{Strict: true}.Render(r.chart, vals)
	if err != nil {
		return nil, fmt.Errorf("render chart: %w", err)
	}
	var objs []*unstructured.Unstructured
	for _, file := range sortedTemplates(files) {
		docs, err := decodeDocuments(files[file])
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", file, err)
		}
		objs = append(objs, docs...)
	}
	if err := sortForApply(objs); err != nil {
		return nil, err
	}
	return objs, nil
}

func sortedTemplates(files map[string]string) []string {
	var names []string
	for name := range files {
		if path.Ext(name) == ".yaml" && !strings.HasSuffix(name, "NOTES.txt") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func decodeDocuments(text string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(text), 4096)
	var objs []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(obj) == 0 {
			continue // an empty document, e.g. a disabled template
		}
		objs = append(objs, &unstructured.Unstructured{Object: obj})
	}
}

// sortForApply orders objects by kind rank, then name, and refuses kinds the
// operator does not know how to prune.
func sortForApply(objs []*unstructured.Unstructured) error {
	rank := map[schema.GroupVersionKind]int{}
	for i, gvk := range children.Rendered() {
		rank[gvk] = i
	}
	for _, obj := range objs {
		if _, ok := rank[obj.GroupVersionKind()]; !ok {
			return fmt.Errorf("chart rendered %s %q, a kind missing from the apply order", obj.GroupVersionKind(), obj.GetName())
		}
	}
	sort.SliceStable(objs, func(i, j int) bool {
		ri, rj := rank[objs[i].GroupVersionKind()], rank[objs[j].GroupVersionKind()]
		if ri != rj {
			return ri < rj
		}
		return objs[i].GetName() < objs[j].GetName()
	})
	return nil
}

func (r *Renderer) cached(key string) ([]*unstructured.Unstructured, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	objs, ok := r.cache[key]
	if !ok {
		return nil, false
	}
	return deepCopy(objs), true
}

func (r *Renderer) remember(key string, objs []*unstructured.Unstructured) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.cache[key]; ok {
		return
	}
	if len(r.order) >= cacheSize {
		delete(r.cache, r.order[0])
		r.order = r.order[1:]
	}
	r.cache[key] = objs
	r.order = append(r.order, key)
}

func deepCopy(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, obj := range objs {
		out[i] = obj.DeepCopy()
	}
	return out
}

// copyValues deep-copies a JSON-shaped value tree.
func copyValues(values map[string]any) map[string]any {
	data, err := json.Marshal(values)
	if err != nil {
		return values
	}
	var out map[string]any
	if json.Unmarshal(data, &out) != nil {
		return values
	}
	return out
}

// ValuesError is returned when the values do not match the chart's
// values.schema.json. Its message names the offending value.
type ValuesError struct{ Err error }

func (e *ValuesError) Error() string { return "chart values are invalid: " + e.Err.Error() }
func (e *ValuesError) Unwrap() error { return e.Err }
