package release_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmregistry "helm.sh/helm/v3/pkg/registry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/internal/imageverify"
	"github.com/openbao/operator/internal/release"
	"github.com/openbao/operator/test/localnode"
)

// Two releases of the operator, built from this tree: N is installed
// first, N+1 is the upgrade. The version is stamped into the manager, so
// the two operator images differ.
const (
	versionN     = "0.1.0"
	versionNext  = "0.1.1"
	clusterName  = "bao"
	servers      = 3
	formTimeout  = 6 * time.Minute
	childTimeout = 2 * time.Minute
)

// platforms are what the tier releases for; RELEASE_PLATFORMS (comma
// separated) overrides them.
func platforms() []string {
	if p := os.Getenv("RELEASE_PLATFORMS"); p != "" {
		return strings.Split(p, ",")
	}
	return []string{"linux/amd64", "linux/arm64"}
}

// TestReleaseInstallsByDigestAndUpgradesWithoutRestartingOpenBao releases
// the operator into the loopback registry, checks the release's
// signatures and SBOM, installs it by Helm from the OCI chart named by
// digest (the node pulls every image from the registry), forms a cluster,
// then releases again under the next version, upgrades to it the same way
// and checks that no OpenBao server restarted while the new operator
// manages the cluster. Each step needs the one before.
func TestReleaseInstallsByDigestAndUpgradesWithoutRestartingOpenBao(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	cl, err := node.Client()
	if err != nil {
		t.Fatal(err)
	}
	openbao := pushOpenBao(t)
	keyPEM := signingKey(t)
	n := releaseAt(ctx, t, versionN, keyPEM, openbao.repo+":"+openbao.tag)
	if n.OpenBao != openbao.repo+"@"+openbao.digest {
		t.Errorf("the release pins OpenBao as %s, want %s@%s", n.OpenBao, openbao.repo, openbao.digest)
	}
	checkPlatforms(t, n)
	checkSignatures(ctx, t, n)
	checkSBOM(t, n)
	installFromOCI(ctx, t, cl, n)
	ns := createNamespace(ctx, t, cl, "release")
	createCluster(ctx, t, cl, ns, openbao)
	waitReady(ctx, t, cl, ns)
	before := snapshotServers(ctx, t, cl, ns)

	next := releaseAt(ctx, t, versionNext, keyPEM, openbao.repo+":"+openbao.tag)
	if next.Operator == n.Operator {
		t.Fatalf("releases %s and %s have the same operator image %s", versionN, versionNext, n.Operator)
	}
	// The wrapper is versioned on its own: an operator release that does
	// not change it pushes the same image, so no pod template changes.
	if next.Wrapper != n.Wrapper {
		t.Errorf("releases %s and %s of one tree push different wrappers: %s, %s", versionN, versionNext, n.Wrapper, next.Wrapper)
	}
	installFromOCI(ctx, t, cl, next)
	checkChildComesBack(ctx, t, cl, ns)
	after := snapshotServers(ctx, t, cl, ns)
	changes := countRestarts(before, after)
	logf("OpenBao server pods restarted or replaced, or StatefulSet changes, during the operator upgrade %s -> %s: %d (goal 0)",
		versionN, versionNext, len(changes))
	for _, c := range changes {
		t.Error(c)
	}
}

