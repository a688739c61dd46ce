package imageverify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openbao/operator/config/crd"
	"github.com/openbao/operator/internal/crdschema"
)

const pemKey = "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"

var trustedRoot = map[string]any{"name": "sigstore-root"}

// The CRD's rules for spec.imageVerification, as the API server runs them.
func TestImageVerificationAdmission(t *testing.T) {
	s, err := crdschema.Load(crd.OpenBaoClusters, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		spec    map[string]any
		wantErr string // part of the message; empty: admitted
	}{
		"a public key":                            {map[string]any{"enabled": true, "publicKey": pemKey}, ""},
		"a keyless subject":                       {map[string]any{"enabled": true, "keyless": map[string]any{"issuer": "https://i", "trustedRootConfigMapRef": trustedRoot, "subject": "me"}}, ""},
		"a keyless subject expression":            {map[string]any{"enabled": true, "keyless": map[string]any{"issuer": "https://i", "trustedRootConfigMapRef": trustedRoot, "subjectRegExp": "^me$"}}, ""},
		"a keyless identity without trusted root": {map[string]any{"enabled": true, "keyless": map[string]any{"issuer": "https://i", "subject": "me"}}, "trustedRootConfigMapRef: Required value"},
		"a trusted root key that is no ConfigMap key": {map[string]any{"enabled": true, "keyless": map[string]any{"issuer": "https://i", "subject": "me",
			"trustedRootConfigMapRef": map[string]any{"name": "sigstore-root", "key": "a/b"}}}, "trustedRootConfigMapRef.key"},
		"off without a key":          {map[string]any{"enabled": false}, ""},
		"Warn":                       {map[string]any{"enabled": true, "publicKey": pemKey, "failurePolicy": "Warn"}, ""},
		"on without key or identity": {map[string]any{"enabled": true}, "needs publicKey or keyless"},
		"both key and identity": {map[string]any{"enabled": true, "publicKey": pemKey,
			"keyless": map[string]any{"issuer": "https://i", "trustedRootConfigMapRef": trustedRoot, "subject": "me"}}, "exclusive"},
		"a key that is no PEM":           {map[string]any{"enabled": true, "publicKey": "ssh-ed25519 AAAA"}, "PEM public key"},
		"a subject and an expression":    {map[string]any{"enabled": true, "keyless": map[string]any{"issuer": "https://i", "trustedRootConfigMapRef": trustedRoot, "subject": "me", "subjectRegExp": "x"}}, "exactly one of subject and subjectRegExp"},
		"neither subject nor expression": {map[string]any{"enabled": true, "keyless": map[string]any{"issuer": "https://i", "trustedRootConfigMapRef": trustedRoot}}, "exactly one of subject and subjectRegExp"},
		"another failure policy":         {map[string]any{"enabled": true, "publicKey": pemKey, "failurePolicy": "Ignore"}, "Unsupported value"},
	}
	for title, tc := range cases {
		t.Run(title, func(t *testing.T) {
			obj := map[string]any{
				"apiVersion": "openbao.org/v1alpha1", "kind": "OpenBaoCluster",
				"metadata": map[string]any{"name": "bao", "namespace": "ns"},
				"spec":     map[string]any{"version": "2.4.0", "imageVerification": tc.spec},
			}
			errs := s.Admit(context.Background(), obj, nil)
			got := errs.ToAggregate()
			switch {
			case tc.wantErr == "" && got != nil:
				t.Errorf("refused: %v", got)
			case tc.wantErr != "" && (got == nil || !strings.Contains(got.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error with %q", got, tc.wantErr)
			}
		})
	}
}
