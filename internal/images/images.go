// Package images builds single-layer container images from local files
// (static binaries, a few directories): the release (internal/release)
// pushes them, one per platform, as image indexes; the test tiers write
// them into docker-archive tarballs that containerd imports directly.
// Its specs name what each image holds.
//
// An image's tag is a hash of everything that decides its bytes, and the
// tarball is cached under that tag: rebuilding after a code change costs one
// `go build` and one layer write; an unchanged image costs a hash.
package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one regular file in the image, copied from Source on the host.
type File struct {
	Path   string // absolute path inside the image
	Source string // path on the host
	Mode   int64  // permission bits, e.g. 0o755
}

// Dir is one directory in the image (for example a mount point or /tmp).
type Dir struct {
	Path string
	Mode int64
	UID  int
	GID  int
}

// Spec describes an image. Add files to a Spec to extend an image (a later
// binary such as a PID-1 wrapper is one more File).
type Spec struct {
	Repository string // e.g. "localhost/openbao-operator"
	// TagPrefix comes before the content hash in the tag, for example
	// "2.4.0-" so the tag is a semantic version an OpenBaoCluster can name.
	TagPrefix  string
	Files      []File
	Dirs       []Dir
	User       string // numeric "uid:gid"; kubelet checks runAsNonRoot against it
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	Labels     map[string]string
}

// Built is a built image tarball.
type Built struct {
	Ref     string // repository:tag, the name pods use
	Tarball string // docker-archive file containerd imports
	Cached  bool   // true when the tarball already existed
}

// Build writes the image described by spec into cacheDir, or returns the
// cached tarball when one with the same content hash exists.
func Build(spec Spec, cacheDir string) (Built, error) {
	key, err := contentKey(spec)
	if err != nil {
		return Built{}, err
	}
	tag := spec.TagPrefix + key[:16]
	ref := spec.Repository + ":" + tag
	out := filepath.Join(cacheDir, filepath.Base(spec.Repository)+"-"+tag+".tar")
	if _, err := os.Stat(out); err == nil {
		return Built{Ref: ref, Tarball: out, Cached: true}, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return Built{}, fmt.Errorf("create image cache %s: %w", cacheDir, err)
	}
	if err := writeImage(spec, ref, out); err != nil {
		return Built{}, fmt.Errorf("build image %s: %w", ref, err)
	}
	pruneOlder(cacheDir, spec.Repository+"-"+spec.TagPrefix, out)
	return Built{Ref: ref, Tarball: out}, nil
}

// pruneOlder removes the cached tarballs of earlier builds of the same
// repository: each code change would otherwise leave one behind. Containers
// keep running from containerd's copy.
func pruneOlder(cacheDir, prefix, keep string) {
	// Sixteen '?' match the hash exactly, so "openbao-*" never matches
	// "openbao-operator-*".
	pattern := filepath.Join(cacheDir, filepath.Base(prefix)+strings.Repeat("?", 16)+".tar")
	old, _ := filepath.Glob(pattern)
	for _, p := range old {
		if p != keep {
			_ = os.Remove(p)
		}
	}
}

func writeImage(spec Spec, ref, out string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("parse reference: %w", err)
	}
	img, err := Image(spec, v1.Platform{OS: "linux", Architecture: "amd64"}, time.Time{})
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return fmt.Errorf("write tarball: %w", err)
	}
	return os.Rename(tmp, out)
}

// Image builds the spec's single-layer image in memory for one platform
// (whose binaries the spec's files must be). created is the config's
// creation time; the zero time leaves it unset. The release pushes these
// images to a registry; Build writes them as tarballs.
func Image(spec Spec, platform v1.Platform, created time.Time) (v1.Image, error) {
	var buf bytes.Buffer
	if err := writeLayer(spec, &buf); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("open layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	if img, err = mutate.ConfigFile(img, configFile(spec, img, platform, created)); err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

// configFile keeps the layer's diff IDs (set by AppendLayers) and fills in
// the runtime settings; the only timestamp is created, so equal inputs give
// equal images.
func configFile(spec Spec, img v1.Image, platform v1.Platform, created time.Time) *v1.ConfigFile {
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.Architecture = platform.Architecture
	cf.OS = platform.OS
	cf.Variant = platform.Variant
	if !created.IsZero() {
		cf.Created = v1.Time{Time: created.UTC()}
	}
	cf.Config = v1.Config{
		User:       spec.User,
		Entrypoint: spec.Entrypoint,
		Cmd:        spec.Cmd,
		Env:        spec.Env,
		WorkingDir: spec.WorkingDir,
		Labels:     spec.Labels,
	}
	return cf
}

// writeLayer writes an uncompressed tar of the spec's directories (with
// their parents) and files, in a fixed order with zero timestamps.
func writeLayer(spec Spec, w io.Writer) error {
	tw := tar.NewWriter(w)
	for _, d := range layerDirs(spec) {
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: d.Path[1:] + "/", Mode: d.Mode, Uid: d.UID, Gid: d.GID}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("write dir %s: %w", d.Path, err)
		}
	}
	for _, file := range spec.Files {
		if err := addFile(tw, file); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close layer: %w", err)
	}
	return nil
}

// layerDirs lists the spec's directories plus every parent directory of a
// file or directory, sorted so that parents come first.
func layerDirs(spec Spec) []Dir {
	dirs := map[string]Dir{}
	var addParents func(p string)
	addParents = func(p string) {
		parent := path.Dir(p)
		if parent == "/" || parent == "." {
			return
		}
		if _, ok := dirs[parent]; !ok {
			dirs[parent] = Dir{Path: parent, Mode: 0o755}
		}
		addParents(parent)
	}
	for _, d := range spec.Dirs {
		dirs[path.Clean(d.Path)] = Dir{Path: path.Clean(d.Path), Mode: d.Mode, UID: d.UID, GID: d.GID}
		addParents(d.Path)
	}
	for _, f := range spec.Files {
		addParents(path.Clean(f.Path))
	}
	out := make([]Dir, 0, len(dirs))
	for _, d := range dirs {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func addFile(tw *tar.Writer, file File) error {
	src, err := os.Open(file.Source)
	if err != nil {
		return fmt.Errorf("open %s: %w", file.Source, err)
	}
	defer src.Close()
	info, err := src.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", file.Source, err)
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: path.Clean(file.Path)[1:], Mode: file.Mode, Size: info.Size()}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write header %s: %w", file.Path, err)
	}
	if _, err := io.Copy(tw, src); err != nil {
		return fmt.Errorf("copy %s: %w", file.Source, err)
	}
	return nil
}

// contentKey hashes the spec's settings and every source file's bytes.
func contentKey(spec Spec) (string, error) {
	h := sha256.New()
	meta := spec
	meta.Files = nil
	enc, err := json.Marshal(meta)
	if err != nil {
		return "", fmt.Errorf("encode spec: %w", err)
	}
	h.Write(enc)
	for _, file := range spec.Files {
		fmt.Fprintf(h, "\x00%s\x00%o\x00", file.Path, file.Mode)
		f, err := os.Open(file.Source)
		if err != nil {
			return "", fmt.Errorf("open %s: %w", file.Source, err)
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", file.Source, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
