// Package olm installs a real OLM (v0: olm-operator, catalog-operator and
// packageserver, built from their modules by test/tools/build.sh) on the
// local node, and the operator through it: bundle/ as a bundle image,
// olm/catalog served by opm as a catalog image, olm/install.yaml; and an
// upgrade catalog whose channel adds a next version that replaces it.
//
// OLM's images are single-layer images of the static binaries, imported
// into containerd like the node's other images. Every image an OLM
// controller puts in a pod it creates (catalog pods, bundle-unpack Jobs) is
// named by digest: OLM pulls tag references with imagePullPolicy Always, and
// there is no registry to pull from.
package olm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/internal/images"
	"github.com/openbao/operator/internal/wrapper"
	"github.com/openbao/operator/test/localnode"
)

// Version is the OLM release test/tools/olm builds; its manifests come from
// the same module in Go's module cache.
const (
	Version = "v0.41.0"
	Module  = "github.com/operator-framework/operator-lifecycle-manager"
)

// Namespace is where OLM runs (its quickstart's choice) and where
// olm/install.yaml's CatalogSource lives.
const Namespace = "olm"

// Tools lists the binaries in ./bin this package needs (test/tools/build.sh).
var Tools = []string{"opm", "grpc_health_probe", "olm-operator", "olm-catalog-operator",
	"olm-package-server", "olm-copy-content", "olm-cpb"}

// Images are the references of the images OLM runs, pinned by digest.
type Images struct {
	OLM, OPM string
}

// Timings are the phases of OLM's install.
type Timings struct {
	Images, Import, CRDs, Operators, PackageServer time.Duration
}

func bin(c localnode.Config, name string) string { return filepath.Join(c.BinDir, name) }

// resolved follows ./bin links into the tool cache, so that an image's hash
// does not depend on where the link lives.
func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// CheckTools reports the first OLM tool missing from ./bin.
func CheckTools(c localnode.Config) error {
	for _, name := range Tools {
		if _, err := os.Stat(bin(c, name)); err != nil {
			return fmt.Errorf("%s missing in %s (run `bash test/tools/build.sh %s`)", name, c.BinDir, strings.Join(Tools, " "))
		}
	}
	return nil
}

// olmSpec is OLM's image: the binaries where OLM's manifests and controllers
// expect them, and a cp that bundle-unpack Jobs run from it.
func olmSpec(c localnode.Config, cp string) images.Spec {
	f := func(path, tool string) images.File {
		return images.File{Path: path, Source: resolved(bin(c, tool)), Mode: 0o755}
	}
	return images.Spec{
		Repository: "localhost/olm",
		TagPrefix:  Version + "-",
		Files: []images.File{
			f("/bin/olm", "olm-operator"), f("/bin/catalog", "olm-catalog-operator"),
			f("/bin/package-server", "olm-package-server"), f("/bin/copy-content", "olm-copy-content"),
			f("/bin/cpb", "olm-cpb"),
			{Path: "/bin/cp", Source: cp, Mode: 0o755},
		},
		Dirs:       []images.Dir{{Path: "/tmp", Mode: 0o1777}},
		User:       fmt.Sprintf("%d:%d", images.NonRootUID, images.NonRootUID),
		Entrypoint: []string{"/bin/olm"},
		Env:        []string{"PATH=/bin"},
	}
}

