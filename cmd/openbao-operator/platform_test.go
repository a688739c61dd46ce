package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func publicKeyPEM(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func TestThePlatformsSignaturePolicyIsAKeyOrAWholeKeylessIdentity(t *testing.T) {
	key := writeFile(t, "cosign.pub", publicKeyPEM(t))
	notKey := writeFile(t, "junk.pub", "not a key")
	root := writeFile(t, "trusted_root.json", "{}")
	tests := map[string]struct {
		flags platformFlags
		want  string // "" none, "key", or an error's phrase
	}{
		"nothing set: no policy":           {platformFlags{}, ""},
		"a key file":                       {platformFlags{keyFile: key}, "key"},
		"a file that is no key is refused": {platformFlags{keyFile: notKey}, "publicKey"},
		"a missing file is refused":        {platformFlags{keyFile: key + ".gone"}, "no such file"},
		"a key and an identity exclude each other": {platformFlags{keyFile: key, issuer: "https://issuer"},
			"exclude each other"},
		"an identity without a subject is refused": {platformFlags{issuer: "https://issuer", trustedRootFile: root},
			"exactly one of"},
		"an identity without a trusted root is refused": {platformFlags{issuer: "https://issuer", subject: "me"},
			"--image-signature-trusted-root-file"},
		"a trusted root that is none is refused": {platformFlags{issuer: "https://issuer", subject: "me", trustedRootFile: root},
			"no Sigstore TrustedRoot"},
	}
	for title, tc := range tests {
		t.Run(title, func(t *testing.T) {
			v, err := tc.flags.verification()
			switch {
			case tc.want == "" && (v != nil || err != nil):
				t.Errorf("got %+v, %v; want no policy", v, err)
			case tc.want == "key" && (err != nil || v == nil || !strings.Contains(v.Policy.PublicKey, "PUBLIC KEY")):
				t.Errorf("got %+v, %v; want the key's policy", v, err)
			case tc.want != "" && tc.want != "key" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %+v, %v; want an error naming %q", v, err, tc.want)
			}
		})
	}
}

func TestTheAllowListsComeFromFlagsOrTheirEnvironmentVariables(t *testing.T) {
	t.Setenv("ALLOWED_TOLERATION_KEYS", "dedicated, gpu")
	var p platformFlags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	p.bind(fs)
	if err := fs.Parse([]string{"--allowed-priority-classes=openbao,,high"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.fields.TolerationKeys, []string{"dedicated", "gpu"}) || !slices.Equal(p.fields.PriorityClasses, []string{"high", "openbao"}) ||
		p.fields.AnnotationPrefixes != nil {
		t.Errorf("fields %+v", p.fields)
	}
}
