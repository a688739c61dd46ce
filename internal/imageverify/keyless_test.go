package imageverify_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/openbao/operator/internal/imageverify"
	"github.com/openbao/operator/test/cosigntest"
)

const (
	issuer   = "https://token.actions.githubusercontent.com"
	workflow = "https://github.com/openbao/openbao/.github/workflows/release.yml@refs/tags/v2.4.0"
)

// Each case pushes a fresh image, signs it keylessly (or not) on a private
// Sigstore, and verifies it with the identity above against that
// Sigstore's trusted root, or another's.
func TestVerifyKeyless(t *testing.T) {
	reg := cosigntest.New(t, "", "")
	ours, theirs := cosigntest.NewSigstore(t), cosigntest.NewSigstore(t)
	ourRoot := ours.TrustedRootJSON(t)
	key := cosigntest.NewKey(t)
	cases := map[string]struct {
		sign       func(t *testing.T, target, elsewhere name.Digest)
		identity   imageverify.Identity // Issuer and Subject or SubjectRegExp; the root is ours
		wantErr    error
		wantFormat imageverify.Format
	}{
		"a bundle by the identity verifies": {
			sign:       func(t *testing.T, d, _ name.Digest) { reg.SignKeyless(t, ours, issuer, workflow, d, d) },
			identity:   imageverify.Identity{Issuer: issuer, Subject: workflow},
			wantFormat: imageverify.FormatBundle,
		},
		"a bundle whose subject matches the expression verifies": {
			sign:       func(t *testing.T, d, _ name.Digest) { reg.SignKeyless(t, ours, issuer, workflow, d, d) },
			identity:   imageverify.Identity{Issuer: issuer, SubjectRegExp: `^https://github\.com/openbao/openbao/`},
			wantFormat: imageverify.FormatBundle,
		},
		"a classic signature by the identity verifies by its Rekor bundle": {
			sign:       func(t *testing.T, d, _ name.Digest) { reg.SignKeylessClassic(t, ours, issuer, workflow, d, d) },
			identity:   imageverify.Identity{Issuer: issuer, Subject: workflow},
			wantFormat: imageverify.FormatSignature,
		},
		"a bundle by another subject is refused": {
			sign: func(t *testing.T, d, _ name.Digest) {
				reg.SignKeyless(t, ours, issuer, "https://github.com/fork/openbao/x.yml@refs/heads/main", d, d)
			},
			identity: imageverify.Identity{Issuer: issuer, SubjectRegExp: `^https://github\.com/openbao/openbao/`},
			wantErr:  imageverify.ErrWrongIdentity,
		},
		"a classic signature by another subject is refused": {
			sign: func(t *testing.T, d, _ name.Digest) {
				reg.SignKeylessClassic(t, ours, issuer, "mallory@example.com", d, d)
			},
			identity: imageverify.Identity{Issuer: issuer, Subject: workflow},
			wantErr:  imageverify.ErrWrongIdentity,
		},
		"a bundle from another issuer is refused": {
			sign: func(t *testing.T, d, _ name.Digest) {
				reg.SignKeyless(t, ours, "https://accounts.example.com", workflow, d, d)
			},
			identity: imageverify.Identity{Issuer: issuer, Subject: workflow},
			wantErr:  imageverify.ErrWrongIdentity,
		},
		"a bundle certified by a CA the trusted root does not hold is refused": {
			sign:     func(t *testing.T, d, _ name.Digest) { reg.SignKeyless(t, theirs, issuer, workflow, d, d) },
			identity: imageverify.Identity{Issuer: issuer, Subject: workflow},
			wantErr:  imageverify.ErrWrongIdentity,
		},
		"a classic signature certified by a CA the trusted root does not hold is refused": {
			sign:     func(t *testing.T, d, _ name.Digest) { reg.SignKeylessClassic(t, theirs, issuer, workflow, d, d) },
			identity: imageverify.Identity{Issuer: issuer, Subject: workflow},
			wantErr:  imageverify.ErrWrongIdentity,
		},
		"a bundle whose certificate has no SCT is refused": {
			sign:     func(t *testing.T, d, _ name.Digest) { reg.SignKeyless(t, ours.WithoutSCT(), issuer, workflow, d, d) },
			identity: imageverify.Identity{Issuer: issuer, Subject: workflow},
			wantErr:  imageverify.ErrWrongIdentity,
		},
		"a classic signature whose certificate has no SCT is refused": {
			sign: func(t *testing.T, d, _ name.Digest) {
				reg.SignKeylessClassic(t, ours.WithoutSCT(), issuer, workflow, d, d)
			},
			identity: imageverify.Identity{Issuer: issuer, Subject: workflow},
			wantErr:  imageverify.ErrWrongIdentity,
		},
		"a bundle logged in a Rekor log the trusted root does not hold is refused": {
			sign: func(t *testing.T, d, _ name.Digest) {
				reg.SignKeyless(t, ours.WithLogOf(theirs), issuer, workflow, d, d)
			},
			identity: imageverify.Identity{Issuer: issuer, Subject: workflow},
			wantErr:  imageverify.ErrWrongIdentity,
		},
		"a classic signature logged in a Rekor log the trusted root does not hold is refused": {
			sign: func(t *testing.T, d, _ name.Digest) {
				reg.SignKeylessClassic(t, ours.WithLogOf(theirs), issuer, workflow, d, d)
			},
			identity: imageverify.Identity{Issuer: issuer, Subject: workflow},
			wantErr:  imageverify.ErrWrongIdentity,
		},
		"a signature by a key, without certificate, is refused": {
			sign:     func(t *testing.T, d, _ name.Digest) { reg.SignBundle(t, key, d, d); reg.SignClassic(t, key, d, d) },
			identity: imageverify.Identity{Issuer: issuer, Subject: workflow},
			wantErr:  imageverify.ErrWrongIdentity,
		},
		"a bundle copied from another digest is refused": {
			sign:     func(t *testing.T, d, elsewhere name.Digest) { reg.SignKeyless(t, ours, issuer, workflow, d, elsewhere) },
			identity: imageverify.Identity{Issuer: issuer, Subject: workflow},
			wantErr:  imageverify.ErrTampered,
		},
		"a classic signature copied from another digest is refused": {
			sign: func(t *testing.T, d, elsewhere name.Digest) {
				reg.SignKeylessClassic(t, ours, issuer, workflow, d, elsewhere)
			},
			identity: imageverify.Identity{Issuer: issuer, Subject: workflow},
			wantErr:  imageverify.ErrTampered,
		},
		"an unsigned image is refused": {
			sign:     func(*testing.T, name.Digest, name.Digest) {},
			identity: imageverify.Identity{Issuer: issuer, Subject: workflow},
			wantErr:  imageverify.ErrUnsigned,
		},
	}
	i := 0
	for title, tc := range cases {
		i++
		t.Run(title, func(t *testing.T) {
			repo := fmt.Sprintf("openbao/keyless%d", i)
			d := reg.Push(t, repo, "2.4.0")
			elsewhere := reg.Push(t, repo, "other")
			tc.sign(t, d, elsewhere)
			id := tc.identity
			id.TrustedRoot, id.TrustedRootSource = ourRoot, "ConfigMap ns/sigstore, key trusted_root.json"
			res, err := imageverify.NewCosign(0, nil).Verify(context.Background(), imageverify.Request{
				Image: reg.Host + "/" + repo + ":2.4.0", Policy: imageverify.Policy{Keyless: &id},
			})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if errors.Is(err, imageverify.ErrWrongIdentity) && !strings.Contains(err.Error(), issuer) {
					t.Errorf("the error does not name the expected issuer: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Digest != d.DigestStr() || res.Format != tc.wantFormat {
				t.Errorf("result = %+v, want digest %s, format %s", res, d.DigestStr(), tc.wantFormat)
			}
		})
	}
}

// A keyless policy whose expression or trusted root cannot be used is
// refused before the registry is asked, naming where the root came from.
func TestVerifyKeylessRefusesAnUnusablePolicy(t *testing.T) {
	reg := cosigntest.New(t, "", "")
	d := reg.Push(t, "openbao/openbao", "2.4.0")
	ours := cosigntest.NewSigstore(t)
	reg.SignKeyless(t, ours, issuer, workflow, d, d)
	const source = "ConfigMap ns/sigstore, key trusted_root.json"
	cases := map[string]imageverify.Identity{
		"an empty trusted root":           {Issuer: issuer, Subject: workflow},
		"a trusted root that is no JSON":  {Issuer: issuer, Subject: workflow, TrustedRoot: []byte("-----BEGIN CERTIFICATE-----")},
		"a trusted root without any CA":   {Issuer: issuer, Subject: workflow, TrustedRoot: []byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`)},
		"a subject expression that fails": {Issuer: issuer, SubjectRegExp: "^(openbao", TrustedRoot: ours.TrustedRootJSON(t)},
	}
	for title, id := range cases {
		t.Run(title, func(t *testing.T) {
			id.TrustedRootSource = source
			reg.Requests()
			_, err := imageverify.NewCosign(0, nil).Verify(context.Background(), imageverify.Request{
				Image: reg.Host + "/openbao/openbao:2.4.0", Policy: imageverify.Policy{Keyless: &id},
			})
			if !errors.Is(err, imageverify.ErrInvalidPolicy) {
				t.Fatalf("err = %v, want %v", err, imageverify.ErrInvalidPolicy)
			}
			if id.SubjectRegExp == "" && !strings.Contains(err.Error(), source) {
				t.Errorf("the error does not name the trusted root's source: %v", err)
			}
			if reqs := reg.Requests(); len(reqs) > 0 {
				t.Errorf("an unusable policy asked the registry: %v", reqs)
			}
		})
	}
}

// The cache is keyed by identity and trusted root content: another
// identity or another root checks again.
func TestVerifyKeylessCachesByIdentityAndRoot(t *testing.T) {
	reg := cosigntest.New(t, "", "")
	ours, theirs := cosigntest.NewSigstore(t), cosigntest.NewSigstore(t)
	d := reg.Push(t, "openbao/openbao", "2.4.0")
	reg.SignKeyless(t, ours, issuer, workflow, d, d)
	v := imageverify.NewCosign(0, nil)
	verify := func(id imageverify.Identity) (imageverify.Result, error) {
		return v.Verify(context.Background(), imageverify.Request{
			Image: reg.Host + "/openbao/openbao:2.4.0", Policy: imageverify.Policy{Keyless: &id},
		})
	}
	good := imageverify.Identity{Issuer: issuer, Subject: workflow, TrustedRoot: ours.TrustedRootJSON(t)}
	if res, err := verify(good); err != nil || res.Cached {
		t.Fatalf("first verification: %+v, %v", res, err)
	}
	if res, err := verify(good); err != nil || !res.Cached {
		t.Fatalf("second verification: %+v, %v; want cached", res, err)
	}
	otherRoot := good
	otherRoot.TrustedRoot = theirs.TrustedRootJSON(t)
	if _, err := verify(otherRoot); !errors.Is(err, imageverify.ErrWrongIdentity) {
		t.Errorf("another trusted root: %v, want %v (checked again)", err, imageverify.ErrWrongIdentity)
	}
	otherSubject := good
	otherSubject.Subject = "mallory@example.com"
	if _, err := verify(otherSubject); !errors.Is(err, imageverify.ErrWrongIdentity) {
		t.Errorf("another subject: %v, want %v (checked again)", err, imageverify.ErrWrongIdentity)
	}
	if a, b := (imageverify.Policy{Keyless: &good}).ID(), (imageverify.Policy{Keyless: &otherRoot}).ID(); a == b {
		t.Errorf("the policy ID %s does not change with the trusted root", a)
	}
}

// Sigstore's public-good trusted root (trusted_root.json of its TUF
// repository, as sigstore-go v1.2.2 ships it) is a usable policy: an image
// signed on another Sigstore is refused for its signer, not for the root.
func TestVerifyKeylessWithThePublicGoodRoot(t *testing.T) {
	publicGood, err := os.ReadFile("testdata/trusted-root-public-good.json")
	if err != nil {
		t.Fatal(err)
	}
	reg := cosigntest.New(t, "", "")
	d := reg.Push(t, "openbao/openbao", "2.4.0")
	reg.SignKeyless(t, cosigntest.NewSigstore(t), issuer, workflow, d, d)
	id := imageverify.Identity{Issuer: issuer, Subject: workflow, TrustedRoot: publicGood, TrustedRootSource: "public good"}
	_, err = imageverify.NewCosign(0, nil).Verify(context.Background(), imageverify.Request{
		Image: reg.Host + "/openbao/openbao:2.4.0", Policy: imageverify.Policy{Keyless: &id},
	})
	if !errors.Is(err, imageverify.ErrWrongIdentity) {
		t.Fatalf("err = %v, want %v", err, imageverify.ErrWrongIdentity)
	}
}
