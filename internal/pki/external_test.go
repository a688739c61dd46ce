package pki

import (
	"strings"
	"testing"
	"time"
)

// TestCheckExternal: a user's certificates are ready only when the CA
// parses, the pair matches, the certificate chains to the CA, is valid now
// and names every server and the client Service; otherwise the answer
// says which, without key material.
func TestCheckExternal(t *testing.T) {
	spec := testSpec()
	ca, other := caAt(t, spec, t0), caAt(t, spec, t0)
	good := serverAt(t, ca, spec, t0)
	onePod := serverAt(t, ca, testSpec(withReplicas(1)), t0)
	cases := []struct {
		name             string
		caPEM, cert, key []byte
		now              time.Time
		want             string // "" for ready
	}{
		{"a matching set is ready", ca.certPEM, good.certPEM, good.keyPEM, t0.Add(time.Hour), ""},
		{"ca.crt that is no PEM", []byte("not a certificate"), good.certPEM, good.keyPEM, t0, "ca.crt holds no PEM certificate"},
		{"a key of another certificate", ca.certPEM, good.certPEM, onePod.keyPEM, t0, "not a certificate and its private key"},
		{"a certificate of another CA", other.certPEM, good.certPEM, good.keyPEM, t0, "does not chain to a certificate in ca.crt"},
		{"an expired certificate", ca.certPEM, good.certPEM, good.keyPEM, t0.Add(10 * 365 * 24 * time.Hour), "not now"},
		{"a certificate not yet valid", ca.certPEM, good.certPEM, good.keyPEM, t0.Add(-48 * time.Hour), "not now"},
		{"a certificate for fewer servers", ca.certPEM, onePod.certPEM, onePod.keyPEM, t0, "bao-1.bao-internal.vault.svc, bao-2.bao-internal.vault.svc"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckExternal(tc.caPEM, tc.cert, tc.key, spec, tc.now)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for _, line := range strings.Split(string(tc.key), "\n") {
				if len(line) > 20 && strings.Contains(got, line) {
					t.Fatalf("the answer quotes the key: %q", got)
				}
			}
		})
	}
}