// opmSpec is opm's image; catalog-operator runs `opm alpha bundle extract`
// from it (by PATH) in every bundle-unpack Job. With a catalog directory it
// is a catalog image whose default command serves that catalog.
func opmSpec(c localnode.Config, repository string, catalogFiles []images.File) images.Spec {
	s := images.Spec{
		Repository: repository,
		Files: append([]images.File{
			{Path: "/bin/opm", Source: resolved(bin(c, "opm")), Mode: 0o755},
			{Path: "/bin/grpc_health_probe", Source: resolved(bin(c, "grpc_health_probe")), Mode: 0o755},
		}, catalogFiles...),
		Dirs:       []images.Dir{{Path: "/tmp", Mode: 0o1777}},
		User:       fmt.Sprintf("%d:%d", images.NonRootUID, images.NonRootUID),
		Entrypoint: []string{"/bin/opm"},
		Env:        []string{"PATH=/bin"},
	}
	if len(catalogFiles) > 0 {
		// No --cache-dir: with one, opm serve insists on a cache prebuilt
		// into the image (`opm serve --cache-only` in a Dockerfile RUN) and
		// exits on an empty one; without, it builds one under /tmp at start,
		// which for a catalog of a few bundles takes milliseconds.
		s.Cmd = []string{"serve", "/configs"}
		s.Labels = map[string]string{"operators.operatorframework.io.index.configs.v1": "/configs"}
	}
	return s
}

// bundleSpec is a registry+v1 bundle image: /manifests and /metadata, with
// the annotations as labels as operator-sdk's bundle.Dockerfile sets them.
func bundleSpec(repository, dir string) (images.Spec, error) {
	var files []images.File
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, images.File{Path: "/" + filepath.ToSlash(rel), Source: p, Mode: 0o644})
		return nil
	})
	if err != nil {
		return images.Spec{}, err
	}
	labels := map[string]string{}
	data, err := os.ReadFile(filepath.Join(dir, "metadata", "annotations.yaml"))
	if err != nil {
		return images.Spec{}, err
	}
	objs, err := localnode.DecodeManifests(data)
	if err != nil || len(objs) != 1 {
		return images.Spec{}, fmt.Errorf("read bundle annotations: %v", err)
	}
	ann, _, _ := unstructured.NestedStringMap(objs[0].Object, "annotations")
	for k, v := range ann {
		labels[k] = v
	}
	return images.Spec{
		Repository: repository,
		Files:      files,
		User:       fmt.Sprintf("%d:%d", images.NonRootUID, images.NonRootUID),
		Labels:     labels,
	}, nil
}

// BuildImages builds and imports OLM's image and the opm image, each pinned
// by digest.
func BuildImages(c localnode.Config, logf localnode.Logf) (Images, Timings, error) {
	var t Timings
	cp := filepath.Join(c.ImageCache, "bin", "cp")
	if err := images.GoBuild(c.RepoRoot, "./test/olm/cp", cp); err != nil {
		return Images{}, t, err
	}
	pinned, err := buildAndPin(c, map[string]images.Spec{
		"olm": olmSpec(c, cp),
		"opm": opmSpec(c, "localhost/opm", nil),
	}, &t, logf)
	if err != nil {
		return Images{}, t, err
	}
	return Images{OLM: pinned["olm"], OPM: pinned["opm"]}, t, nil
}

func buildAndPin(c localnode.Config, specs map[string]images.Spec, t *Timings, logf localnode.Logf) (map[string]string, error) {
	phase := time.Now()
	built := map[string]images.Built{}
	for role, spec := range specs {
		b, err := images.Build(spec, c.ImageCache)
		if err != nil {
			return nil, err
		}
		built[role] = b
	}
	t.Images += time.Since(phase)
	phase = time.Now()
	if err := localnode.ImportImages(c, built, logf); err != nil {
		return nil, err
	}
	pinned := map[string]string{}
	for role, b := range built {
		ref, err := localnode.DigestRef(c, b.Ref)
		if err != nil {
			return nil, err
		}
		pinned[role] = ref
	}
	t.Import += time.Since(phase)
	return pinned, nil
}

// copyTree copies a directory tree into a fresh dst, each file's content
// passed through transform.
func copyTree(src, dst string, transform func([]byte) ([]byte, error)) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(p)
		if err == nil {
			data, err = transform(data)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return os.WriteFile(to, data, 0o644)
	})
}

func dirFiles(dir, into string) ([]images.File, error) {
	var files []images.File
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, images.File{Path: into + "/" + filepath.ToSlash(rel), Source: p, Mode: 0o644})
		return nil
	})
	return files, err
}

