package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
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

// certManagerData is the data of a Secret as a cert-manager Certificate
// writes it: tls.crt is the leaf then its chain, ca.crt the issuing CA.
func certManagerData(leaf *pair, chain []*pair, ca []byte) map[string][]byte {
	crt := append([]byte(nil), leaf.certPEM...)
	for _, c := range chain {
		crt = append(crt, c.certPEM...)
	}
	data := map[string][]byte{CertKey: crt, KeyKey: leaf.keyPEM}
	if ca != nil {
		data[CAKey] = ca
	}
	return data
}

// rootAndIntermediate is a root that may sign CAs, and an intermediate it
// signed, as a CA issuer whose Secret holds an intermediate has them.
func rootAndIntermediate(t *testing.T, spec Spec) (root, intermediate *pair) {
	t.Helper()
	ca := func(cn string, parent *pair) *pair {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
			NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, SubjectKeyId: keyID(&key.PublicKey)}
		parentCert, parentKey := tmpl, key
		if parent != nil {
			parentCert, parentKey = parent.cert, parent.key
		}
		p, err := sign(tmpl, parentCert, key, parentKey, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	root = ca("root", nil)
	return root, ca("intermediate", root)
}

// selfSignedAt is what cert-manager's SelfSigned issuer writes: a
// certificate signed by its own key, which is also ca.crt.
func selfSignedAt(t *testing.T, spec Spec, at time.Time) *pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "bao"},
		DNSNames: DesiredSANs(spec).DNSNames, NotBefore: at.Add(-time.Hour), NotAfter: at.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	p, err := sign(tmpl, tmpl, key, key, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTheExternalSecretMustBeWhatCertManagerWrites: the Secret named by
// spec.tls.external.serverSecretRef is ready only as a cert-manager
// Certificate writes it (type kubernetes.io/tls; tls.crt, tls.key,
// ca.crt) with a certificate that chains to ca.crt, is valid now and
// names every server; otherwise the answer names the key at fault,
// without key material, and a missing ca.crt is told apart.
func TestTheExternalSecretMustBeWhatCertManagerWrites(t *testing.T) {
	spec := testSpec()
	ca, other := caAt(t, spec, t0), caAt(t, spec, t0)
	leaf := serverAt(t, ca, spec, t0)
	onePod := serverAt(t, ca, testSpec(withReplicas(1)), t0)
	root, inter := rootAndIntermediate(t, spec)
	chained := serverAt(t, inter, spec, t0)
	self := selfSignedAt(t, spec, t0)
	without := func(data map[string][]byte, key string) map[string][]byte {
		delete(data, key)
		return data
	}
	cases := []struct {
		name       string
		secretType string
		data       map[string][]byte
		want       string // "" for ready
		noCA       bool
	}{
		{"a CA issuer's Secret is ready", SecretTypeTLS, certManagerData(leaf, nil, ca.certPEM), "", false},
		{"a leaf then its intermediate in tls.crt, the root in ca.crt, is ready", SecretTypeTLS,
			certManagerData(chained, []*pair{inter}, root.certPEM), "", false},
		{"a self-signed issuer's Secret, whose ca.crt is the certificate itself, is ready", SecretTypeTLS,
			certManagerData(self, nil, self.certPEM), "", false},
		{"an Opaque Secret is refused by its type", "Opaque", certManagerData(leaf, nil, ca.certPEM),
			`its type is "Opaque", not kubernetes.io/tls`, false},
		{"a Secret without tls.key is refused naming tls.key", SecretTypeTLS,
			without(certManagerData(leaf, nil, ca.certPEM), KeyKey), "no tls.key", false},
		{"a Secret with an empty tls.crt is refused naming tls.crt", SecretTypeTLS,
			map[string][]byte{CertKey: {}, KeyKey: leaf.keyPEM, CAKey: ca.certPEM}, "no tls.crt", false},
		{"an ACME issuer's Secret without ca.crt is refused naming ca.crt", SecretTypeTLS,
			certManagerData(leaf, nil, nil), "no ca.crt", true},
		{"an empty ca.crt is refused as a missing one", SecretTypeTLS, certManagerData(leaf, nil, []byte{}), "no ca.crt", true},
		{"a certificate that does not chain to ca.crt is refused", SecretTypeTLS,
			certManagerData(leaf, nil, other.certPEM), "tls.crt does not chain to a certificate in ca.crt", false},
		{"a leaf whose intermediate is left out of tls.crt does not chain", SecretTypeTLS,
			certManagerData(chained, nil, root.certPEM), "tls.crt does not chain to a certificate in ca.crt", false},
		{"a certificate without a server's name is refused naming it", SecretTypeTLS,
			certManagerData(onePod, nil, ca.certPEM), "lacks names the servers are reached by: bao-1.bao-internal.vault.svc", false},
		{"a key of another certificate is refused", SecretTypeTLS,
			map[string][]byte{CertKey: leaf.certPEM, KeyKey: onePod.keyPEM, CAKey: ca.certPEM}, "not a certificate and its private key", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckServerSecret(tc.secretType, tc.data, spec, t0.Add(time.Hour))
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("got %+v, want ready", got)
			case tc.want == "":
				return
			case got == nil:
				t.Fatalf("got ready, want %q", tc.want)
			case !strings.Contains(got.Message, tc.want) || got.NoCA != tc.noCA:
				t.Fatalf("got %+v, want %q with NoCA %v", got, tc.want, tc.noCA)
			}
			for _, line := range strings.Split(string(tc.data[KeyKey]), "\n") {
				if len(line) > 20 && strings.Contains(got.Message, line) {
					t.Fatalf("the answer quotes the key: %q", got.Message)
				}
			}
		})
	}
}
