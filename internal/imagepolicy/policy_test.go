package imagepolicy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/imagepolicy"
)

func TestAnImageIsAllowedOnlyFromAListedRepositoryAtAPathBoundary(t *testing.T) {
	p, err := imagepolicy.Parse(" ghcr.io/openbao/ , registry.corp.example:5000,docker.io/library")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]bool{
		"ghcr.io/openbao/openbao:2.4.0":                             true,
		"ghcr.io/openbao/openbao@sha256:" + strings.Repeat("a", 64): true,
		"ghcr.io/openbao":                             true,
		"registry.corp.example:5000/team/bao:1":       true,
		"busybox:1.36":                                true, // docker.io/library/busybox
		"docker.io/library/busybox":                   true,
		"ghcr.io/openbao-evil/openbao:2.4.0":          false, // a prefix, not a path boundary
		"ghcr.io/attacker/openbao:2.4.0":              false,
		"registry.corp.example/team/bao:1":            false, // another port is another registry
		"registry.corp.example:5000.evil.example/x:1": false,
		"attacker/bao:1":                              false, // docker.io/attacker
		"GHCR.IO/openbao/openbao:2.4.0":               false, // not a valid reference
		"ghcr.io/openbao/../attacker/x:1":             false,
		"localhost:5000/openbao/openbao:2.4.0":        false,
		"ghcr.io/openbao/openbao:2.4.0@sha256:" + strings.Repeat("b", 64) + "/../../evil": false,
	}
	for image, want := range tests {
		if got := p.Allows(image); got != want {
			t.Errorf("Allows(%q) = %v, want %v", image, got, want)
		}
	}
}

func TestAnEmptyPolicyAllowsAnyImage(t *testing.T) {
	p, err := imagepolicy.Parse("")
	if err != nil || !p.Empty() || !p.Allows("attacker/anything:latest") {
		t.Fatalf("empty policy: %v, %v", p, err)
	}
}

func TestAPolicyEntryNamesRepositoriesNotImages(t *testing.T) {
	for _, entry := range []string{"ghcr.io/openbao/openbao:2.4.0", "ghcr.io/openbao/openbao@sha256:" + strings.Repeat("a", 64), "ghcr.io/*", "openbao", "ghcr.io/openbao/../x"} {
		if _, err := imagepolicy.Parse(entry); err == nil {
			t.Errorf("Parse(%q) accepted", entry)
		}
	}
}

// TestEveryImageAClusterRunsIsChecked: the servers' image and a named
// executor image; the operator's own executor (none named) is the
// platform's.
func TestEveryImageAClusterRunsIsChecked(t *testing.T) {
	p, _ := imagepolicy.Parse("ghcr.io/openbao")
	c := &v1alpha1.OpenBaoCluster{Spec: v1alpha1.OpenBaoClusterSpec{Version: "2.4.0",
		Image: "attacker.example/bao", Backup: &v1alpha1.BackupSpec{ExecutorImage: "attacker.example/exfil:1"}}}
	errs := p.CheckCluster(c)
	if len(errs) != 2 || errs[0].Field != "spec.image" || errs[1].Field != "spec.backup.executorImage" ||
		!strings.Contains(errs[0].Error(), "ghcr.io/openbao") || !strings.Contains(errs[0].Error(), "--allowed-image-repositories") {
		t.Fatalf("errors %v, want spec.image and spec.backup.executorImage, naming the policy", errs)
	}
	c.Spec.Image, c.Spec.Backup.ExecutorImage = "", ""
	if errs := p.CheckCluster(c); len(errs) != 1 || errs[0].Field != "spec.image" {
		t.Fatalf("the default OpenBao image (quay.io) under a ghcr.io-only policy: %v, want spec.image refused", errs)
	}
	p, _ = imagepolicy.Parse("quay.io/openbao")
	if errs := p.CheckCluster(c); len(errs) != 0 {
		t.Fatalf("the default OpenBao image and the operator's own executor: %v", errs)
	}
}

// FuzzAnAllowedImageComesFromAListedRegistry: whatever the entry and the
// image, an allowed image is pulled from the registry host of an entry,
// and no path of it climbs out with "..".
func FuzzAnAllowedImageComesFromAListedRegistry(f *testing.F) {
	f.Add("ghcr.io/openbao", "ghcr.io/openbao-evil/x:1")
	f.Add("registry.corp.example:5000", "registry.corp.example:5000/a/b@sha256:"+strings.Repeat("c", 64))
	f.Add("docker.io/library", "busybox")
	f.Fuzz(func(t *testing.T, entry, image string) {
		p, err := imagepolicy.Parse(entry)
		if err != nil || p.Empty() || !p.Allows(image) {
			return
		}
		ref, err := name.ParseReference(image)
		if err != nil {
			t.Fatalf("%q allowed under %q but not a valid reference: %v", image, entry, err)
		}
		host := ref.Context().RegistryStr()
		if !slices.ContainsFunc(strings.Split(p.String(), ", "), func(a string) bool { return a == host || strings.HasPrefix(a, host+"/") }) {
			t.Fatalf("%q (registry %s) allowed under %q", image, host, p)
		}
		if slices.Contains(strings.Split(ref.Context().RepositoryStr(), "/"), "..") {
			t.Fatalf("%q allowed with a .. segment", image)
		}
	})
}