func run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// ModuleDir is OLM's module source in Go's module cache (downloaded when
// missing), read through the wrapper module that pins it.
func ModuleDir(c localnode.Config) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", Module)
	cmd.Dir = filepath.Join(c.RepoRoot, "test", "tools", "olm")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", Module, err)
	}
	var m struct{ Dir, Version string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", err
	}
	if m.Version != Version {
		return "", fmt.Errorf("test/tools/olm pins %s %s, this package expects %s", Module, m.Version, Version)
	}
	return m.Dir, nil
}

// Manifests renders OLM's Helm chart (deploy/chart) with the values of its
// upstream release (deploy/upstream/values.yaml), as OLM's release script
// does with `helm template --include-crds`; the quickstart manifests in the
// module are years older than the code. The overrides: every OLM image is
// the local one, pulled IfNotPresent, catalog-operator's opm image is the
// local opm, and the community CatalogSource (quay.io) is left out.
func Manifests(c localnode.Config, imgs Images) (crds, install []*unstructured.Unstructured, err error) {
	dir, err := ModuleDir(c)
	if err != nil {
		return nil, nil, err
	}
	chrt, err := loader.LoadDir(filepath.Join(dir, "deploy", "chart"))
	if err != nil {
		return nil, nil, fmt.Errorf("load OLM chart: %w", err)
	}
	vals, err := chartutil.ReadValuesFile(filepath.Join(dir, "deploy", "upstream", "values.yaml"))
	if err != nil {
		return nil, nil, err
	}
	for _, component := range []string{"olm", "catalog", "package"} {
		image := map[string]any{"ref": imgs.OLM, "pullPolicy": string(corev1.PullIfNotPresent)}
		if err := unstructured.SetNestedMap(vals, image, component, "image"); err != nil {
			return nil, nil, err
		}
	}
	if err := unstructured.SetNestedField(vals, "--opmImage="+imgs.OPM, "catalog", "opmImageArgs"); err != nil {
		return nil, nil, err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: localnode.KubernetesVersion, Major: "1", Minor: "33"}
	rv, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{Name: "olm", Namespace: Namespace, IsInstall: true}, caps)
	if err != nil {
		return nil, nil, err
	}
	files, err := engine.Render(chrt, rv)
	if err != nil {
		return nil, nil, fmt.Errorf("render OLM chart: %w", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names) // the chart's files are numbered in install order
	for _, name := range names {
		if filepath.Base(name)[0] == '_' || !strings.HasSuffix(name, ".yaml") {
			continue
		}
		objs, err := localnode.DecodeManifests([]byte(files[name]))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, u := range objs {
			if u.GetKind() != "CatalogSource" {
				install = append(install, u)
			}
		}
	}
	for _, f := range chrt.CRDObjects() {
		objs, err := localnode.DecodeManifests(f.File.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f.Filename, err)
		}
		crds = append(crds, objs...)
	}
	return crds, install, nil
}

// Install applies OLM's CRDs, waits until they are established, applies its
// manifests and waits until olm-operator and catalog-operator are Ready
// and the packageserver CSV has Succeeded.
func Install(ctx context.Context, c localnode.Config, imgs Images, t *Timings, logf localnode.Logf) error {
	crds, install, err := Manifests(c, imgs)
	if err != nil {
		return err
	}
	cl, err := c.Client()
	if err != nil {
		return err
	}
	phase := time.Now()
	if err := localnode.Apply(ctx, cl, crds); err != nil {
		return err
	}
	for _, u := range crds {
		if err := waitEstablished(ctx, cl, u.GetName()); err != nil {
			return err
		}
	}
	t.CRDs = time.Since(phase)
	logf("%d OLM CRDs established in %s", len(crds), t.CRDs.Round(time.Millisecond))
	phase = time.Now()
	if err := localnode.Apply(ctx, cl, install); err != nil {
		return err
	}
	for _, name := range []string{"olm-operator", "catalog-operator"} {
		key := client.ObjectKey{Namespace: Namespace, Name: name}
		if err := localnode.WaitDeploymentReady(ctx, cl, key, 3*time.Minute); err != nil {
			return err
		}
	}
	t.Operators = time.Since(phase)
	logf("olm-operator and catalog-operator Ready %s after apply", t.Operators.Round(time.Millisecond))
	phase = time.Now()
	// packageserver serves only the packagemanifests API (kubectl get
	// packagemanifests); a Subscription does not need it, so its failure
	// is reported, not fatal.
	if err := WaitCSV(ctx, cl, Namespace, "packageserver", 30*time.Second); err != nil {
		logf("packageserver did not succeed (not needed for a Subscription): %v", err)
		return nil
	}
	t.PackageServer = time.Since(phase)
	logf("packageserver CSV Succeeded %s later", t.PackageServer.Round(time.Millisecond))
	return nil
}

