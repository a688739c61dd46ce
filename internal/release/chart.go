package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmregistry "helm.sh/helm/v3/pkg/registry"

	"github.com/google/go-containerregistry/pkg/name"
)

const chartDir = "helm-charts/openbao-operator"

// chartImages are the chart's image values the release pins, by their path
// in values.yaml. A missing optional one is skipped (the chart leaves
// OpenBao's default image to the operator today).
type chartImage struct {
	path     string
	ref      func(Result) string
	required bool
}

var chartImages = []chartImage{
	{"image", func(r Result) string { return r.Operator }, true},
	{"wrapper.image", func(r Result) string { return r.Wrapper }, true},
	{"openbao.image", func(r Result) string { return r.OpenBao }, false},
}

// pushChart packages the install chart at Version, with its images pinned
// by digest, writes it into OutDir and pushes it as an OCI artifact with
// helm's registry client. The archive is written here, not by
// chartutil.Save, whose tar entries carry the current time: sorted entries
// and the commit's time make equal charts equal bytes.
func (r *release) pushChart(context.Context) error {
	ch, err := loader.LoadDir(filepath.Join(r.o.RepoRoot, chartDir))
	if err != nil {
		return fmt.Errorf("load %s: %w", chartDir, err)
	}
	files := map[string][]byte{}
	for _, f := range ch.Raw {
		files[f.Name] = f.Data
	}
	if files["Chart.yaml"], err = setChartVersion(files["Chart.yaml"], r.o.Version); err != nil {
		return err
	}
	if files["values.yaml"], err = pinValues(files["values.yaml"], r.res); err != nil {
		return err
	}
	data, err := chartArchive(ch.Name(), files, r.epoch)
	if err != nil {
		return err
	}
	if _, err := loader.LoadArchive(bytes.NewReader(data)); err != nil {
		return fmt.Errorf("the packaged chart does not load: %w", err)
	}
	path := filepath.Join(r.o.OutDir, fmt.Sprintf("%s-%s.tgz", ch.Name(), r.o.Version))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	var opts []helmregistry.ClientOption
	if r.o.PlainHTTP {
		opts = append(opts, helmregistry.ClientOptPlainHTTP())
	}
	client, err := helmregistry.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("helm registry client: %w", err)
	}
	ref := r.ref(ChartRepo) + ":" + r.o.Version
	pushed, err := client.Push(data, ref, helmregistry.PushOptCreationTime(r.epoch.Format(time.RFC3339)))
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	r.res.Chart = "oci://" + r.ref(ChartRepo)
	r.res.ChartVersion = r.o.Version
	r.res.ChartDigest = pushed.Manifest.Digest
	repo, err := r.reg.repo(r.ref(ChartRepo))
	if err != nil {
		return err
	}
	r.signed = append(r.signed, repo.Digest(pushed.Manifest.Digest))
	r.o.Logf("pushed chart %s:%s@%s", r.res.Chart, r.o.Version, pushed.Manifest.Digest)
	return nil
}

var chartVersionLine = regexp.MustCompile(`(?m)^(version|appVersion):.*$`)

// setChartVersion sets Chart.yaml's version and appVersion.
func setChartVersion(data []byte, version string) ([]byte, error) {
	n := 0
	out := chartVersionLine.ReplaceAllFunc(data, func(line []byte) []byte {
		n++
		key, _, _ := strings.Cut(string(line), ":")
		return fmt.Appendf(nil, "%s: %q", key, version)
	})
	if n != 2 {
		return nil, fmt.Errorf("Chart.yaml has %d version/appVersion lines, not 2", n)
	}
	return out, nil
}

// pinValues sets each of chartImages that values.yaml has to its digest,
// keeping the file's comments: an image value is a map (repository, tag,
// digest) or one string.
func pinValues(data []byte, res Result) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) != 1 {
		return nil, fmt.Errorf("parse values.yaml: %v", err)
	}
	for _, ci := range chartImages {
		node := lookup(doc.Content[0], strings.Split(ci.path, "."))
		if node == nil {
			if ci.required {
				return nil, fmt.Errorf("values.yaml has no %s to pin", ci.path)
			}
			continue
		}
		if err := pinImage(node, ci.ref(res)); err != nil {
			return nil, fmt.Errorf("values.yaml %s: %w", ci.path, err)
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("encode values.yaml: %w", err)
	}
	return buf.Bytes(), nil
}

func lookup(n *yaml.Node, path []string) *yaml.Node {
	for _, key := range path {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// pinImage sets an image value to ref (repo@sha256:...).
func pinImage(n *yaml.Node, ref string) error {
	d, err := name.NewDigest(ref, name.Insecure)
	if err != nil {
		return fmt.Errorf("pin %q: %w", ref, err)
	}
	switch n.Kind {
	case yaml.ScalarNode:
		n.Value, n.Tag, n.Style = ref, "!!str", 0
		return nil
	case yaml.MappingNode:
		set := map[string]string{"repository": d.Context().Name(), "digest": d.DigestStr(), "tag": ""}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if v, ok := set[n.Content[i].Value]; ok {
				n.Content[i+1].Value, n.Content[i+1].Tag, n.Content[i+1].Style = v, "!!str", yaml.DoubleQuotedStyle
				delete(set, n.Content[i].Value)
			}
		}
		if _, missing := set["digest"]; missing {
			return fmt.Errorf("an image map without a digest key cannot be pinned")
		}
		return nil
	}
	return fmt.Errorf("not a string or a map")
}

// chartArchive is the chart as `helm package` lays it out (every file under
// <name>/), gzip with no name or time in its header, entries sorted and
// dated at the commit.
func chartArchive(chartName string, files map[string][]byte, mtime time.Time) ([]byte, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, n := range names {
		hdr := &tar.Header{Name: chartName + "/" + n, Mode: 0o644, Size: int64(len(files[n])), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("archive %s: %w", n, err)
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, fmt.Errorf("archive %s: %w", n, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("archive the chart: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("compress the chart: %w", err)
	}
	return buf.Bytes(), nil
}

// writeKustomize writes OutDir/kustomize/kustomization.yaml: config/default
// with the operator's and the wrapper's image by digest.
func (r *release) writeKustomize(context.Context) error {
	dir := filepath.Join(r.o.OutDir, "kustomize")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	base, err := filepath.Rel(dir, filepath.Join(r.o.RepoRoot, "config", "default"))
	if err != nil {
		return fmt.Errorf("locate config/default: %w", err)
	}
	op, err := name.NewDigest(r.res.Operator, name.Insecure)
	if err != nil {
		return err
	}
	// The names are those config/manager gives the images.
	text := fmt.Sprintf(`# The operator %s, every image by digest. Generated by make release.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: ghcr.io/openbao/openbao-operator
  newName: %s
  digest: %s
# The manager hands the wrapper's image to OpenBao pods (WRAPPER_IMAGE).
patches:
- patch: |-
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: openbao-operator-controller-manager
      namespace: openbao-operator-system
    spec:
      template:
        spec:
          containers:
          - name: manager
            env:
            - name: WRAPPER_IMAGE
              value: %s
`, r.o.Version, filepath.ToSlash(base), op.Context().Name(), op.DigestStr(), r.res.Wrapper)
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(text), 0o644)
}
