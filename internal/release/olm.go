package release

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/internal/images"
)

// Names in the shipped bundle and catalog that a release replaces.
const (
	csvFile        = "openbao-operator.clusterserviceversion.yaml"
	packageName    = "openbao-operator"
	shippedCSV     = "openbao-operator.v0.1.0"
	shippedVersion = "0.1.0"
	shippedBundle  = "ghcr.io/openbao/openbao-operator-bundle:v0.1.0"
	managerName    = "manager"
)

func csvName(version string) string { return packageName + ".v" + version }

// linuxAMD64 is the platform of the single-platform images: the bundle
// (files only) and the catalog (bin/opm is built for this machine).
var linuxAMD64 = v1.Platform{OS: "linux", Architecture: "amd64"}

// buildBundle copies bundle/ with the CSV rewritten for the release and
// pushes it as a registry+v1 bundle image.
func (r *release) buildBundle(context.Context) error {
	dir := filepath.Join(r.work, "bundle")
	if err := copyTree(filepath.Join(r.o.RepoRoot, "bundle"), dir); err != nil {
		return err
	}
	path := filepath.Join(dir, "manifests", csvFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the CSV: %w", err)
	}
	if data, err = rewriteCSV(data, r.o.Version, r.res.Operator, r.res.Wrapper, r.res.OpenBao); err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write the CSV: %w", err)
	}
	labels, err := bundleLabels(filepath.Join(dir, "metadata", "annotations.yaml"))
	if err != nil {
		return err
	}
	for k, v := range r.labels("OpenBao operator OLM bundle", r.o.Version) {
		labels[k] = v
	}
	files, err := treeFiles(dir, "/")
	if err != nil {
		return err
	}
	spec := images.Spec{Files: files, Labels: labels, User: fmt.Sprintf("%d:%d", images.NonRootUID, images.NonRootUID)}
	d, err := r.pushSingle(BundleRepo, "v"+r.o.Version, spec)
	if err != nil {
		return err
	}
	r.res.Bundle = d
	return nil
}

// rewriteCSV makes the shipped CSV this release's: its name and version,
// the operator's image by digest in the Deployment and the containerImage
// annotation; the wrapper and OpenBao by digest in the manager's
// environment (WRAPPER_IMAGE, RELATED_IMAGE_*) and, with the operator, in
// relatedImages. The first release in the catalog replaces nothing; olm.skipRange
// lets any earlier version upgrade straight to it.
func rewriteCSV(data []byte, version, operator, wrapperRef, openbao string) ([]byte, error) {
	var csv unstructured.Unstructured
	if err := yaml.Unmarshal(data, &csv.Object); err != nil {
		return nil, fmt.Errorf("parse the CSV: %w", err)
	}
	if csv.GetName() != shippedCSV {
		return nil, fmt.Errorf("bundle/ holds the CSV %s, not %s", csv.GetName(), shippedCSV)
	}
	csv.SetName(csvName(version))
	ann := csv.GetAnnotations()
	ann["containerImage"] = operator
	ann["olm.skipRange"] = "<" + version
	csv.SetAnnotations(ann)
	_ = unstructured.SetNestedField(csv.Object, version, "spec", "version")
	unstructured.RemoveNestedField(csv.Object, "spec", "replaces")
	related := []any{
		map[string]any{"name": "openbao-operator", "image": operator},
		map[string]any{"name": "openbao", "image": openbao},
		map[string]any{"name": "wrapper", "image": wrapperRef},
	}
	envs := map[string]string{"WRAPPER_IMAGE": wrapperRef, "RELATED_IMAGE_WRAPPER": wrapperRef, "RELATED_IMAGE_OPENBAO": openbao}
	_ = unstructured.SetNestedSlice(csv.Object, related, "spec", "relatedImages")
	deployments, _, _ := unstructured.NestedSlice(csv.Object, "spec", "install", "spec", "deployments")
	pinned := 0
	for _, d := range deployments {
		containers, _, _ := unstructured.NestedSlice(d.(map[string]any), "spec", "template", "spec", "containers")
		for _, c := range containers {
			c := c.(map[string]any)
			if c["name"] != managerName {
				continue
			}
			c["image"] = operator
			pinned++
			env, _ := c["env"].([]any)
			for _, e := range env {
				e := e.(map[string]any)
				if v, ok := envs[e["name"].(string)]; ok {
					e["value"] = v
				}
			}
		}
		_ = unstructured.SetNestedSlice(d.(map[string]any), containers, "spec", "template", "spec", "containers")
	}
	if pinned == 0 {
		return nil, fmt.Errorf("the CSV's Deployment has no %q container to pin", managerName)
	}
	_ = unstructured.SetNestedSlice(csv.Object, deployments, "spec", "install", "spec", "deployments")
	out, err := yaml.Marshal(csv.Object)
	if err != nil {
		return nil, fmt.Errorf("encode the CSV: %w", err)
	}
	return out, nil
}

