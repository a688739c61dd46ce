package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

const samplePath = "../../config/samples/openbao_v1alpha1_openbaocluster.yaml"

// writeManifest writes a manifest into a temporary directory.
func writeManifest(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// decodeAll decodes every YAML document runRender printed.
func decodeAll(t *testing.T, out []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("output does not decode: %v", err)
		}
		if len(obj) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: obj})
		}
	}
}

func renderArgs(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	t.Setenv("OPENBAO_IMAGE_REGISTRY", "")
	var out bytes.Buffer
	if err := runRender(args, &out); err != nil {
		t.Fatalf("runRender %v: %v", args, err)
	}
	if !strings.HasPrefix(out.String(), "---\n") {
		t.Errorf("output does not start with a document separator")
	}
	return decodeAll(t, out.Bytes())
}

func statefulSetNamed(t *testing.T, objs []*unstructured.Unstructured, name string) *appsv1.StatefulSet {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() == "StatefulSet" && obj.GetName() == name {
			var sts appsv1.StatefulSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &sts, true); err != nil {
				t.Fatal(err)
			}
			return &sts
		}
	}
	t.Fatalf("no StatefulSet %s among %d objects", name, len(objs))
	return nil
}

func TestRunRenderTheSample(t *testing.T) {
	objs := renderArgs(t, "-f", samplePath, "-namespace", "vault")
	sts := statefulSetNamed(t, objs, "openbao")
	if sts.Namespace != "vault" {
		t.Errorf("namespace %q, want the -namespace flag's vault", sts.Namespace)
	}
	if *sts.Spec.Replicas != 1 {
		t.Errorf("replicas %d before initialization, want 1", *sts.Spec.Replicas)
	}
	kinds := map[string]bool{}
	for _, obj := range objs {
		kinds[obj.GetKind()] = true
	}
	for _, k := range []string{"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Service", "PodDisruptionBudget", "NetworkPolicy"} {
		if !kinds[k] {
			t.Errorf("no %s rendered", k)
		}
	}
}

func TestRunRenderHonoursStatusInTheFile(t *testing.T) {
	data, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	path := writeManifest(t, string(data)+"status:\n  initialized: true\n")
	if got := *statefulSetNamed(t, renderArgs(t, "-f", path), "openbao").Spec.Replicas; got != 3 {
		t.Errorf("replicas %d with status.initialized true, want spec.replicas 3", got)
	}
}

func TestRunRenderOpenShiftFlag(t *testing.T) {
	sts := statefulSetNamed(t, renderArgs(t, "-f", samplePath, "-openshift"), "openbao")
	if psc := sts.Spec.Template.Spec.SecurityContext; psc.RunAsUser != nil || psc.FSGroup != nil {
		t.Errorf("-openshift rendered IDs: %+v", psc)
	}
}

func TestRunRenderRejects(t *testing.T) {
	cases := map[string]struct {
		manifest string // written to a file; "" to pass no -f
		args     []string
		want     []string
	}{
		"an invalid manifest, naming every field": {
			manifest: "apiVersion: openbao.org/v1alpha1\nkind: OpenBaoCluster\nmetadata: {name: bad}\n" +
				"spec:\n  version: 2.4.0\n  replicas: 20\n  config:\n    listener: {}\n",
			want: []string{"spec.replicas", "spec.config.listener", "not a valid OpenBaoCluster"},
		},
		"an owned key in spec.values": {
			manifest: "apiVersion: openbao.org/v1alpha1\nkind: OpenBaoCluster\nmetadata: {name: bad}\n" +
				"spec:\n  version: 2.4.0\n  values:\n    image: {tag: latest}\n",
			want: []string{"spec.values.image"},
		},
		"a file of another kind": {
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n",
			want:     []string{"want apiVersion openbao.org/v1alpha1 and kind OpenBaoCluster"},
		},
		"an OpenBaoCluster of another version": {
			manifest: "apiVersion: openbao.org/v1\nkind: OpenBaoCluster\nmetadata: {name: x}\nspec: {version: 2.4.0}\n",
			want:     []string{"want apiVersion openbao.org/v1alpha1"},
		},
		"a file that is not YAML": {manifest: "{", want: []string{"not YAML"}},
		"no -f flag":              {want: []string{"-f FILE is required"}},
		"a missing file":          {args: []string{"-f", "/nonexistent/cluster.yaml"}, want: []string{"read /nonexistent/cluster.yaml"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			args := tc.args
			if tc.manifest != "" {
				args = append(args, "-f", writeManifest(t, tc.manifest))
			}
			var out bytes.Buffer
			err := runRender(args, &out)
			if err == nil {
				t.Fatalf("runRender succeeded:\n%s", out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if out.Len() != 0 {
				t.Errorf("printed output despite the error:\n%s", out.String())
			}
		})
	}
}

func TestRunRenderRejectsOwnedOverrideInWatchesFile(t *testing.T) {
	watches := filepath.Join(t.TempDir(), "watches.yaml")
	text := "- {group: openbao.org, version: v1alpha1, kind: OpenBaoCluster, chart: helm-charts/openbao-cluster, overrideValues: {replicas: 5}}\n"
	if err := os.WriteFile(watches, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runRender([]string{"-f", samplePath, "-watches-file", watches}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "overrideValues.replicas") {
		t.Fatalf("error %v, want one naming overrideValues.replicas", err)
	}
}