// waitEstablished reads the CRD as unstructured: the node's client scheme
// has only the built-in kinds.
func waitEstablished(ctx context.Context, cl client.Client, name string) error {
	return localnode.Poll(ctx, time.Minute, "CRD "+name+" established", func(ctx context.Context) (bool, string, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			return false, err.Error(), nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, raw := range conds {
			cond, _ := raw.(map[string]any)
			if cond["type"] == "Established" {
				return cond["status"] == "True", fmt.Sprint(cond["message"]), nil
			}
		}
		return false, "no Established condition", nil
	})
}

// The kinds of OLM's objects the tests read, unstructured.
var (
	CSVGVK           = v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.ClusterServiceVersionKind)
	CatalogSourceGVK = v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.CatalogSourceKind)
	SubscriptionGVK  = v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.SubscriptionKind)
	InstallPlanGVK   = v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.InstallPlanKind)
)

// WaitCSV waits until a ClusterServiceVersion's phase is Succeeded.
func WaitCSV(ctx context.Context, cl client.Client, namespace, name string, timeout time.Duration) error {
	return localnode.Poll(ctx, timeout, "CSV "+namespace+"/"+name+" Succeeded", func(ctx context.Context) (bool, string, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(CSVGVK)
		if err := cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
			return false, err.Error(), nil
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		reason, _, _ := unstructured.NestedString(u.Object, "status", "reason")
		msg, _, _ := unstructured.NestedString(u.Object, "status", "message")
		return phase == "Succeeded", phase + " " + reason + ": " + msg, nil
	})
}

// OperatorImages are the images of the operator's own OLM install: the
// operator (as the CSV's Deployment runs it), bao-wrapper (its
// WRAPPER_IMAGE) and OpenBao; a catalog image
// serving olm/catalog with bundle/ as its bundle image; and an upgrade
// catalog whose channel goes on to NextVersion, a copy of the bundle that
// replaces it and runs OperatorNext, the operator stamped as NextVersion
// (another image, as a real release's). Bundles and catalogs are pinned by
// digest.
type OperatorImages struct {
	Operator, OperatorNext, Wrapper, OpenBao, Catalog, UpgradeCatalog string
}

// Upstream names the bundle and catalog use, replaced by local images.
const (
	upstreamOperatorImage = "ghcr.io/openbao/openbao-operator:0.1.0"
	upstreamWrapperImage  = "ghcr.io/openbao/bao-wrapper:" + wrapper.Version
	upstreamBundleImage   = "ghcr.io/openbao/openbao-operator-bundle:v0.1.0"
	upstreamCatalogImage  = "ghcr.io/openbao/openbao-operator-catalog:v0.1.0"
)

// CSV names of the shipped bundle and of the upgrade catalog's next one.
const (
	CurrentCSV  = "openbao-operator.v0.1.0"
	NextVersion = images.OperatorNextVersion
	NextCSV     = "openbao-operator.v" + NextVersion
)

