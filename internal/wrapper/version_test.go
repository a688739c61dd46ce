package wrapper

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"go/build"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "record Version and the hash of the wrapper's sources in testdata/source.sha256 (only with a new Version)")

const sourceHashFile = "testdata/source.sha256"

// sourceDirs are the packages the bao-wrapper binary is built from,
// relative to this package; TestTheWrapperImportsOnlyTheStandardLibrary
// keeps the list whole.
var sourceDirs = []string{"../../cmd/bao-wrapper", "."}

// sourceHash is the SHA-256 of the wrapper's non-test Go files, each
// named by its path, in a fixed order.
func sourceHash(t *testing.T) string {
	t.Helper()
	h := sha256.New()
	for _, dir := range sourceDirs {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("read package %s: %v", dir, err)
		}
		files := slices.Sorted(slices.Values(pkg.GoFiles))
		for _, name := range files {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(h, "%s/%s %d\n", filepath.ToSlash(dir), name, len(data))
			h.Write(data)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestVersionFollowsTheSource: the image tag names the wrapper's code, so
// a change to the code must come with a new Version; otherwise two
// different wrappers would ship under one tag, or (the other way) a new
// tag would roll every OpenBao pod for nothing.
func TestVersionFollowsTheSource(t *testing.T) {
	got := sourceHash(t)
	data, err := os.ReadFile(sourceHashFile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	recVersion, recHash, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
	if *update {
		if got != recHash && recVersion == Version {
			t.Fatalf("the bao-wrapper sources changed but wrapper.Version is still %s: bump Version in internal/wrapper/version.go first", Version)
		}
		if err := os.WriteFile(sourceHashFile, []byte(Version+" "+got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	switch {
	case recVersion == Version && recHash == got:
	case recVersion == Version:
		t.Errorf("the bao-wrapper sources (cmd/bao-wrapper, internal/wrapper) changed but wrapper.Version is still %s: "+
			"bump Version in internal/wrapper/version.go (semver), then run go test ./internal/wrapper -run TestVersionFollowsTheSource -update", Version)
	default:
		t.Errorf("%s records version %q, wrapper.Version is %s: run go test ./internal/wrapper -run TestVersionFollowsTheSource -update",
			sourceHashFile, recVersion, Version)
	}
}

func TestVersionIsSemver(t *testing.T) {
	if !regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$`).MatchString(Version) {
		t.Errorf("wrapper.Version %q is not MAJOR.MINOR.PATCH", Version)
	}
}

// TestTheWrapperImportsOnlyTheStandardLibrary: the source hash covers the
// two packages only, so any other import of this module (or another
// module) would change the binary unseen.
func TestTheWrapperImportsOnlyTheStandardLibrary(t *testing.T) {
	for _, dir := range sourceDirs {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pkg.Imports {
			first, _, _ := strings.Cut(imp, "/")
			if strings.Contains(first, ".") && imp != "github.com/openbao/operator/internal/wrapper" {
				t.Errorf("%s imports %s: add it to sourceDirs (and bump Version) or drop the import", dir, imp)
			}
		}
	}
}
