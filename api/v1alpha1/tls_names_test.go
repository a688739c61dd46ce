package v1alpha1_test

import (
	"testing"

	"github.com/openbao/operator/api/v1alpha1"
)

// TestTheServedAndTrustedSecretsFollowTheTLSMode: in External mode the
// servers serve, and their clients trust, the Secret the spec names; in
// the other modes the operator's own, whose names are derived here.
func TestTheServedAndTrustedSecretsFollowTheTLSMode(t *testing.T) {
	external := &v1alpha1.ExternalTLSSpec{ServerSecretRef: v1alpha1.TLSSecretRef{Name: "bao-cert"}}
	for _, tc := range []struct {
		name          string
		tls           v1alpha1.TLSSpec
		serving, trus string
	}{
		{"OperatorManaged serves and trusts the operator's Secrets", v1alpha1.TLSSpec{Mode: v1alpha1.TLSModeOperatorManaged},
			"bao-tls-server", "bao-tls-ca"},
		{"ACME's internal listener serves and trusts the operator's Secrets", v1alpha1.TLSSpec{Mode: v1alpha1.TLSModeACME},
			"bao-tls-server", "bao-tls-ca"},
		{"External serves and trusts the one Secret the spec names", v1alpha1.TLSSpec{Mode: v1alpha1.TLSModeExternal, External: external},
			"bao-cert", "bao-cert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster("bao")
			c.Spec.TLS = tc.tls
			if got := c.ServingSecretName(); got != tc.serving {
				t.Errorf("ServingSecretName %q, want %q", got, tc.serving)
			}
			if got := c.TrustedCASecretName(); got != tc.trus {
				t.Errorf("TrustedCASecretName %q, want %q", got, tc.trus)
			}
		})
	}
}
