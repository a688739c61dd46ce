package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/internal/values"
)

// podTemplateFor renders the sample cluster with the chart values the
// manager started with args would compute, and returns its StatefulSet's
// pod template, encoded.
func podTemplateFor(t *testing.T, args ...string) []byte {
	t.Helper()
	t.Setenv("OPERATOR_IMAGE", "")
	t.Setenv("WRAPPER_IMAGE", "")
	f, _, err := parseManagerFlags(append([]string{"--operator-namespace=openbao-operator-system"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := admitFile(samplePath, "default")
	if err != nil {
		t.Fatal(err)
	}
	in := values.InputFor(cluster, &cluster.Status)
	cfg, err := values.ConfigFor(in)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := values.Compute(in, f.clusterOperator(false, nil), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := r.Render(cluster.Namespace, cluster.Name, vals)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if obj.GetKind() == "StatefulSet" {
			data, err := json.Marshal(obj.Object["spec"].(map[string]any)["template"])
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
	t.Fatal("no StatefulSet rendered")
	return nil
}

// An operator upgrade restarts no OpenBao server: two operator images with
// the same wrapper image give byte-identical pod templates (so the same
// StatefulSet revision); a new wrapper image is what changes them.
func TestAnOperatorUpgradeLeavesThePodTemplateAlone(t *testing.T) {
	const wrapperImage = "--wrapper-image=registry.example/bao-wrapper:1.1.1"
	before := podTemplateFor(t, "--operator-image=registry.example/openbao-operator:0.1.0", wrapperImage)
	after := podTemplateFor(t, "--operator-image=registry.example/openbao-operator:0.2.0@sha256:"+strings.Repeat("ab", 32), wrapperImage)
	if !bytes.Equal(before, after) {
		t.Errorf("a new operator image changed the OpenBao pod template:\n%s\n%s", before, after)
	}
	if !bytes.Contains(before, []byte(`"registry.example/bao-wrapper:1.1.1"`)) {
		t.Errorf("the pod template does not run the --wrapper-image: %s", before)
	}
	newWrapper := podTemplateFor(t, "--operator-image=registry.example/openbao-operator:0.1.0", "--wrapper-image=registry.example/bao-wrapper:1.0.1")
	if bytes.Equal(before, newWrapper) {
		t.Error("a new wrapper image left the pod template unchanged")
	}
}

func TestTheManagerRequiresTheWrapperImage(t *testing.T) {
	t.Setenv("WRAPPER_IMAGE", "")
	err := runManager([]string{"--operator-image=registry.example/openbao-operator:0.1.0"})
	if err == nil || !strings.Contains(err.Error(), "--wrapper-image") {
		t.Errorf("runManager without a wrapper image: %v, want an error naming --wrapper-image", err)
	}
	t.Setenv("WRAPPER_IMAGE", "registry.example/bao-wrapper:1.1.1")
	f, _, err := parseManagerFlags(nil)
	if err != nil || f.requireWrapperImage() != nil {
		t.Errorf("WRAPPER_IMAGE does not set --wrapper-image: %v, %+v", err, f.wrapperImage)
	}
}
