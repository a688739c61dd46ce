package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/config/crd"
	"github.com/openbao/operator/internal/crdschema"
	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/internal/wrapper"
)

// runRender validates an OpenBaoCluster file as the API server would and
// prints the objects the operator would apply for it. A status in the file
// (for example initialized: true) is honoured, to show later stages.
func runRender(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	file := fs.String("f", "", "OpenBaoCluster manifest to render (required)")
	namespace := fs.String("namespace", "default", "namespace of the cluster when the manifest names none")
	opNamespace := fs.String("operator-namespace", "openbao-operator-system", "namespace the operator runs in")
	openshift := fs.Bool("openshift", false, "render for OpenShift's restricted SCC")
	wrapperImage := fs.String("wrapper-image", "", "the bao-wrapper image, as the manager's --wrapper-image (default: the chart's, ghcr.io/openbao/bao-wrapper:"+wrapper.Version+")")
	watchesFile := fs.String("watches-file", "", "watches.yaml to use instead of the embedded one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("render: -f FILE is required")
	}
	cluster, err := admitFile(*file, *namespace)
	if err != nil {
		return err
	}
	settings, err := loadWatches(*watchesFile)
	if err != nil {
		return err
	}
	cfg, err := values.ConfigFor(values.InputFor(cluster, &cluster.Status))
	if err != nil {
		return fmt.Errorf("config.hcl: %w", err)
	}
	op := values.Operator{Namespace: *opNamespace, WrapperImage: *wrapperImage, OpenShift: *openshift, OverrideValues: settings.OverrideValues}
	vals, err := values.Compute(values.InputFor(cluster, &cluster.Status), op, cfg)
	if err != nil {
		return err
	}
	r, err := render.New()
	if err != nil {
		return err
	}
	objs, err := r.Render(cluster.Namespace, cluster.Name, vals)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		fmt.Fprintf(out, "---\n%s", data)
	}
	return nil
}

// admitFile decodes the manifest, applies the CRD's defaults and checks its
// schema and CEL rules, naming each violated field.
func admitFile(path, namespace string) (*v1alpha1.OpenBaoCluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("%s is not YAML: %w", path, err)
	}
	if obj["apiVersion"] != v1alpha1.GroupVersion.String() || obj["kind"] != "OpenBaoCluster" {
		return nil, fmt.Errorf("%s: want apiVersion %s and kind OpenBaoCluster", path, v1alpha1.GroupVersion)
	}
	status := obj["status"]
	delete(obj, "status")
	schema, err := crdschema.Load(crd.OpenBaoClusters, v1alpha1.GroupVersion.Version)
	if err != nil {
		return nil, err
	}
	if errs := schema.Admit(context.Background(), obj, nil); len(errs) > 0 {
		var lines []string
		for _, e := range errs {
			lines = append(lines, "  "+e.Error())
		}
		return nil, fmt.Errorf("%s is not a valid OpenBaoCluster:\n%s", path, strings.Join(lines, "\n"))
	}
	if status != nil {
		obj["status"] = status
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var cluster v1alpha1.OpenBaoCluster
	if err := json.Unmarshal(raw, &cluster); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if cluster.Namespace == "" {
		cluster.Namespace = namespace
	}
	return &cluster, nil
}
