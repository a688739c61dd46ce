package release

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// SBOMArtifactType is the artifact type of the SBOM referrers.
const SBOMArtifactType = "application/vnd.cyclonedx+json"

// emptyConfig is the OCI empty descriptor's content, the config of an
// artifact manifest that has none.
var emptyConfig = []byte("{}")

// attachSBOMs writes a CycloneDX SBOM of each platform's manager binary
// (cyclonedx-gomod reads the module list the linker stamped into it: the
// modules actually linked, with their versions) into OutDir and attaches it
// to that platform's image as an OCI referrer. The first platform's SBOM is
// also attached to the index, the digest users pin. No serial number and no
// timestamp, so equal binaries give equal SBOMs.
func (r *release) attachSBOMs(ctx context.Context) error {
	for i, p := range r.operator.platforms {
		out := filepath.Join(r.o.OutDir, fmt.Sprintf("sbom-%s-%s-%s.cdx.json", OperatorRepo, p.platform.OS, p.platform.Architecture))
		if _, err := run(ctx, r.o.RepoRoot, nil, r.tool("cyclonedx-gomod"), "bin", "-json", "-noserial", "-notimestamp",
			"-version", "v"+r.o.Version, "-output", out, p.binary); err != nil {
			return err
		}
		sbom, err := os.ReadFile(out)
		if err != nil {
			return fmt.Errorf("read %s: %w", out, err)
		}
		subjects := []name.Digest{p.digest}
		if i == 0 {
			subjects = append(subjects, r.operator.ref)
		}
		for _, s := range subjects {
			if _, err := r.attachReferrer(s, SBOMArtifactType, sbom); err != nil {
				return err
			}
		}
	}
	return nil
}

// attachReferrer pushes content as a one-layer OCI artifact whose subject is
// subject, and returns the artifact's digest.
func (r *release) attachReferrer(subject name.Digest, artifactType string, content []byte) (name.Digest, error) {
	desc, err := remote.Head(subject, r.reg.remoteOpts...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("read %s: %w", subject, err)
	}
	layer := static.NewLayer(content, types.MediaType(artifactType))
	config := static.NewLayer(emptyConfig, "application/vnd.oci.empty.v1+json")
	for _, l := range []v1.Layer{layer, config} {
		if err := remote.WriteLayer(subject.Repository, l, r.reg.remoteOpts...); err != nil {
			return name.Digest{}, fmt.Errorf("push the %s blob: %w", artifactType, err)
		}
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  artifactType,
		Config:        descriptorOf(config, "application/vnd.oci.empty.v1+json"),
		Layers:        []v1.Descriptor{descriptorOf(layer, types.MediaType(artifactType))},
		Subject:       &v1.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return name.Digest{}, fmt.Errorf("encode the %s manifest: %w", artifactType, err)
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return name.Digest{}, err
	}
	d := subject.Repository.Digest(h.String())
	if err := remote.Put(d, rawManifest{raw: raw, mt: types.OCIManifestSchema1}, r.reg.remoteOpts...); err != nil {
		return name.Digest{}, fmt.Errorf("push the %s referrer of %s: %w", artifactType, subject, err)
	}
	r.o.Logf("attached %s %s to %s", artifactType, d.DigestStr(), subject)
	return d, nil
}

func descriptorOf(l v1.Layer, mt types.MediaType) v1.Descriptor {
	d, _ := l.Digest()
	size, _ := l.Size()
	return v1.Descriptor{MediaType: mt, Digest: d, Size: size}
}

// rawManifest is a manifest pushed as it is.
type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }
