// Package release builds, pushes and signs every artifact of an operator
// release from a clean tree: the operator and bao-wrapper images (multi-arch
// image indexes), an SBOM attached to the operator image, the OLM bundle and
// catalog images, the install chart as an OCI artifact, the kubectl plugin
// archives with a krew manifest, and a kustomize overlay, every reference
// pinned by digest. Equal inputs give equal digests: timestamps come from the
// commit (SOURCE_DATE_EPOCH), builds are -trimpath, layers are written in a
// fixed order.
package release

import (
	"context"
	"errors"
)

// Options are a release's inputs.
type Options struct {
	RepoRoot      string   // the clone; a dirty git tree is refused unless AllowDirty
	AllowDirty    bool     // tests only
	Version       string   // semver without v, e.g. "0.2.0"
	Registry      string   // host[:port][/path] every artifact is pushed under
	PlainHTTP     bool     // a loopback test registry
	Platforms     []string // default linux/amd64, linux/arm64
	SigningKeyPEM []byte   // PEM private key (ECDSA P-256); cosign signatures by digest
	OpenBaoImage  string   // the default OpenBao image, a tag or digest ref; pinned by digest
	OutDir        string   // dist/<version>: release.json, cosign.pub, SBOMs, plugin archives, krew manifest, kustomize overlay
	// DownloadBaseURL is where the plugin archives will be published; the
	// krew manifest's URIs start with it. Empty means the GitHub release of
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

// Run builds and pushes a release.
func Run(ctx context.Context, o Options) (Result, error) {
	return Result{}, errors.New("release: not implemented yet")
}