// bundleLabels are the bundle's annotations, which a bundle image also
// carries as labels (as bundle.Dockerfile sets them).
func bundleLabels(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the bundle annotations: %w", err)
	}
	var doc struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Annotations) == 0 {
		return nil, fmt.Errorf("read the bundle annotations %s: %v", path, err)
	}
	return doc.Annotations, nil
}

// buildCatalog writes the file-based catalog with this release's bundle by
// digest, checks it with opm validate, and pushes a catalog image serving
// it. opm here is built for linux/amd64, so the catalog image is that
// platform alone.
func (r *release) buildCatalog(ctx context.Context) error {
	src := filepath.Join(r.o.RepoRoot, "olm", "catalog", packageName, "catalog.yaml")
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read the catalog: %w", err)
	}
	if data, err = rewriteCatalog(data, r.o.Version, r.res.Bundle); err != nil {
		return err
	}
	dir := filepath.Join(r.work, "catalog")
	if err := os.MkdirAll(filepath.Join(dir, packageName), 0o755); err != nil {
		return fmt.Errorf("create the catalog: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, packageName, "catalog.yaml"), data, 0o644); err != nil {
		return fmt.Errorf("write the catalog: %w", err)
	}
	if _, err := run(ctx, r.o.RepoRoot, nil, r.tool("opm"), "validate", dir); err != nil {
		return err
	}
	files, err := treeFiles(dir, "/configs")
	if err != nil {
		return err
	}
	opm, _ := filepath.EvalSymlinks(r.tool("opm"))
	probe, _ := filepath.EvalSymlinks(r.tool("grpc_health_probe"))
	labels := r.labels("OpenBao operator OLM catalog", r.o.Version)
	labels["operators.operatorframework.io.index.configs.v1"] = "/configs"
	spec := images.Spec{
		Files: append([]images.File{
			{Path: "/bin/opm", Source: opm, Mode: 0o755},
			{Path: "/bin/grpc_health_probe", Source: probe, Mode: 0o755},
		}, files...),
		Dirs:       []images.Dir{{Path: "/tmp", Mode: 0o1777}},
		User:       fmt.Sprintf("%d:%d", images.NonRootUID, images.NonRootUID),
		Entrypoint: []string{"/bin/opm"},
		// No --cache-dir: opm builds its cache under /tmp at start (see
		// test/olm's catalog image).
		Cmd:    []string{"serve", "/configs"},
		Env:    []string{"PATH=/bin"},
		Labels: labels,
	}
	d, err := r.pushSingle(CatalogRepo, "v"+r.o.Version, spec)
	if err != nil {
		return err
	}
	r.res.Catalog = d
	return nil
}

// rewriteCatalog renames the shipped bundle to this release's, pinned by
// digest. Each shipped name must be there, so a catalog that changed shape
// fails here, not in a cluster.
func rewriteCatalog(data []byte, version, bundle string) ([]byte, error) {
	for _, rep := range []struct{ old, new string }{
		{"image: " + shippedBundle + "\n", "image: " + bundle + "\n"},
		{"name: " + shippedCSV + "\n", "name: " + csvName(version) + "\n"},
		{"version: " + shippedVersion + "\n", "version: " + version + "\n"},
	} {
		if !bytes.Contains(data, []byte(rep.old)) {
			return nil, fmt.Errorf("olm/catalog has no %q", strings.TrimSpace(rep.old))
		}
		data = bytes.ReplaceAll(data, []byte(rep.old), []byte(rep.new))
	}
	return data, nil
}

// pushSingle builds spec for linux/amd64 and pushes it under repo:tag.
func (r *release) pushSingle(repo, tag string, spec images.Spec) (string, error) {
	img, err := images.Image(spec, linuxAMD64, r.epoch)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", repo, err)
	}
	d, err := r.reg.pushImage(r.ref(repo)+":"+tag, img)
	if err != nil {
		return "", err
	}
	r.signed = append(r.signed, d)
	r.o.Logf("pushed %s", d)
	return d.String(), nil
}

// copyTree copies the regular files under src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
		return os.WriteFile(out, data, 0o644)
	})
}

// treeFiles lists the regular files under dir as image files under into,
// sorted by path.
func treeFiles(dir, into string) ([]images.File, error) {
	var files []images.File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, images.File{Path: filepath.ToSlash(filepath.Join(into, rel)), Source: p, Mode: 0o644})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}
