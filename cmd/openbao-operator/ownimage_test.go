package main

import (
	"strings"
	"testing"
)

func TestTheExecutorsDefaultImageIsPinnedByTheDigestTheOperatorsPodRuns(t *testing.T) {
	d := "sha256:" + strings.Repeat("a", 64)
	e := "sha256:" + strings.Repeat("e", 64)
	tests := map[string]struct {
		image, imageID, want string
		pinned               bool
	}{
		"an image with a digest is kept as it is": {"ghcr.io/openbao/openbao-operator:1.0@" + d, "ghcr.io/openbao/openbao-operator@" + e,
			"ghcr.io/openbao/openbao-operator:1.0@" + d, true},
		"a tag is pinned by containerd's repository digest": {"ghcr.io/openbao/openbao-operator:1.0", "ghcr.io/openbao/openbao-operator@" + d,
			"ghcr.io/openbao/openbao-operator@" + d, true},
		"a mirror's repository is kept, with the digest": {"mirror.corp/openbao/openbao-operator:1.0", "mirror.corp/openbao/openbao-operator@" + d,
			"mirror.corp/openbao/openbao-operator@" + d, true},
		"docker's docker-pullable prefix is read": {"ghcr.io/openbao/openbao-operator:1.0", "docker-pullable://ghcr.io/openbao/openbao-operator@" + d,
			"ghcr.io/openbao/openbao-operator@" + d, true},
		"an image loaded by hand has only its local ID: not pinned": {"localhost/openbao-operator:dev", d, "localhost/openbao-operator:dev", false},
		"no status yet: not pinned":                                 {"ghcr.io/openbao/openbao-operator:1.0", "", "ghcr.io/openbao/openbao-operator:1.0", false},
		"a malformed digest: not pinned": {"ghcr.io/openbao/openbao-operator:1.0", "ghcr.io/openbao/openbao-operator@sha256:zz",
			"ghcr.io/openbao/openbao-operator:1.0", false},
	}
	for title, tc := range tests {
		t.Run(title, func(t *testing.T) {
			got, ok := pinnedImage(tc.image, tc.imageID)
			if got != tc.want || ok != tc.pinned {
				t.Errorf("pinnedImage(%q, %q) = %q, %v; want %q, %v", tc.image, tc.imageID, got, ok, tc.want, tc.pinned)
			}
		})
	}
}
