// Command release builds, signs and pushes a release of the operator
// (internal/release): `make release VERSION=0.2.0 REGISTRY=ghcr.io/openbao`.
// Every flag defaults to its environment variable.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/openbao/operator/internal/release"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	o := release.Options{Logf: log.New(os.Stderr, "release: ", log.Ltime).Printf}
	plainHTTP, _ := strconv.ParseBool(os.Getenv("PLAIN_HTTP"))
	var keyFile, platforms, pluginPlatforms string
	fs.StringVar(&o.Version, "version", os.Getenv("VERSION"), "the release, a semantic version without v (VERSION)")
	fs.StringVar(&o.Registry, "registry", os.Getenv("REGISTRY"), "host[:port][/path] to push every artifact under (REGISTRY)")
	fs.StringVar(&keyFile, "signing-key-file", os.Getenv("SIGNING_KEY_FILE"), "PEM ECDSA P-256 private key to sign with (SIGNING_KEY_FILE; or COSIGN_KEY, a path or the PEM itself)")
	fs.StringVar(&o.OpenBaoImage, "openbao-image", envOr("OPENBAO_IMAGE", "quay.io/openbao/openbao:2.4.0"), "the default OpenBao image, pinned by digest in the release (OPENBAO_IMAGE)")
	fs.BoolVar(&o.PlainHTTP, "plain-http", plainHTTP, "reach the registry over plain HTTP (PLAIN_HTTP)")
	fs.StringVar(&platforms, "platforms", envOr("PLATFORMS", "linux/amd64,linux/arm64"), "platforms of the operator and wrapper images (PLATFORMS)")
	fs.StringVar(&pluginPlatforms, "plugin-platforms", envOr("PLUGIN_PLATFORMS", strings.Join(release.PluginPlatforms, ",")), "targets of the kubectl plugin's archives (PLUGIN_PLATFORMS)")
	fs.StringVar(&o.OutDir, "out", os.Getenv("OUT_DIR"), "where release.json, cosign.pub, SBOMs and plugin archives go (OUT_DIR; default dist/<version>)")
	fs.StringVar(&o.DownloadBaseURL, "download-base-url", os.Getenv("DOWNLOAD_BASE_URL"), "where the plugin archives are published, for the krew manifest (DOWNLOAD_BASE_URL)")
	fs.StringVar(&o.RepoRoot, "repo", ".", "the clone to release")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Platforms, o.PluginPlatforms = strings.Split(platforms, ","), strings.Split(pluginPlatforms, ",")
	key, err := signingKey(keyFile)
	if err != nil {
		return err
	}
	o.SigningKeyPEM = key
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := release.Run(ctx, o)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// signingKey reads the key from the file, or from COSIGN_KEY (a path, or
// the PEM itself).
func signingKey(file string) ([]byte, error) {
	if file == "" {
		v := os.Getenv("COSIGN_KEY")
		if strings.HasPrefix(strings.TrimSpace(v), "-----BEGIN") {
			return []byte(v), nil
		}
		file = v
	}
	if file == "" {
		return nil, fmt.Errorf("set SIGNING_KEY_FILE (or COSIGN_KEY) to the PEM ECDSA P-256 private key to sign with")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read the signing key: %w", err)
	}
	return data, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
