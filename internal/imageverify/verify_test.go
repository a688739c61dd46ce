package imageverify_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore-go/pkg/sign"

	"github.com/openbao/operator/internal/imageverify"
	"github.com/openbao/operator/test/cosigntest"
)

// Each case pushes a fresh image under its own repository, signs (or
// forges) what the case says with cosign's library, and verifies with the
// key.
func TestVerifyAgainstARegistry(t *testing.T) {
	reg := cosigntest.New(t, "", "")
	key, other := cosigntest.NewKey(t), cosigntest.NewKey(t)
	cases := map[string]struct {
		sign       func(t *testing.T, target, elsewhere name.Digest)
		wantErr    error
		wantFormat imageverify.Format
	}{
		"a classic signature by the key verifies": {
			sign:       func(t *testing.T, d, _ name.Digest) { reg.SignClassic(t, key, d, d) },
			wantFormat: imageverify.FormatSignature,
		},
		"a bundle by the key verifies": {
			sign:       func(t *testing.T, d, _ name.Digest) { reg.SignBundle(t, key, d, d) },
			wantFormat: imageverify.FormatBundle,
		},
		"with both formats the bundle is checked first": {
			sign: func(t *testing.T, d, _ name.Digest) {
				reg.SignClassic(t, key, d, d)
				reg.SignBundle(t, key, d, d)
			},
			wantFormat: imageverify.FormatBundle,
		},
		"a bundle by another key does not hide a good classic signature": {
			sign: func(t *testing.T, d, _ name.Digest) {
				reg.SignBundle(t, other, d, d)
				reg.SignClassic(t, key, d, d)
			},
			wantFormat: imageverify.FormatSignature,
		},
		"an unsigned image is refused": {
			sign:    func(*testing.T, name.Digest, name.Digest) {},
			wantErr: imageverify.ErrUnsigned,
		},
		"a classic signature by another key is refused": {
			sign:    func(t *testing.T, d, _ name.Digest) { reg.SignClassic(t, other, d, d) },
			wantErr: imageverify.ErrWrongKey,
		},
		"a bundle by another key is refused": {
			sign:    func(t *testing.T, d, _ name.Digest) { reg.SignBundle(t, other, d, d) },
			wantErr: imageverify.ErrWrongKey,
		},
		"a classic signature copied from another digest is refused": {
			sign:    func(t *testing.T, d, elsewhere name.Digest) { reg.SignClassic(t, key, d, elsewhere) },
			wantErr: imageverify.ErrTampered,
		},
		"a bundle copied from another digest is refused": {
			sign:    func(t *testing.T, d, elsewhere name.Digest) { reg.SignBundle(t, key, d, elsewhere) },
			wantErr: imageverify.ErrTampered,
		},
	}
	i := 0
	for title, tc := range cases {
		i++
		t.Run(title, func(t *testing.T) {
			repo := fmt.Sprintf("openbao/case%d", i)
			d := reg.Push(t, repo, "2.4.0")
			elsewhere := reg.Push(t, repo, "other")
			tc.sign(t, d, elsewhere)
			v := imageverify.NewCosign(0, nil)
			res, err := v.Verify(context.Background(), imageverify.Request{
				Image: reg.Host + "/" + repo + ":2.4.0", Policy: imageverify.Policy{PublicKey: cosigntest.PublicPEM(t, key)},
			})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Digest != d.DigestStr() || res.Format != tc.wantFormat || res.Cached {
				t.Errorf("result = %+v, want digest %s, format %s, not cached", res, d.DigestStr(), tc.wantFormat)
			}
		})
	}
}

func TestVerifyRefusesWhatItCannotCheck(t *testing.T) {
	reg := cosigntest.New(t, "", "")
	key := cosigntest.NewKey(t)
	d := reg.Push(t, "openbao/openbao", "2.4.0")
	reg.SignClassic(t, key, d, d)
	down := httptest.NewServer(nil)
	downHost := strings.TrimPrefix(down.URL, "http://")
	down.Close()
	good := imageverify.Policy{PublicKey: cosigntest.PublicPEM(t, key)}
	cases := map[string]struct {
		image   string
		policy  imageverify.Policy
		wantErr error
	}{
		"a key that is no PEM":    {reg.Host + "/openbao/openbao:2.4.0", imageverify.Policy{PublicKey: "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n"}, imageverify.ErrInvalidPolicy},
		"a missing tag":           {reg.Host + "/openbao/openbao:9.9.9", good, imageverify.ErrImageNotFound},
		"a registry that is down": {downHost + "/openbao/openbao:2.4.0", good, imageverify.ErrRegistry},
	}
	for title, tc := range cases {
		t.Run(title, func(t *testing.T) {
			_, err := imageverify.NewCosign(0, nil).Verify(context.Background(), imageverify.Request{Image: tc.image, Policy: tc.policy})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if imageverify.Retryable(err) != errors.Is(tc.wantErr, imageverify.ErrRegistry) {
				t.Errorf("Retryable(%v) = %v", err, imageverify.Retryable(err))
			}
		})
	}
}