// checkPlatforms: the operator and wrapper images are indexes of every
// platform the release was asked for (both, as shipped, unless
// RELEASE_PLATFORMS says otherwise).
func checkPlatforms(t *testing.T, res release.Result) {
	t.Helper()
	want := slices.Sorted(slices.Values(platforms()))
	for _, ref := range []string{res.Operator, res.Wrapper} {
		d, err := name.NewDigest(ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(d)
		if err != nil {
			t.Fatalf("read index %s: %v", ref, err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if got := release.IndexPlatforms(m); !slices.Equal(got, want) {
			t.Errorf("%s serves %v, want %v", ref, got, want)
		}
	}
	logf("the operator and wrapper images are indexes of %v", want)
}

// image is an image pushed to the registry: repository, tag and digest.
type image struct{ repo, tag, digest string }

// pushOpenBao pushes the OpenBao image the other tiers build (internal/images,
// from bin/bao) to the registry, under the tag that names its version.
func pushOpenBao(t *testing.T) image {
	t.Helper()
	start := time.Now()
	built, err := localnode.BuildImages(node, localnode.ImageOpenBao)
	if err != nil {
		t.Fatal(err)
	}
	b := built[localnode.ImageOpenBao]
	img, err := tarball.ImageFromPath(b.Tarball, nil)
	if err != nil {
		t.Fatalf("read %s: %v", b.Tarball, err)
	}
	_, tag, _ := strings.Cut(b.Ref, ":")
	out := image{repo: reg + "/openbao", tag: tag}
	ref, err := name.NewTag(out.repo + ":" + out.tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	out.digest = d.String()
	logf("pushed %s in %s", ref, time.Since(start).Round(time.Millisecond))
	return out
}

// signingKey is an ephemeral ECDSA P-256 key, PEM (PKCS #8), as the
// release reads it from the environment.
func signingKey(t *testing.T) []byte {
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

// releaseAt runs the release as `make release` does, into the registry.
func releaseAt(ctx context.Context, t *testing.T, version string, keyPEM []byte, openbao string) release.Result {
	t.Helper()
	start := time.Now()
	res, err := release.Run(ctx, release.Options{
		RepoRoot: node.RepoRoot, AllowDirty: true, Version: version,
		Registry: reg, PlainHTTP: true, Platforms: platforms(), PluginPlatforms: []string{"linux/amd64"},
		SigningKeyPEM: keyPEM, OpenBaoImage: openbao, OutDir: t.TempDir(),
		Logf: func(f string, a ...any) { logf("release "+version+": "+f, a...) },
	})
	if err != nil {
		t.Fatalf("release %s: %v", version, err)
	}
	logf("released %s for %v in %s: operator %s, wrapper %s, chart %s@%s", version, platforms(),
		time.Since(start).Round(time.Millisecond), res.Operator, res.Wrapper, res.Chart, res.ChartDigest)
	return res
}

// installFromOCI pulls the release's chart from the registry by digest and
// installs it with helm's library (an upgrade when the operator is
// installed already), then waits until the manager runs the release's
// operator image, pulled from the registry, and no other.
func installFromOCI(ctx context.Context, t *testing.T, cl client.Client, res release.Result) {
	t.Helper()
	start := time.Now()
	ref := res.Chart + "@" + res.ChartDigest
	chrt := pullChart(t, ref)
	if chrt.Metadata.Version != res.ChartVersion {
		t.Fatalf("chart %s is version %s, the release says %s", ref, chrt.Metadata.Version, res.ChartVersion)
	}
	if err := localnode.InstallChart(ctx, node, cl, chrt, ref, localnode.NodeValues(reg), logf); err != nil {
		t.Fatal(err)
	}
	if err := localnode.WaitOperatorReady(ctx, cl); err != nil {
		t.Fatal(err)
	}
	err := localnode.Poll(ctx, 2*time.Minute, "every manager pod on "+res.Operator, func(ctx context.Context) (bool, string, error) {
		return managerOn(ctx, cl, res.Operator)
	})
	if err != nil {
		t.Fatal(err)
	}
	logf("operator %s installed from %s, Ready in %s", res.Version, ref, time.Since(start).Round(time.Millisecond))
}

// pullChart pulls a chart from the registry (plain HTTP on loopback) by
// digest and loads it.
func pullChart(t *testing.T, ref string) *chart.Chart {
	t.Helper()
	rc, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptWriter(&bytes.Buffer{}))
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := rc.Pull(strings.TrimPrefix(ref, "oci://"))
	if err != nil {
		t.Fatalf("helm pull %s: %v", ref, err)
	}
	chrt, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
	if err != nil {
		t.Fatalf("load chart %s: %v", ref, err)
	}
	return chrt
}

// checkSignatures verifies each released image by digest with the
// released public key (internal/imageverify, as the operator verifies
// OpenBao images), and checks that another key does not verify them.
func checkSignatures(ctx context.Context, t *testing.T, res release.Result) {
	t.Helper()
	pub, err := os.ReadFile(res.PublicKey)
	if err != nil {
		t.Fatalf("read the released public key: %v", err)
	}
	other := publicPEM(t, signingKey(t))
	v := imageverify.NewCosign(0, nil)
	for _, img := range []string{res.Operator, res.Wrapper, res.Bundle, res.Catalog} {
		got, err := v.Verify(ctx, imageverify.Request{Image: img, Policy: imageverify.Policy{PublicKey: string(pub)}})
		if err != nil {
			t.Errorf("%s does not verify with %s: %v", img, res.PublicKey, err)
			continue
		}
		if !strings.HasSuffix(img, "@"+got.Digest) {
			t.Errorf("%s verified as %s", img, got.Digest)
		}
		if _, err := v.Verify(ctx, imageverify.Request{Image: img, Policy: imageverify.Policy{PublicKey: other}}); err == nil {
			t.Errorf("%s verifies with a key the release never had", img)
		}
	}
}

// publicPEM is the PEM public key of a PEM private key.
func publicPEM(t *testing.T, keyPEM []byte) string {
	t.Helper()
	block, _ := pem.Decode(keyPEM)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(k.(*ecdsa.PrivateKey).Public())
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}