// BuildOperatorImages builds and imports the operator, bao-wrapper and
// OpenBao images as the e2e tier does, then the bundle and catalog images.
func BuildOperatorImages(c localnode.Config, logf localnode.Logf) (OperatorImages, error) {
	var out OperatorImages
	built, err := localnode.BuildImages(c, localnode.ImageOperator, localnode.ImageOperatorNext, localnode.ImageWrapper, localnode.ImageOpenBao)
	if err != nil {
		return out, err
	}
	if err := localnode.ImportImages(c, built, logf); err != nil {
		return out, err
	}
	out.Operator, out.Wrapper, out.OpenBao = built[localnode.ImageOperator].Ref, built[localnode.ImageWrapper].Ref, built[localnode.ImageOpenBao].Ref
	out.OperatorNext = built[localnode.ImageOperatorNext].Ref
	work := filepath.Join(c.ImageCache, "olm-operator")
	current, next := filepath.Join(work, "bundle"), filepath.Join(work, "bundle-next")
	csv, err := os.ReadFile(filepath.Join(c.RepoRoot, "bundle", "manifests", "openbao-operator.clusterserviceversion.yaml"))
	if err != nil {
		return out, err
	}
	for _, upstream := range []string{upstreamOperatorImage, upstreamWrapperImage} {
		if !bytes.Contains(csv, []byte(upstream)) {
			return out, fmt.Errorf("bundle/'s CSV does not name %s, which the OLM tier replaces with the local image", upstream)
		}
	}
	if err := copyReplacing(filepath.Join(c.RepoRoot, "bundle"), current, upstreamOperatorImage, out.Operator, upstreamWrapperImage, out.Wrapper); err != nil {
		return out, err
	}
	if err := copyReplacing(current, next, out.Operator, out.OperatorNext); err != nil {
		return out, err
	}
	if err := makeNext(filepath.Join(next, "manifests", "openbao-operator.clusterserviceversion.yaml")); err != nil {
		return out, err
	}
	// Images of one repository prune each other's cached tarballs unless
	// their tag prefixes differ.
	var t Timings
	bundles := map[string]images.Spec{}
	for role, dir := range map[string]string{"current": current, "next": next} {
		spec, err := bundleSpec("localhost/openbao-operator-bundle", dir)
		if err != nil {
			return out, err
		}
		spec.TagPrefix = role + "-"
		bundles[role] = spec
	}
	refs, err := buildAndPin(c, bundles, &t, logf)
	if err != nil {
		return out, err
	}
	catalog, upgrade := filepath.Join(work, "catalog"), filepath.Join(work, "catalog-upgrade")
	if err := copyReplacing(filepath.Join(c.RepoRoot, "olm", "catalog"), catalog, upstreamBundleImage, refs["current"]); err != nil {
		return out, err
	}
	if err := upgradeCatalog(c, catalog, upgrade, next, refs["next"]); err != nil {
		return out, err
	}
	specs := map[string]images.Spec{}
	for role, dir := range map[string]string{"catalog": catalog, "upgrade": upgrade} {
		if _, err := run(bin(c, "opm"), "validate", dir); err != nil {
			return out, err
		}
		files, err := dirFiles(dir, "/configs")
		if err != nil {
			return out, err
		}
		spec := opmSpec(c, "localhost/openbao-operator-catalog", files)
		spec.TagPrefix = role + "-"
		specs[role] = spec
	}
	if refs, err = buildAndPin(c, specs, &t, logf); err != nil {
		return out, err
	}
	out.Catalog, out.UpgradeCatalog = refs["catalog"], refs["upgrade"]
	return out, nil
}

