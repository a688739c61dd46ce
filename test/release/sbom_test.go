package release_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/mod/modfile"

	"github.com/openbao/operator/internal/release"
)

// checkSBOM finds the SBOM attached to the released operator image in the
// registry (an OCI referrer, or cosign's sha256-<hex>.sbom tag, of the
// index or of a platform's image) and checks that it lists every module
// the manager links at the version go.mod selects, controller-runtime at
// the version go.mod requires among them.
func checkSBOM(t *testing.T, res release.Result) {
	t.Helper()
	docs := attachedSBOMs(t, res.Operator)
	if len(docs) == 0 {
		t.Fatalf("no SBOM attached to %s (neither a referrer nor a .sbom tag)", res.Operator)
	}
	want := append(managerModules(t), goModRequirement(t, "sigs.k8s.io/controller-runtime"))
	for ref, doc := range docs {
		missing, err := missingModules(doc, want)
		if err != nil {
			t.Errorf("SBOM %s: %v", ref, err)
			continue
		}
		if len(missing) > 0 {
			t.Errorf("SBOM %s lacks %d of the %d modules the manager links: %v", ref, len(missing), len(want), missing)
		}
	}
	logf("the SBOM of %s lists the %d modules the manager links", res.Operator, len(want))
}

// attachedSBOMs are the SBOM documents attached to image (repo@digest) or
// to one of its platforms' images, by where they were found.
func attachedSBOMs(t *testing.T, image string) map[string][]byte {
	t.Helper()
	d, err := name.NewDigest(image)
	if err != nil {
		t.Fatal(err)
	}
	subjects := []name.Digest{d}
	if idx, err := remote.Index(d); err == nil {
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range m.Manifests {
			subjects = append(subjects, d.Context().Digest(c.Digest.String()))
		}
	}
	docs := map[string][]byte{}
	for _, s := range subjects {
		refs, err := remote.Referrers(s)
		if err != nil {
			t.Fatalf("referrers of %s: %v", s, err)
		}
		rm, err := refs.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rm.Manifests {
			addSBOMLayers(t, docs, s.Context().Digest(r.Digest.String()))
		}
		h, _ := v1.NewHash(s.DigestStr())
		tag := s.Context().Tag(h.Algorithm + "-" + h.Hex + ".sbom")
		if _, err := remote.Head(tag); err == nil {
			addSBOMLayers(t, docs, tag)
		}
	}
	return docs
}

func isSBOM(mediaType string) bool {
	return strings.Contains(mediaType, "cyclonedx") || strings.Contains(mediaType, "spdx")
}

// addSBOMLayers reads the SBOM layers of an artifact: those whose media
// type, or the artifact's type, is CycloneDX or SPDX (a referrer's
// descriptor may carry the config's type instead, so the manifest is read).
func addSBOMLayers(t *testing.T, docs map[string][]byte, ref name.Reference) {
	t.Helper()
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("read artifact %s: %v", ref, err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range m.Layers {
		if !isSBOM(m.ArtifactType) && !isSBOM(string(l.MediaType)) {
			continue
		}
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := layer.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		docs[fmt.Sprintf("%s layer %d", ref, i)] = data
	}
}

// managerModules are the modules the manager binary links, path@version,
// as go list resolves them for linux (the versions go.mod selects).
func managerModules(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}@{{.Version}}{{end}}{{end}}", "./cmd/openbao-operator")
	cmd.Dir = node.RepoRoot
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list the manager's modules: %v", err)
	}
	var mods []string
	for _, l := range strings.Fields(string(out)) {
		if !slices.Contains(mods, l) {
			mods = append(mods, l)
		}
	}
	if len(mods) < 10 {
		t.Fatalf("the manager links only %d modules: %v", len(mods), mods)
	}
	return mods
}

// goModRequirement is path@version as go.mod requires it.
func goModRequirement(t *testing.T, path string) string {
	t.Helper()
	file := filepath.Join(node.RepoRoot, "go.mod")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax(file, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == path {
			return r.Mod.Path + "@" + r.Mod.Version
		}
	}
	t.Fatalf("go.mod does not require %s", path)
	return ""
}

// sbomDoc holds what both SBOM formats say of packages: CycloneDX
// components (nested, with a purl) and SPDX packages.
type sbomDoc struct {
	Components []component `json:"components"`
	Metadata   struct {
		Component *component `json:"component"`
	} `json:"metadata"`
	Packages []struct {
		Name        string `json:"name"`
		VersionInfo string `json:"versionInfo"`
	} `json:"packages"`
}

type component struct {
	Name       string      `json:"name"`
	Version    string      `json:"version"`
	PURL       string      `json:"purl"`
	Components []component `json:"components"`
}

// missingModules lists the modules of want (path@version) an SBOM does not
// name, by name and version or by a pkg:golang purl.
func missingModules(doc []byte, want []string) ([]string, error) {
	var d sbomDoc
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("not a JSON SBOM: %w", err)
	}
	have := map[string]bool{}
	var walk func([]component)
	walk = func(cs []component) {
		for _, c := range cs {
			have[c.Name+"@"+c.Version] = true
			if p, ok := strings.CutPrefix(c.PURL, "pkg:golang/"); ok {
				p, _, _ = strings.Cut(p, "?")
				have[p] = true
			}
			walk(c.Components)
		}
	}
	walk(d.Components)
	if d.Metadata.Component != nil {
		walk([]component{*d.Metadata.Component})
	}
	for _, p := range d.Packages {
		have[p.Name+"@"+p.VersionInfo] = true
	}
	if len(have) == 0 {
		return nil, fmt.Errorf("lists no components or packages")
	}
	var missing []string
	for _, m := range want {
		if !have[m] {
			missing = append(missing, m)
		}
	}
	return missing, nil
}
