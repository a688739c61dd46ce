package release

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo is a one-commit repository.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q"}, {"config", "user.email", "t@example.test"}, {"config", "user.name", "t"},
	} {
		if _, err := git(context.Background(), dir, args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "a"}, {"commit", "-qm", "a"}} {
		if _, err := git(context.Background(), dir, args...); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestADirtyTreeIsRefused(t *testing.T) {
	ctx := context.Background()
	dir := gitRepo(t)
	commit, epoch, err := inspectTree(ctx, dir, false)
	if err != nil || len(commit) != 40 || epoch.IsZero() {
		t.Fatalf("clean tree: %s %v %v", commit, epoch, err)
	}
	for what, dirty := range map[string]func() error{
		"a changed file":    func() error { return os.WriteFile(filepath.Join(dir, "a"), []byte("b"), 0o644) },
		"an untracked file": func() error { return os.WriteFile(filepath.Join(dir, "new"), nil, 0o644) },
	} {
		t.Run(what, func(t *testing.T) {
			if _, err := git(ctx, dir, "checkout", "-q", "--", "."); err != nil {
				t.Fatal(err)
			}
			_ = os.Remove(filepath.Join(dir, "new"))
			if err := dirty(); err != nil {
				t.Fatal(err)
			}
			_, err := Run(ctx, Options{RepoRoot: dir, Version: "0.2.0", Registry: "127.0.0.1:1", SigningKeyPEM: newKeyPEM(t),
				OpenBaoImage: "x/openbao:2.4.0", OutDir: t.TempDir()})
			if !errors.Is(err, ErrDirtyTree) {
				t.Fatalf("Run on a dirty tree: %v", err)
			}
			if _, _, err := inspectTree(ctx, dir, true); err != nil {
				t.Fatalf("AllowDirty: %v", err)
			}
		})
	}
}

func TestBadOptionsAreRefusedNamingTheInput(t *testing.T) {
	good := Options{RepoRoot: ".", Version: "0.2.0", Registry: "registry.example/openbao", SigningKeyPEM: []byte("k"),
		OpenBaoImage: "quay.io/openbao/openbao:2.4.0", OutDir: t.TempDir()}
	if o, err := good.withDefaults(); err != nil || !filepath.IsAbs(o.RepoRoot) {
		t.Fatalf("good options: %v; RepoRoot %q must be made absolute (go list answers absolute directories)", err, o.RepoRoot)
	}
	for what, c := range map[string]struct {
		mutate func(*Options)
		want   string
	}{
		"a version with a leading v":   {func(o *Options) { o.Version = "v0.2.0" }, "VERSION"},
		"a version that is not semver": {func(o *Options) { o.Version = "0.2" }, "VERSION"},
		"no registry":                  {func(o *Options) { o.Registry = "" }, "REGISTRY"},
		"a registry that is no name":   {func(o *Options) { o.Registry = "Bad Host" }, "REGISTRY"},
		"no signing key":               {func(o *Options) { o.SigningKeyPEM = nil }, "SIGNING_KEY_FILE"},
		"no OpenBao image":             {func(o *Options) { o.OpenBaoImage = "" }, "OPENBAO_IMAGE"},
		"a platform without an arch":   {func(o *Options) { o.Platforms = []string{"linux"} }, "platform"},
	} {
		t.Run(what, func(t *testing.T) {
			o := good
			c.mutate(&o)
			_, err := o.withDefaults()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error naming %s", err, c.want)
			}
		})
	}
}

func TestASigningKeyMustBeECDSAP256(t *testing.T) {
	if _, err := loadSigner(newKeyPEM(t)); err != nil {
		t.Fatalf("a P-256 key: %v", err)
	}
	if _, err := loadSigner([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")); err == nil {
		t.Fatal("a broken key was accepted")
	}
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loadSigner(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err == nil {
		t.Fatal("a P-384 key was accepted: cosign keys and the operator's verifier are P-256")
	}
}

// TestTheWrapperIsDatedByItsOwnSources: a commit that leaves the wrapper's
// packages alone does not move the commit its image is labelled and dated
// with, so its digest stays.
func TestTheWrapperIsDatedByItsOwnSources(t *testing.T) {
	ctx := context.Background()
	dir := gitRepo(t)
	files := map[string]string{
		"go.mod":          "module example.test/m\n\ngo 1.22\n",
		"cmd/w/main.go":   "package main\n\nimport _ \"example.test/m/internal/x\"\n\nfunc main() {}\n",
		"internal/x/x.go": "package x\n",
		"other/o.go":      "package other\n",
	}
	commitAll := func(msg string) string {
		t.Helper()
		for _, args := range [][]string{{"add", "-A"}, {"commit", "-qm", msg}} {
			if _, err := git(ctx, dir, args...); err != nil {
				t.Fatal(err)
			}
		}
		head, err := git(ctx, dir, "rev-parse", "HEAD")
		if err != nil {
			t.Fatal(err)
		}
		return head
	}
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range files {
		write(name, text)
	}
	wrapperCommit := commitAll("the wrapper")
	write("other/o.go", "package other\n\n// changed\n")
	write("a", "changed")
	commitAll("something else")
	got, _, err := sourceCommit(ctx, dir, "./cmd/w")
	if err != nil || got != wrapperCommit {
		t.Fatalf("sourceCommit = %s, %v; want %s, the last commit that changed cmd/w or internal/x", got, err, wrapperCommit)
	}
	write("internal/x/x.go", "package x\n\n// changed\n")
	changed := commitAll("the wrapper's dependency")
	if got, _, err := sourceCommit(ctx, dir, "./cmd/w"); err != nil || got != changed {
		t.Fatalf("after a change to internal/x: %s, %v; want %s", got, err, changed)
	}
}
