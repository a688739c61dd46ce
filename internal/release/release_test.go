package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/mod/modfile"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmregistry "helm.sh/helm/v3/pkg/registry"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/internal/imageverify"
	"github.com/openbao/operator/test/cosigntest"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func newKeyPEM(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// TestReleaseToALoopbackRegistry runs a release twice into
// go-containerregistry's registry and checks what was pushed. It builds
// for linux/amd64 alone, whose compiled packages the other tiers share;
// the release tier (test/release) releases for both platforms and checks
// the index lists both.
func TestReleaseToALoopbackRegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and pushes two releases")
	}
	reg := cosigntest.New(t, "", "")
	openbao := reg.Push(t, "openbao/openbao", "2.4.0")
	key := newKeyPEM(t)
	opts := func(out string) Options {
		return Options{
			RepoRoot: repoRoot(t), AllowDirty: true, Version: "0.2.0", Registry: reg.Host + "/openbao",
			PlainHTTP: true, SigningKeyPEM: key, OpenBaoImage: reg.Host + "/openbao/openbao:2.4.0",
			OutDir: out, DownloadBaseURL: "https://example.test/dl/", Logf: t.Logf,
			// One plugin target: each cold cross-build costs minutes;
			// TestEachPluginTargetIsArchivedWithItsBinary covers the rest.
			Platforms: []string{"linux/amd64"}, PluginPlatforms: []string{"linux/amd64"},
		}
	}
	ctx := context.Background()
	first, err := Run(ctx, opts(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	o := opts(t.TempDir())
	second, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("release: %+v", second)

	t.Run("two runs give equal digests", func(t *testing.T) {
		first.PublicKey, second.PublicKey = "", ""
		if first != second {
			t.Fatalf("first run %+v\nsecond run %+v", first, second)
		}
		if second.OpenBao != openbao.String() {
			t.Errorf("OpenBao %s, want %s", second.OpenBao, openbao)
		}
	})
	pub, err := os.ReadFile(filepath.Join(o.OutDir, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	idx := index(t, second.Operator)
	amd64 := archImage(t, second.Operator, idx, "amd64")

	t.Run("the operator image is an index of the platforms asked for", func(t *testing.T) {
		if got := IndexPlatforms(idx); !slices.Equal(got, o.Platforms) {
			t.Fatalf("platforms %v, want %v", got, o.Platforms)
		}
	})
	t.Run("the image runs as 65532 and carries the OCI labels", func(t *testing.T) {
		cf, err := amd64.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Config.User != "65532:65532" {
			t.Errorf("user %q", cf.Config.User)
		}
		for k, want := range map[string]string{
			"org.opencontainers.image.version": "0.2.0", "org.opencontainers.image.source": SourceURL,
			"org.opencontainers.image.licenses": License,
		} {
			if got := cf.Config.Labels[k]; got != want {
				t.Errorf("label %s = %q, want %q", k, got, want)
			}
		}
		for _, k := range []string{"org.opencontainers.image.revision", "org.opencontainers.image.created", "org.opencontainers.image.title"} {
			if cf.Config.Labels[k] == "" {
				t.Errorf("label %s is empty", k)
			}
		}
	})
	t.Run("the manager in the image prints the version", func(t *testing.T) {
		if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
			t.Skip("runs the linux/amd64 binary")
		}
		bin := filepath.Join(t.TempDir(), "manager")
		if err := os.WriteFile(bin, imageFile(t, amd64, "manager"), 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "--version").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "0.2.0" {
			t.Fatalf("--version: %q, %v", out, err)
		}
	})
	t.Run("the SBOM referrer lists the linked modules of go.mod", func(t *testing.T) {
		sbom := sbomOf(t, second.Operator)
		want := goModVersion(t, "sigs.k8s.io/controller-runtime")
		var found bool
		for _, c := range sbom.Components {
			if c.Name == "sigs.k8s.io/controller-runtime" {
				found = c.Version == want
				t.Logf("%s %s", c.Name, c.Version)
			}
		}
		if !found {
			t.Fatalf("the SBOM's %d components have no sigs.k8s.io/controller-runtime %s", len(sbom.Components), want)
		}
	})
	t.Run("every artifact verifies with the released key and not with another", func(t *testing.T) {
		chart := strings.TrimPrefix(second.Chart, "oci://") + "@" + second.ChartDigest
		other := cosigntest.PublicPEM(t, cosigntest.NewKey(t))
		for _, ref := range []string{second.Operator, second.Wrapper, second.Bundle, second.Catalog, chart} {
			v := imageverify.NewCosign(0, nil)
			if _, err := v.Verify(ctx, imageverify.Request{Image: ref, Policy: imageverify.Policy{PublicKey: string(pub)}}); err != nil {
				t.Errorf("%s: %v", ref, err)
			}
			if _, err := v.Verify(ctx, imageverify.Request{Image: ref, Policy: imageverify.Policy{PublicKey: other}}); err == nil {
				t.Errorf("%s verified with another key", ref)
			}
		}
	})
	t.Run("the chart pulled back pins the operator by digest", func(t *testing.T) {
		client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP())
		if err != nil {
			t.Fatal(err)
		}
		pulled, err := client.Pull(strings.TrimPrefix(second.Chart, "oci://") + ":" + second.ChartVersion)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := loader.LoadArchive(strings.NewReader(string(pulled.Chart.Data)))
		if err != nil {
			t.Fatal(err)
		}
		if ch.Metadata.Version != "0.2.0" || ch.Metadata.AppVersion != "0.2.0" {
			t.Errorf("chart version %s, appVersion %s", ch.Metadata.Version, ch.Metadata.AppVersion)
		}
		wrapperValues, _ := ch.Values["wrapper"].(map[string]any)
		for what, c := range map[string]struct {
			values map[string]any
			ref    string
		}{
			"image":         {ch.Values["image"].(map[string]any), second.Operator},
			"wrapper.image": {wrapperValues["image"].(map[string]any), second.Wrapper},
		} {
			d, _ := name.NewDigest(c.ref, name.Insecure)
			if c.values["repository"] != d.Context().Name() || c.values["digest"] != d.DigestStr() {
				t.Errorf("%s values %v, want %s", what, c.values, c.ref)
			}
		}
	})
	t.Run("the bundle's CSV runs the operator by digest", func(t *testing.T) {
		var csv struct {
			Metadata struct {
				Name        string
				Annotations map[string]string
			}
			Spec struct {
				Version       string
				RelatedImages []struct{ Name, Image string } `json:"relatedImages"`
				Install       struct {
					Spec struct {
						Deployments []struct {
							Spec struct {
								Template struct {
									Spec struct {
										Containers []struct {
											Name, Image string
											Env         []struct{ Name, Value string }
										}
									}
								}
							}
						}
					}
				}
			}
		}
		if err := yaml.Unmarshal(imageFile(t, image(t, second.Bundle), "manifests/"+csvFile), &csv); err != nil {
			t.Fatal(err)
		}
		if csv.Metadata.Name != "openbao-operator.v0.2.0" || csv.Spec.Version != "0.2.0" || csv.Metadata.Annotations["containerImage"] != second.Operator {
			t.Errorf("CSV %s version %s containerImage %s", csv.Metadata.Name, csv.Spec.Version, csv.Metadata.Annotations["containerImage"])
		}
		deployments := csv.Spec.Install.Spec.Deployments
		if len(deployments) != 1 || deployments[0].Spec.Template.Spec.Containers[0].Image != second.Operator {
			t.Errorf("the Deployment runs %+v, want %s", deployments, second.Operator)
		}
		env := map[string]string{}
		for _, e := range deployments[0].Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if env["WRAPPER_IMAGE"] != second.Wrapper || env["RELATED_IMAGE_WRAPPER"] != second.Wrapper || env["RELATED_IMAGE_OPENBAO"] != second.OpenBao {
			t.Errorf("the manager's environment %v does not pin the wrapper %s and OpenBao %s", env, second.Wrapper, second.OpenBao)
		}
		related := map[string]string{}
		for _, r := range csv.Spec.RelatedImages {
			related[r.Name] = r.Image
		}
		want := map[string]string{"openbao-operator": second.Operator, "wrapper": second.Wrapper, "openbao": second.OpenBao}
		if !maps.Equal(related, want) {
			t.Errorf("relatedImages %v, want %v", related, want)
		}
	})
	t.Run("the kustomize overlay installs the operator by digest", func(t *testing.T) {
		kustomize := filepath.Join(repoRoot(t), "bin", "kustomize")
		if _, err := os.Stat(kustomize); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("no bin/kustomize under CI: make test builds it first")
			}
			t.Skip("SKIP: no bin/kustomize (bash test/tools/build.sh kustomize)")
		}
		out, err := exec.Command(kustomize, "build", filepath.Join(o.OutDir, "kustomize")).CombinedOutput()
		if err != nil {
			t.Fatalf("kustomize build: %v\n%s", err, out)
		}
		var found bool
		for _, doc := range strings.Split(string(out), "\n---\n") {
			var d struct {
				Kind     string
				Metadata struct{ Name string }
				Spec     struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Name, Image string
								Env         []struct{ Name, Value string }
							}
						}
					}
				}
			}
			if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
				t.Fatal(err)
			}
			if d.Kind != "Deployment" || d.Metadata.Name != "openbao-operator-controller-manager" {
				continue
			}
			found = true
			cs := d.Spec.Template.Spec.Containers
			if len(cs) != 1 || cs[0].Name != managerName || cs[0].Image != second.Operator {
				t.Fatalf("the manager Deployment's containers %+v, want %s alone", cs, second.Operator)
			}
			env := map[string]string{}
			for _, e := range cs[0].Env {
				env[e.Name] = e.Value
			}
			if env["WRAPPER_IMAGE"] != second.Wrapper {
				t.Errorf("WRAPPER_IMAGE %q, want %s", env["WRAPPER_IMAGE"], second.Wrapper)
			}
		}
		if !found {
			t.Fatal("the overlay has no manager Deployment")
		}
	})
	t.Run("the catalog serves the bundle by digest", func(t *testing.T) {
		cat := string(imageFile(t, image(t, second.Catalog), "configs/openbao-operator/catalog.yaml"))
		if !strings.Contains(cat, "image: "+second.Bundle+"\n") {
			t.Fatalf("the catalog does not name %s:\n%s", second.Bundle, cat)
		}
	})
	t.Run("the krew manifest's sha256s match the archives", func(t *testing.T) {
		checkKrew(t, o.OutDir)
	})
}

