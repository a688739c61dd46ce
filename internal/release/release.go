// Package release builds, pushes and signs every artifact of an operator
// release from a clean tree: the operator and bao-wrapper images (multi-arch
// image indexes), an SBOM attached to the operator image, the OLM bundle and
// catalog images, the install chart as an OCI artifact, the kubectl plugin
// archives with a krew manifest, and a kustomize overlay, every reference
// pinned by digest. Equal inputs give equal digests: the only timestamp is
// the commit's (SOURCE_DATE_EPOCH), builds are -trimpath with the VCS stamp
// off, and layers and archives are written in a fixed order.
package release

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Options are a release's inputs.
type Options struct {
	RepoRoot   string   // the clone; a dirty git tree is refused unless AllowDirty
	AllowDirty bool     // tests only
	Version    string   // semver without v, e.g. "0.2.0"
	Registry   string   // host[:port][/path] every artifact is pushed under
	PlainHTTP  bool     // a loopback test registry
	Platforms  []string // default linux/amd64, linux/arm64
	// PluginPlatforms are the kubectl plugin's targets; default
	// PluginPlatforms. Tests name one: each cold cross-build of the
	// plugin costs minutes.
	PluginPlatforms []string
	SigningKeyPEM   []byte // PEM private key (ECDSA P-256); cosign signatures by digest
	OpenBaoImage    string // the default OpenBao image, a tag or digest ref; pinned by digest
	OutDir          string // dist/<version>: release.json, cosign.pub, SBOMs, plugin archives, krew manifest, kustomize overlay
	// DownloadBaseURL is where the plugin archives will be published; the
	// krew manifest's URIs start with it. Empty: the GitHub release of
	// Version.
	DownloadBaseURL string
	Logf            func(string, ...any)
}

// Result names what a release pushed; it is also written as
// OutDir/release.json.
type Result struct {
	Version                            string
	Operator, Wrapper, Bundle, Catalog string // repo@sha256:... (Operator and Wrapper are image indexes)
	Chart                              string // oci://<Registry>/charts/openbao-operator
	ChartVersion, ChartDigest          string
	OpenBao                            string // repo@sha256:...
	PublicKey                          string // path of cosign.pub
}

// Repository names under Options.Registry.
const (
	OperatorRepo = "openbao-operator"
	WrapperRepo  = "bao-wrapper"
	BundleRepo   = "openbao-operator-bundle"
	CatalogRepo  = "openbao-operator-catalog"
	ChartRepo    = "charts/openbao-operator"
)

// SourceURL is the project's repository, in the images' labels and the krew
// manifest.
const SourceURL = "https://github.com/openbao/operator"

var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)

// release is one run: the options, the tree it builds from, and how it
// reaches the registry.
type release struct {
	o      Options
	commit string
	epoch  time.Time // the commit's time: every timestamp in the release
	work   string    // a temporary directory: the binaries, the bundle and catalog trees
	reg    registry
	res    Result
	// operator is the pushed operator image, which the SBOM describes.
	operator builtIndex
	signer   signature.SignerVerifier
	// signed are the digests to sign, in the order they were pushed.
	signed []name.Digest
}

// Run builds and pushes a release. Steps run in order; each pins what the
// next refers to by digest.
func Run(ctx context.Context, o Options) (Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Result{}, err
	}
	commit, epoch, err := inspectTree(ctx, o.RepoRoot, o.AllowDirty)
	if err != nil {
		return Result{}, err
	}
	// The binaries are built outside OutDir, which holds what is published;
	// Go's build cache makes building them again cheap.
	work, err := os.MkdirTemp("", "openbao-release-")
	if err != nil {
		return Result{}, fmt.Errorf("create a build directory: %w", err)
	}
	defer os.RemoveAll(work)
	r := &release{o: o, commit: commit, epoch: epoch, work: work,
		reg: newRegistry(ctx, o.PlainHTTP), res: Result{Version: o.Version}}
	o.Logf("release %s of commit %s (SOURCE_DATE_EPOCH %d) to %s", o.Version, commit[:12], epoch.Unix(), o.Registry)
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"tools", r.tools},
		{"signing key", r.writePublicKey},
		{"openbao image", r.resolveOpenBao},
		{"images", r.buildImages},
		{"sbom", r.attachSBOMs},
		{"bundle", r.buildBundle},
		{"catalog", r.buildCatalog},
		{"chart", r.pushChart},
		{"kubectl plugin", r.buildPlugin},
		{"kustomize overlay", r.writeKustomize},
		{"signatures", r.signAll},
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.fn(ctx); err != nil {
			return Result{}, fmt.Errorf("release %s: %s: %w", o.Version, s.name, err)
		}
		o.Logf("%s done in %s", s.name, time.Since(start).Round(time.Millisecond))
	}
	data, err := json.MarshalIndent(r.res, "", "  ")
	if err != nil {
		return Result{}, fmt.Errorf("encode release.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(o.OutDir, "release.json"), append(data, '\n'), 0o644); err != nil {
		return Result{}, fmt.Errorf("write release.json: %w", err)
	}
	return r.res, nil
}

// withDefaults fills in the defaults and refuses bad input, naming the
// option and what it allows.
func (o Options) withDefaults() (Options, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if len(o.Platforms) == 0 {
		o.Platforms = []string{"linux/amd64", "linux/arm64"}
	}
	if len(o.PluginPlatforms) == 0 {
		o.PluginPlatforms = PluginPlatforms
	}
	for _, p := range append(slices.Clone(o.Platforms), o.PluginPlatforms...) {
		if _, _, err := splitPlatform(p); err != nil {
			return o, err
		}
	}
	switch {
	case o.RepoRoot == "":
		return o, fmt.Errorf("RepoRoot is empty: set it to the clone to release")
	case !semver.MatchString(o.Version):
		return o, fmt.Errorf("VERSION %q is not a semantic version without a leading v (for example 0.2.0)", o.Version)
	case o.Registry == "":
		return o, fmt.Errorf("REGISTRY is empty: set it to host[:port][/path] to push under")
	case len(o.SigningKeyPEM) == 0:
		return o, fmt.Errorf("no signing key: set SIGNING_KEY_FILE (or COSIGN_KEY) to a PEM ECDSA P-256 private key")
	case o.OpenBaoImage == "":
		return o, fmt.Errorf("OPENBAO_IMAGE is empty: set it to the default OpenBao image (a tag or a digest)")
	}
	// Absolute: git, go list and the relative paths of the kustomize
	// overlay are worked out from it.
	root, err := filepath.Abs(o.RepoRoot)
	if err != nil {
		return o, fmt.Errorf("RepoRoot %q: %w", o.RepoRoot, err)
	}
	o.RepoRoot = root
	if _, err := name.NewRepository(o.Registry+"/"+OperatorRepo, name.StrictValidation); err != nil {
		return o, fmt.Errorf("REGISTRY %q does not make a repository name: %w", o.Registry, err)
	}
	if o.OutDir == "" {
		o.OutDir = filepath.Join(o.RepoRoot, "dist", o.Version)
	}
	if o.DownloadBaseURL == "" {
		o.DownloadBaseURL = SourceURL + "/releases/download/v" + o.Version
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return o, fmt.Errorf("create OutDir: %w", err)
	}
	return o, nil
}

// ref is repo under the release's registry.
func (r *release) ref(repo string) string { return r.o.Registry + "/" + repo }
