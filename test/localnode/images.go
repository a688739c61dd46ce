package localnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/openbao/operator/internal/images"
)

// Image roles.
const (
	ImageOperator = "operator"
	// ImageOperatorNext is the operator stamped as the next release
	// (images.OperatorNextVersion): another image, for operator upgrades.
	ImageOperatorNext = "operator-next"
	// ImageWrapper is bao-wrapper, which OpenBao pods run as PID 1.
	ImageWrapper = "wrapper"
	ImageOpenBao = "openbao"
	// ImageOpenBaoNext is the same OpenBao stamped as the next release.
	ImageOpenBaoNext = "openbao-next"
	ImagePause       = "pause"
	ImageCoreDNS     = "coredns"
)

// BuildImages compiles the operator and the sandbox binary (a relink when
// only the code changed) and writes the image tarballs that are not cached
// yet. The returned map holds each role's image reference and tarball.
func BuildImages(c Config, roles ...string) (map[string]images.Built, error) {
	binDir := filepath.Join(c.ImageCache, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", binDir, err)
	}
	out := map[string]images.Built{}
	for _, role := range roles {
		spec, err := imageSpec(c, role, binDir)
		if err != nil {
			return nil, err
		}
		built, err := images.Build(spec, c.ImageCache)
		if err != nil {
			return nil, err
		}
		out[role] = built
	}
	return out, nil
}

func imageSpec(c Config, role, binDir string) (images.Spec, error) {
	switch role {
	case ImageOperator:
		manager := filepath.Join(binDir, "manager")
		return images.Operator(manager), images.GoBuild(c.RepoRoot, "./cmd/openbao-operator", manager)
	case ImageOperatorNext:
		manager := filepath.Join(binDir, "manager-next")
		spec := images.Operator(manager)
		// Its own tag prefix: the cache prunes older tarballs by prefix,
		// and this image is kept beside the current one.
		spec.TagPrefix = images.OperatorNextVersion + "-"
		return spec, images.GoBuildVersion(c.RepoRoot, "./cmd/openbao-operator", manager, images.OperatorNextVersion)
	case ImageWrapper:
		bin := filepath.Join(binDir, "bao-wrapper")
		return images.Wrapper(bin), images.GoBuild(c.RepoRoot, "./cmd/bao-wrapper", bin)
	case ImagePause:
		bin := filepath.Join(binDir, "pause")
		return images.Pause(bin), images.GoBuild(c.RepoRoot, "./internal/images/pause", bin)
	case ImageOpenBao:
		return images.OpenBao(resolved(c.bin("bao"))), nil
	case ImageOpenBaoNext:
		return images.OpenBaoAt(resolved(c.bin("bao-next")), images.OpenBaoNextVersion), nil
	case ImageCoreDNS:
		return images.CoreDNS(resolved(c.bin("coredns"))), nil
	}
	return images.Spec{}, fmt.Errorf("unknown image role %q", role)
}

// resolved follows ./bin links into the tool cache so that the image hash
// does not depend on where the link lives.
func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// ImportImages loads the tarballs containerd does not have yet into its
// k8s.io namespace, where kubelet finds them.
func ImportImages(c Config, built map[string]images.Built, logf func(string, ...any)) error {
	have, err := containerdImages(c)
	if err != nil {
		return err
	}
	for _, role := range sortedKeysOfBuilt(built) {
		b := built[role]
		if have[b.Ref] {
			continue
		}
		start := time.Now()
		out, err := exec.Command("ctr", "--address", c.containerdSock(), "--namespace", "k8s.io",
			"images", "import", b.Tarball).CombinedOutput()
		if err != nil {
			return fmt.Errorf("import %s: %w\n%s", b.Ref, err, out)
		}
		logf("imported %s in %s", b.Ref, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func containerdImages(c Config) (map[string]bool, error) {
	out, err := exec.Command("ctr", "--address", c.containerdSock(), "--namespace", "k8s.io", "images", "list", "-q").Output()
	if err != nil {
		return nil, fmt.Errorf("list containerd images: %w", err)
	}
	have := map[string]bool{}
	for _, ref := range strings.Fields(string(out)) {
		have[ref] = true
	}
	return have, nil
}

func sortedKeysOfBuilt(m map[string]images.Built) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return sortedStrings(keys)
}

// DigestRef returns repository@digest for an image containerd holds and
// gives the image that name too, so that kubelet finds it by digest. OLM
// starts catalog and bundle-unpack pods with imagePullPolicy Always unless
// the image is named by digest; with no registry to pull from, the images
// those pods run must be named so.
func DigestRef(c Config, ref string) (string, error) {
	ctr := func(args ...string) ([]byte, error) {
		args = append([]string{"--address", c.containerdSock(), "--namespace", "k8s.io", "images"}, args...)
		out, err := exec.Command("ctr", args...).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("ctr %s: %w\n%s", strings.Join(args[4:], " "), err, out)
		}
		return out, nil
	}
	out, err := ctr("list", "name=="+ref)
	if err != nil {
		return "", err
	}
	// REF TYPE DIGEST SIZE PLATFORMS LABELS, after a header line.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || len(strings.Fields(lines[1])) < 3 {
		return "", fmt.Errorf("containerd has no image %s:\n%s", ref, out)
	}
	digest := strings.Fields(lines[1])[2]
	repo := ref
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		repo = ref[:i]
	}
	pinned := repo + "@" + digest
	if _, err := ctr("tag", "--force", ref, pinned); err != nil {
		return "", err
	}
	return pinned, nil
}

// LocalRegistry is the registry host of every image the node runs
// (localhost/<name>): the platform image policy the operator is installed
// with on the node allows it alone.
const LocalRegistry = "localhost"