func checkKrew(t *testing.T, dir string) {
	data, err := os.ReadFile(filepath.Join(dir, KrewManifest))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Spec struct {
			Platforms []struct{ URI, SHA256 string }
		}
	}
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Spec.Platforms) != 1 {
		t.Fatalf("%d platforms in the krew manifest", len(m.Spec.Platforms))
	}
	for _, p := range m.Spec.Platforms {
		file := strings.TrimPrefix(p.URI, "https://example.test/dl/")
		archive, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(archive)
		if hex.EncodeToString(sum[:]) != p.SHA256 {
			t.Errorf("%s: sha256 %x, manifest says %s", file, sum, p.SHA256)
		}
	}
}

func index(t *testing.T, ref string) *v1.IndexManifest {
	t.Helper()
	d, err := name.NewDigest(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	ii, err := remote.Index(d)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func image(t *testing.T, ref string) v1.Image {
	t.Helper()
	d, err := name.NewDigest(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func archImage(t *testing.T, ref string, idx *v1.IndexManifest, arch string) v1.Image {
	t.Helper()
	d, _ := name.NewDigest(ref, name.Insecure)
	for _, m := range idx.Manifests {
		if m.Platform != nil && m.Platform.Architecture == arch {
			return image(t, d.Context().Digest(m.Digest.String()).String())
		}
	}
	t.Fatalf("%s has no %s image", ref, arch)
	return nil
}

// imageFile reads one file out of an image's filesystem.
func imageFile(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("no %s in the image", path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(hdr.Name, "/") == path {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}

type cycloneDX struct {
	Components []struct{ Name, Version string }
}

// sbomOf fetches the CycloneDX referrer of ref.
func sbomOf(t *testing.T, ref string) cycloneDX {
	t.Helper()
	d, _ := name.NewDigest(ref, name.Insecure)
	refs, err := remote.Referrers(d)
	if err != nil {
		t.Fatal(err)
	}
	m, err := refs.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, desc := range m.Manifests {
		// go-containerregistry's registry lists a referrer's config media
		// type as its artifactType (pre-1.1 OCI); the manifest says.
		art := image(t, d.Context().Digest(desc.Digest.String()).String())
		if am, err := art.Manifest(); err != nil || am.ArtifactType != SBOMArtifactType {
			continue
		}
		layers, err := art.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("SBOM artifact layers: %d, %v", len(layers), err)
		}
		rc, err := layers[0].Compressed()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		var out cycloneDX
		if err := json.NewDecoder(rc).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	t.Fatalf("%s has no %s referrer among %d", ref, SBOMArtifactType, len(m.Manifests))
	return cycloneDX{}
}

func goModVersion(t *testing.T, module string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version
		}
	}
	t.Fatalf("go.mod does not require %s", module)
	return ""
}

// TestEachPluginTargetIsArchivedWithItsBinary: every default target's
// archive (zip for Windows, tar.gz elsewhere) holds the binary alone,
// executable, dated at the commit, and packs the same bytes each time.
func TestEachPluginTargetIsArchivedWithItsBinary(t *testing.T) {
	epoch := time.Unix(1700000000, 0).UTC()
	data := []byte("a kubectl-openbao binary")
	for _, p := range PluginPlatforms {
		goos, goarch, _ := splitPlatform(p)
		bin := "kubectl-openbao"
		if goos == "windows" {
			bin += ".exe"
		}
		archive, file, err := pluginArchive(bin, data, goos, goarch, epoch)
		if err != nil {
			t.Fatal(err)
		}
		again, _, _ := pluginArchive(bin, data, goos, goarch, epoch)
		if !bytes.Equal(archive, again) {
			t.Errorf("%s: two packings differ", file)
		}
		name, mode, mtime, got := unpackOne(t, file, archive)
		if name != bin || !bytes.Equal(got, data) || !mtime.Equal(epoch) || (goos != "windows" && mode&0o111 == 0) {
			t.Errorf("%s holds %s (mode %o, dated %s)", file, name, mode, mtime)
		}
		if want := "kubectl-openbao_" + goos + "_" + goarch; !strings.HasPrefix(file, want+".") {
			t.Errorf("archive %s, want %s.*", file, want)
		}
	}
}

// unpackOne reads the one file of a tar.gz or zip archive.
func unpackOne(t *testing.T, file string, archive []byte) (string, os.FileMode, time.Time, []byte) {
	t.Helper()
	if strings.HasSuffix(file, ".zip") {
		zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
		if err != nil || len(zr.File) != 1 {
			t.Fatalf("%s: %v, %d files", file, err, len(zr.File))
		}
		rc, err := zr.File[0].Open()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		data, _ := io.ReadAll(rc)
		return zr.File[0].Name, zr.File[0].Mode(), zr.File[0].Modified.UTC(), data
	}
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(tr)
	if _, err := tr.Next(); err != io.EOF {
		t.Fatalf("%s holds more than one file", file)
	}
	return hdr.Name, os.FileMode(hdr.Mode), hdr.ModTime.UTC(), data
}
