package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// PluginPlatforms are the kubectl plugin's release targets by default.
var PluginPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64", "windows/arm64"}

// KrewManifest is the krew plugin manifest's file name in OutDir.
const KrewManifest = "openbao.yaml"

// buildPlugin cross-compiles kubectl-openbao for each of o.PluginPlatforms
// into an archive in OutDir (tar.gz, zip for Windows) and writes the krew
// manifest naming each archive's URI under DownloadBaseURL and its sha256.
func (r *release) buildPlugin(ctx context.Context) error {
	var platforms []any
	for _, p := range r.o.PluginPlatforms {
		goos, goarch, _ := splitPlatform(p)
		bin, err := r.goBuild(ctx, "./cmd/kubectl-openbao", goos, goarch)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return fmt.Errorf("read %s: %w", bin, err)
		}
		binName := filepath.Base(bin)
		archive, file, err := pluginArchive(binName, data, goos, goarch, r.epoch)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(r.o.OutDir, file), archive, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", file, err)
		}
		sum := sha256.Sum256(archive)
		platforms = append(platforms, map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"os": goos, "arch": goarch}},
			"uri":      strings.TrimSuffix(r.o.DownloadBaseURL, "/") + "/" + file,
			"sha256":   hex.EncodeToString(sum[:]),
			"bin":      binName,
			"files":    []any{map[string]any{"from": binName, "to": "."}},
		})
	}
	manifest := map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]any{"name": "openbao"},
		"spec": map[string]any{
			"version":          "v" + r.o.Version,
			"homepage":         SourceURL,
			"shortDescription": "Inspect and operate OpenBao clusters run by the OpenBao operator",
			"description":      "status, pause, resume, backup and report for OpenBaoCluster resources, with the caller's own rights.",
			"platforms":        platforms,
		},
	}
	data, err := yaml.Marshal(manifest)
	if err != nil {
		return fmt.Errorf("encode the krew manifest: %w", err)
	}
	return os.WriteFile(filepath.Join(r.o.OutDir, KrewManifest), data, 0o644)
}

// pluginArchive packs the binary alone, dated at the commit, and returns the
// archive and its file name.
func pluginArchive(binName string, data []byte, goos, goarch string, mtime time.Time) ([]byte, string, error) {
	base := fmt.Sprintf("kubectl-openbao_%s_%s", goos, goarch)
	var buf bytes.Buffer
	if goos == "windows" {
		zw := zip.NewWriter(&buf)
		w, err := zw.CreateHeader(&zip.FileHeader{Name: binName, Method: zip.Deflate, Modified: mtime})
		if err == nil {
			_, err = w.Write(data)
		}
		if err == nil {
			err = zw.Close()
		}
		if err != nil {
			return nil, "", fmt.Errorf("zip %s: %w", base, err)
		}
		return buf.Bytes(), base + ".zip", nil
	}
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := tw.WriteHeader(&tar.Header{Name: binName, Mode: 0o755, Size: int64(len(data)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX})
	if err == nil {
		_, err = tw.Write(data)
	}
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if err != nil {
		return nil, "", fmt.Errorf("archive %s: %w", base, err)
	}
	return buf.Bytes(), base + ".tar.gz", nil
}