// makeNext turns the shipped CSV into NextCSV, which replaces it.
func makeNext(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var csv map[string]any
	if err := yaml.Unmarshal(data, &csv); err != nil {
		return err
	}
	u := unstructured.Unstructured{Object: csv}
	if u.GetName() != CurrentCSV {
		return fmt.Errorf("bundle/ holds %s, not %s", u.GetName(), CurrentCSV)
	}
	u.SetName(NextCSV)
	for field, value := range map[string]string{"version": NextVersion, "replaces": CurrentCSV} {
		if err := unstructured.SetNestedField(u.Object, value, "spec", field); err != nil {
			return err
		}
	}
	if data, err = yaml.Marshal(u.Object); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// upgradeCatalog copies the catalog and adds the next bundle to its
// channel, as the next release's catalog would.
func upgradeCatalog(c localnode.Config, src, dst, nextBundle, nextRef string) error {
	if err := copyReplacing(src, dst); err != nil {
		return err
	}
	path := filepath.Join(dst, "openbao-operator", "catalog.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	entry := []byte("entries:\n- name: " + CurrentCSV + "\n")
	if bytes.Count(data, entry) != 1 {
		return fmt.Errorf("olm/catalog's channel does not list just %s", CurrentCSV)
	}
	data = bytes.Replace(data, entry, append(entry, "- name: "+NextCSV+"\n  replaces: "+CurrentCSV+"\n"...), 1)
	rendered, err := run(bin(c, "opm"), "render", nextBundle, "--output=yaml", "--alpha-image-ref-template="+nextRef)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(append(data, "---\n"...), rendered...), 0o644)
}

// copyReplacing copies a directory tree, replacing each old string of the
// old, new pairs in oldNew with its new one in every file (a plain copy
// without pairs).
func copyReplacing(src, dst string, oldNew ...string) error {
	replacer := strings.NewReplacer(oldNew...)
	return copyTree(src, dst, func(data []byte) ([]byte, error) {
		if len(oldNew) == 0 {
			return data, nil
		}
		return []byte(replacer.Replace(string(data))), nil
	})
}

// InstallManifests reads olm/install.yaml with the catalog image replaced
// by the local one.
func InstallManifests(c localnode.Config, catalogRef string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(filepath.Join(c.RepoRoot, "olm", "install.yaml"))
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(data, []byte(upstreamCatalogImage)) {
		return nil, fmt.Errorf("olm/install.yaml does not name %s", upstreamCatalogImage)
	}
	return localnode.DecodeManifests(bytes.ReplaceAll(data, []byte(upstreamCatalogImage), []byte(catalogRef)))
}

// WaitSubscription waits until a Subscription has installed csv, that CSV
// (the original, not OLM's copy of one from another namespace) has
// Succeeded, and the InstallPlan behind it is Complete, logging each change
// of Progress on the way. A CSV Succeeds while its plan may still be
// Installing, and a plan that runs after the CSV is deleted, as an
// uninstall does, may create it again.
func WaitSubscription(ctx context.Context, cl client.Client, namespace, sub, csv string, timeout time.Duration, logf localnode.Logf) error {
	start, last := time.Now(), ""
	return localnode.Poll(ctx, timeout, "Subscription "+namespace+"/"+sub+" installs "+csv, func(ctx context.Context) (bool, string, error) {
		p := Progress(ctx, cl, Namespace, "openbao-operator", namespace, sub)
		if p != last {
			logf("+%s\n  %s", time.Since(start).Round(time.Second), p)
			last = p
		}
		s := get(ctx, cl, SubscriptionGVK, namespace, sub)
		if s == nil || nested(s, "status", "installedCSV") != csv {
			return false, p, nil
		}
		u := get(ctx, cl, CSVGVK, namespace, csv)
		if u == nil {
			return false, p, nil
		}
		if from, copied := u.GetLabels()[v1alpha1.CopiedLabelKey]; copied {
			return false, fmt.Sprintf("%s; the CSV in %s is OLM's copy from %s", p, namespace, from), nil
		}
		plan := get(ctx, cl, InstallPlanGVK, namespace, nested(s, "status", "installPlanRef", "name"))
		return nested(u, "status", "phase") == "Succeeded" && nested(plan, "status", "phase") == "Complete", p, nil
	})
}

// CSVCopies names the namespaces that hold the CSV name of namespace: its
// own, and those OLM copied it into (labelled with the original's
// namespace).
func CSVCopies(ctx context.Context, cl client.Client, namespace, name string) ([]string, error) {
	var csvs unstructured.UnstructuredList
	csvs.SetGroupVersionKind(CSVGVK.GroupVersion().WithKind("ClusterServiceVersionList"))
	if err := cl.List(ctx, &csvs); err != nil {
		return nil, err
	}
	var in []string
	for _, c := range csvs.Items {
		if c.GetName() == name && (c.GetNamespace() == namespace || c.GetLabels()[v1alpha1.CopiedLabelKey] == namespace) {
			in = append(in, c.GetNamespace())
		}
	}
	return in, nil
}

// WaitCSVGone waits until a deleted CSV is gone, and every copy OLM made of
// it, which OLM removes after the original.
func WaitCSVGone(ctx context.Context, cl client.Client, namespace, name string, timeout time.Duration) error {
	return localnode.Poll(ctx, timeout, "CSV "+namespace+"/"+name+" and its copies gone", func(ctx context.Context) (bool, string, error) {
		in, err := CSVCopies(ctx, cl, namespace, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(in) == 0, fmt.Sprintf("still in %v", in), nil
	})
}

// get reads one OLM object, or nil if it cannot.
func get(ctx context.Context, cl client.Client, gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	if name == "" {
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		return nil
	}
	return u
}

// nested is the string at path in u, empty if u is nil or has none.
func nested(u *unstructured.Unstructured, path ...string) string {
	if u == nil {
		return ""
	}
	s, _, _ := unstructured.NestedString(u.Object, path...)
	return s
}

// Progress is one observation of an OLM install: the CatalogSource's
// connection, the Subscription's state and InstallPlan, the InstallPlan's
// phase and the CSV's phase, each with its message.
func Progress(ctx context.Context, cl client.Client, csNamespace, csName, namespace, sub string) string {
	str := func(u *unstructured.Unstructured, path ...string) string {
		if u == nil {
			return "-"
		}
		return nested(u, path...)
	}
	var parts []string
	cs := get(ctx, cl, CatalogSourceGVK, csNamespace, csName)
	parts = append(parts, fmt.Sprintf("CatalogSource %s %s", str(cs, "status", "connectionState", "lastObservedState"), str(cs, "status", "message")))
	s := get(ctx, cl, SubscriptionGVK, namespace, sub)
	parts = append(parts, fmt.Sprintf("Subscription state=%s currentCSV=%s installPlan=%s conds=[%s]", str(s, "status", "state"),
		str(s, "status", "currentCSV"), str(s, "status", "installPlanRef", "name"), conditions(s)))
	if ip := str(s, "status", "installPlanRef", "name"); ip != "" && ip != "-" {
		p := get(ctx, cl, InstallPlanGVK, namespace, ip)
		approved := "-"
		if p != nil {
			a, _, _ := unstructured.NestedBool(p.Object, "spec", "approved")
			approved = fmt.Sprint(a)
		}
		parts = append(parts, fmt.Sprintf("InstallPlan %s phase=%s approved=%s conds=[%s] bundleLookups=[%s]", ip, str(p, "status", "phase"), approved,
			conditions(p), bundleLookups(p)))
	}
	if name := str(s, "status", "currentCSV"); name != "" && name != "-" {
		csv := get(ctx, cl, CSVGVK, namespace, name)
		parts = append(parts, fmt.Sprintf("CSV %s phase=%s reason=%s message=%s", name, str(csv, "status", "phase"),
			str(csv, "status", "reason"), str(csv, "status", "message")))
	}
	return strings.Join(parts, "\n  ")
}

func conditions(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []string
	for _, raw := range conds {
		c, _ := raw.(map[string]any)
		out = append(out, fmt.Sprintf("%v=%v %v %v", c["type"], c["status"], c["reason"], c["message"]))
	}
	return strings.Join(out, "; ")
}

func bundleLookups(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	bls, _, _ := unstructured.NestedSlice(u.Object, "status", "bundleLookups")
	var out []string
	for _, raw := range bls {
		b, _ := raw.(map[string]any)
		out = append(out, fmt.Sprintf("%v conds=%v", b["path"], b["conditions"]))
	}
	return strings.Join(out, "; ")
}
