package images

import (
	"archive/tar"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/openbao/operator/internal/wrapper"
)

func TestBuildIsDeterministicCachedAndRunsAsNonRoot(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "manager")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	first, err := Build(Operator(bin), filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := Build(Operator(bin), filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	if first.Ref != second.Ref || first.Cached || !second.Cached {
		t.Errorf("builds %+v then %+v: want the same reference, the second from the cache", first, second)
	}
	// Determinism: a build into another cache writes the image again, and
	// it must be the same image, byte for byte.
	time.Sleep(1100 * time.Millisecond) // a timestamp taken from the clock would now differ
	again, err := Build(Operator(bin), filepath.Join(dir, "other-cache"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Cached || digestOf(t, again.Tarball) != digestOf(t, first.Tarball) || again.Ref != first.Ref {
		t.Errorf("two builds without a cache: %+v (%s) and %+v (%s), want one image",
			first, digestOf(t, first.Tarball), again, digestOf(t, again.Tarball))
	}
	img, err := tarball.ImageFromPath(first.Tarball, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" || cfg.Config.Entrypoint[0] != "/manager" {
		t.Errorf("config user %q entrypoint %q, want 65532:65532 and /manager", cfg.Config.User, cfg.Config.Entrypoint)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/false\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	changed, err := Build(Operator(bin), filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	if changed.Ref == first.Ref {
		t.Errorf("a changed binary kept the reference %s", first.Ref)
	}
}

func digestOf(t *testing.T, tarballPath string) string {
	t.Helper()
	img, err := tarball.ImageFromPath(tarballPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(tarballPath)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s, file sha256:%x", d, sha256.Sum256(data))
}

func TestOpenBaoImageHasBaoAndOwnedVolumeDirs(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bao")
	if err := os.WriteFile(bin, []byte("bao"), 0o755); err != nil {
		t.Fatal(err)
	}
	built, err := Build(OpenBao(bin), dir)
	if err != nil {
		t.Fatal(err)
	}
	entries := layerEntries(t, built.Tarball)
	if h := entries["bin/bao"]; h == nil || h.Mode != 0o755 {
		t.Errorf("bin/bao entry %+v, want mode 0755", h)
	}
	if h := entries["openbao/data/"]; h == nil || h.Uid != NonRootUID {
		t.Errorf("openbao/data entry %+v, want owned by %d", h, NonRootUID)
	}
}

// layerEntries are the tar headers of the single layer of an image
// tarball, by name.
func layerEntries(t *testing.T, tarballPath string) map[string]*tar.Header {
	t.Helper()
	img, err := tarball.ImageFromPath(tarballPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, err %v; want one layer", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return entries
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[hdr.Name] = hdr
	}
}

// The wrapper image holds bao-wrapper and nothing else, runs as the
// non-root user, and its tag says which wrapper version it is; the
// operator's image no longer carries bao-wrapper.
func TestTheWrapperImageIsTaggedWithItsVersionAndHoldsOnlyTheWrapper(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bao-wrapper")
	if err := os.WriteFile(bin, []byte("wrapper"), 0o755); err != nil {
		t.Fatal(err)
	}
	built, err := Build(Wrapper(bin), dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := WrapperRepository + ":" + wrapper.Version + "-"; !strings.HasPrefix(built.Ref, want) {
		t.Errorf("wrapper image %s, want a tag starting %s", built.Ref, want)
	}
	entries := layerEntries(t, built.Tarball)
	if h := entries["bao-wrapper"]; len(entries) != 1 || h == nil || h.Mode != 0o755 {
		t.Errorf("wrapper image entries %v, want bao-wrapper (0755) alone", entries)
	}
	img, err := tarball.ImageFromPath(built.Tarball, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("wrapper image user %q, want 65532:65532", cfg.Config.User)
	}
	op, err := Build(Operator(bin), filepath.Join(dir, "operator"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := layerEntries(t, op.Tarball)["bao-wrapper"]; ok {
		t.Error("the operator image still carries bao-wrapper")
	}
}

func TestBuildPrunesEarlierTarballsOfTheSameRepository(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause")
	cache := filepath.Join(dir, "cache")
	var tarballs []string
	for _, content := range []string{"one", "two"} {
		if err := os.WriteFile(bin, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		built, err := Build(Pause(bin), cache)
		if err != nil {
			t.Fatal(err)
		}
		tarballs = append(tarballs, built.Tarball)
	}
	if _, err := os.Stat(tarballs[0]); !os.IsNotExist(err) {
		t.Errorf("first tarball %s still there after a rebuild (err %v)", tarballs[0], err)
	}
	if _, err := os.Stat(tarballs[1]); err != nil {
		t.Errorf("latest tarball: %v", err)
	}
}

// The next operator image of the upgrade tests is another build: the
// manager says it is OperatorNextVersion, and the image differs from the
// current one.
func TestTheNextOperatorIsStampedAsTheNextRelease(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	current, next := filepath.Join(dir, "manager"), filepath.Join(dir, "manager-next")
	if err := GoBuild(root, "./cmd/openbao-operator", current); err != nil {
		t.Fatal(err)
	}
	if err := GoBuildVersion(root, "./cmd/openbao-operator", next, OperatorNextVersion); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(next, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != OperatorNextVersion {
		t.Errorf("the next manager says %q, want %q", got, OperatorNextVersion)
	}
	a, err := Build(Operator(current), filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(Operator(next), filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Ref == b.Ref {
		t.Errorf("the current and next operators are the same image %s", a.Ref)
	}
}
