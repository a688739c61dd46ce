package values_test

import (
	"testing"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/values"
)

// TestTheACMECAIsMountedFromItsKey: tls.acme.caSecretRef is a SecretKeyRef
// like every reference to one value of a Secret: the chart mounts the key
// it names, and ca.crt when it names none.
func TestTheACMECAIsMountedFromItsKey(t *testing.T) {
	for _, tc := range []struct{ name, key, want string }{
		{"the ACME CA is mounted from the named key", "root.pem", "root.pem"},
		{"the ACME CA is mounted from ca.crt when no key is named", "", "ca.crt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(func(c *v1alpha1.OpenBaoCluster) {
				c.Spec.TLS = v1alpha1.TLSSpec{Mode: v1alpha1.TLSModeACME, ACME: &v1alpha1.ACMESpec{
					Directory: "https://acme.example/dir", Domains: []string{"bao.example.com"},
					CASecretRef: &v1alpha1.SecretKeyRef{Name: "acme-ca", Key: tc.key}}}
			})
			got, err := values.Compute(inputOf(c), values.Operator{}, values.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if s, k := lookup(got, "tls.acmeCA.secret"), lookup(got, "tls.acmeCA.key"); s != "acme-ca" || k != tc.want {
				t.Errorf("tls.acmeCA = %v/%v, want acme-ca/%s", s, k, tc.want)
			}
		})
	}
}
