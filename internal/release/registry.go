package release

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// registry reaches the release registry with the user's docker credentials
// (anonymous without any).
type registry struct {
	nameOpts   []name.Option
	remoteOpts []remote.Option
}

func newRegistry(ctx context.Context, plainHTTP bool) registry {
	r := registry{remoteOpts: []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}}
	if plainHTTP {
		r.nameOpts = []name.Option{name.Insecure}
	}
	return r
}

func (g registry) tag(ref string) (name.Tag, error) {
	t, err := name.NewTag(ref, g.nameOpts...)
	if err != nil {
		return name.Tag{}, fmt.Errorf("parse %s: %w", ref, err)
	}
	return t, nil
}

func (g registry) repo(ref string) (name.Repository, error) {
	repo, err := name.NewRepository(ref, g.nameOpts...)
	if err != nil {
		return name.Repository{}, fmt.Errorf("parse %s: %w", ref, err)
	}
	return repo, nil
}

// pushIndex pushes idx under ref (a tag) and returns repo@digest.
func (g registry) pushIndex(ref string, idx v1.ImageIndex) (name.Digest, error) {
	t, err := g.tag(ref)
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.WriteIndex(t, idx, g.remoteOpts...); err != nil {
		return name.Digest{}, fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return name.Digest{}, fmt.Errorf("digest of %s: %w", ref, err)
	}
	return t.Context().Digest(d.String()), nil
}

// pushImage pushes img under ref (a tag) and returns repo@digest.
func (g registry) pushImage(ref string, img v1.Image) (name.Digest, error) {
	t, err := g.tag(ref)
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.Write(t, img, g.remoteOpts...); err != nil {
		return name.Digest{}, fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, fmt.Errorf("digest of %s: %w", ref, err)
	}
	return t.Context().Digest(d.String()), nil
}

// resolve returns the digest ref names now.
func (g registry) resolve(ref string) (name.Digest, error) {
	parsed, err := name.ParseReference(ref, g.nameOpts...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("parse %s: %w", ref, err)
	}
	desc, err := remote.Head(parsed, g.remoteOpts...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("resolve %s: %w", ref, err)
	}
	return parsed.Context().Digest(desc.Digest.String()), nil
}
