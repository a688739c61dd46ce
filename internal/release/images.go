package release

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/openbao/operator/internal/images"
	"github.com/openbao/operator/internal/wrapper"
)

// platformImage is one platform's manifest of a multi-arch image, and the
// binary it was built from (the SBOM reads its module list).
type platformImage struct {
	platform v1.Platform
	digest   name.Digest
	binary   string
}

// builtIndex is a pushed multi-arch image.
type builtIndex struct {
	ref       name.Digest
	platforms []platformImage
}

// buildImages builds and pushes the operator and bao-wrapper images, one
// manifest per platform under an image index.
func (r *release) buildImages(ctx context.Context) error {
	op, err := r.buildIndex(ctx, OperatorRepo, r.o.Version, "The OpenBao operator", func(platform string) (images.Spec, string, error) {
		goos, goarch, _ := splitPlatform(platform)
		manager, err := r.goBuild(ctx, "./cmd/openbao-operator", goos, goarch)
		if err != nil {
			return images.Spec{}, "", err
		}
		// The test tiers' operator image, so both run the same layout.
		spec := images.Operator(manager)
		// The backup and restore executor stages files under the
		// temporary directory.
		spec.Dirs = append(spec.Dirs, images.Dir{Path: "/tmp", Mode: 0o1777})
		return spec, manager, nil
	})
	if err != nil {
		return err
	}
	r.operator = op
	r.res.Operator = op.ref.String()
	// The wrapper's labels and creation time are those of the last commit
	// that changed its sources, not the release's: an operator release
	// that leaves the wrapper alone pushes the same wrapper digest, and
	// OpenBao pod templates, which name it, stay as they are.
	wrapperCommit, wrapperTime, err := sourceCommit(ctx, r.o.RepoRoot, "./cmd/bao-wrapper")
	if err != nil {
		return err
	}
	wrapperRelease := *r
	wrapperRelease.commit, wrapperRelease.epoch = wrapperCommit, wrapperTime
	wr, err := wrapperRelease.buildIndex(ctx, WrapperRepo, wrapper.Version, "bao-wrapper, PID 1 of OpenBao pods", func(platform string) (images.Spec, string, error) {
		goos, goarch, _ := splitPlatform(platform)
		bin, err := r.goBuild(ctx, "./cmd/bao-wrapper", goos, goarch)
		if err != nil {
			return images.Spec{}, "", err
		}
		return images.Wrapper(bin), bin, nil
	})
	if err != nil {
		return err
	}
	r.res.Wrapper = wr.ref.String()
	r.signed = append(r.signed, op.ref, wr.ref)
	return nil
}

// buildIndex builds one image per platform from spec(platform), labels it,
// and pushes the index under repo:tag.
func (r *release) buildIndex(ctx context.Context, repo, tag, title string, spec func(platform string) (images.Spec, string, error)) (builtIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.DockerManifestList)
	var out builtIndex
	for _, p := range r.o.Platforms {
		s, bin, err := spec(p)
		if err != nil {
			return out, err
		}
		s.Labels = r.labels(title, tag)
		goos, goarch, _ := splitPlatform(p)
		platform := v1.Platform{OS: goos, Architecture: goarch}
		img, err := images.Image(s, platform, r.epoch)
		if err != nil {
			return out, fmt.Errorf("build %s for %s: %w", repo, p, err)
		}
		d, err := img.Digest()
		if err != nil {
			return out, fmt.Errorf("digest of %s for %s: %w", repo, p, err)
		}
		if size, err := compressedSize(img); err == nil {
			r.o.Logf("%s for %s: %.1f MB compressed", repo, p, float64(size)/1e6)
		}
		repoName, err := r.reg.repo(r.ref(repo))
		if err != nil {
			return out, err
		}
		out.platforms = append(out.platforms, platformImage{platform: platform, digest: repoName.Digest(d.String()), binary: bin})
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	ref, err := r.reg.pushIndex(r.ref(repo)+":"+tag, idx)
	if err != nil {
		return out, err
	}
	out.ref = ref
	r.o.Logf("pushed %s (%s)", ref, strings.Join(r.o.Platforms, ", "))
	return out, nil
}

// labels are the OCI annotations of every image the release builds.
func (r *release) labels(title, version string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    title,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": r.commit,
		"org.opencontainers.image.source":   SourceURL,
		"org.opencontainers.image.created":  r.epoch.Format(time.RFC3339),
		"org.opencontainers.image.licenses": License,
		"org.opencontainers.image.vendor":   "OpenBao",
	}
}

// License is the SPDX identifier in the images' licenses label: OpenBao's.
const License = "MPL-2.0"

// compressedSize is the sum of the image's compressed layers: what a pull
// downloads.
func compressedSize(img v1.Image) (int64, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, l := range layers {
		size, err := l.Size()
		if err != nil {
			return 0, err
		}
		total += size
	}
	return total, nil
}

// IndexPlatforms lists the os/arch of each image an index names, sorted:
// what a release's index serves, for whoever checks one.
func IndexPlatforms(idx *v1.IndexManifest) []string {
	var out []string
	for _, m := range idx.Manifests {
		if m.Platform != nil {
			out = append(out, m.Platform.OS+"/"+m.Platform.Architecture)
		}
	}
	slices.Sort(out)
	return out
}