// A verified digest is not fetched again under the same policy: only the
// tag is resolved. Another policy, or a digest pushed out of the bounded
// cache, is checked again.
func TestVerifyCachesByDigestAndPolicy(t *testing.T) {
	reg := cosigntest.New(t, "", "")
	key, other := cosigntest.NewKey(t), cosigntest.NewKey(t)
	a := reg.Push(t, "openbao/a", "2.4.0")
	b := reg.Push(t, "openbao/b", "2.4.0")
	for _, d := range []name.Digest{a, b} {
		reg.SignBundle(t, key, d, d)
		reg.SignClassic(t, other, d, d)
	}
	v := imageverify.NewCosign(1, nil)
	verify := func(repo string, kp *sign.EphemeralKeypair) (imageverify.Result, []string) {
		t.Helper()
		reg.Requests()
		res, err := v.Verify(context.Background(), imageverify.Request{
			Image: reg.Host + "/" + repo + ":2.4.0", Policy: imageverify.Policy{PublicKey: cosigntest.PublicPEM(t, kp)},
		})
		if err != nil {
			t.Fatal(err)
		}
		return res, reg.Requests()
	}
	if res, _ := verify("openbao/a", key); res.Cached {
		t.Fatal("the first verification is cached")
	}
	res, reqs := verify("openbao/a", key)
	if !res.Cached || res.Digest != a.DigestStr() {
		t.Fatalf("second verification: %+v, want cached %s", res, a.DigestStr())
	}
	for _, r := range reqs {
		if r != "GET /v2/" && !strings.HasSuffix(r, "/manifests/2.4.0") {
			t.Errorf("a cached verification asked the registry for %s; it should only resolve the tag", r)
		}
	}
	if res, _ := verify("openbao/a", other); res.Cached || res.Format != imageverify.FormatSignature {
		t.Errorf("another policy: %+v, want checked again (classic signature by the other key)", res)
	}
	verify("openbao/b", key) // pushes a out of a cache of one
	if res, _ := verify("openbao/a", key); res.Cached {
		t.Error("the cache of one still held a after b")
	}
}

// Registry credentials come from imagePullSecrets, as a kubelet reads them.
func TestVerifyWithPullSecrets(t *testing.T) {
	reg := cosigntest.New(t, "puller", "s3cret")
	key := cosigntest.NewKey(t)
	d := reg.Push(t, "openbao/openbao", "2.4.0")
	reg.SignBundle(t, key, d, d)
	dockerConfig := func(user, pass string) []byte {
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
		return []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.Host, auth))
	}
	legacy := []byte(fmt.Sprintf(`{%q:{"username":"puller","password":"s3cret"}}`, reg.Host))
	cases := map[string]struct {
		secrets []imageverify.PullSecret
		wantErr error
	}{
		"no secret":                     {nil, imageverify.ErrRegistry},
		"a secret for another registry": {[]imageverify.PullSecret{{Name: "a", DockerConfigJSON: []byte(`{"auths":{"elsewhere.example.com":{"auth":"eDp5"}}}`)}}, imageverify.ErrRegistry},
		"a wrong password":              {[]imageverify.PullSecret{{Name: "a", DockerConfigJSON: dockerConfig("puller", "wrong")}}, imageverify.ErrRegistry},
		"the right dockerconfigjson after another": {[]imageverify.PullSecret{
			{Name: "a", DockerConfigJSON: []byte(`{"auths":{"elsewhere.example.com":{"auth":"eDp5"}}}`)},
			{Name: "b", DockerConfigJSON: dockerConfig("puller", "s3cret")},
		}, nil},
		"a legacy dockercfg": {[]imageverify.PullSecret{{Name: "a", DockerCfg: legacy}}, nil},
	}
	for title, tc := range cases {
		t.Run(title, func(t *testing.T) {
			kc, err := imageverify.NewKeychain(tc.secrets)
			if err != nil {
				t.Fatal(err)
			}
			res, err := imageverify.NewCosign(0, nil).Verify(context.Background(), imageverify.Request{
				Image: reg.Host + "/openbao/openbao:2.4.0", Policy: imageverify.Policy{PublicKey: cosigntest.PublicPEM(t, key)}, Keychain: kc,
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the password: %v", err)
			}
			if tc.wantErr == nil && res.Digest != d.DigestStr() {
				t.Errorf("digest = %s, want %s", res.Digest, d.DigestStr())
			}
		})
	}
}

func TestKeychainRefusesWhatIsNoDockerConfig(t *testing.T) {
	for title, s := range map[string]imageverify.PullSecret{
		"empty":    {Name: "pull"},
		"not JSON": {Name: "pull", DockerConfigJSON: []byte("user:s3cret")},
	} {
		t.Run(title, func(t *testing.T) {
			_, err := imageverify.NewKeychain([]imageverify.PullSecret{s})
			if !errors.Is(err, imageverify.ErrInvalidPolicy) || !strings.Contains(err.Error(), "pull") || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("err = %v, want one naming the Secret and not its content", err)
			}
		})
	}
}
