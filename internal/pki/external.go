package pki

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"time"
)

// SecretTypeTLS is the type of a Secret cert-manager writes
// (corev1.SecretTypeTLS, which this package does not import).
const SecretTypeTLS = "kubernetes.io/tls"

// ExternalProblem is what is wrong with the Secret of tls.mode External.
// Message names the key at fault and never holds key material; NoCA says
// ca.crt is absent or empty, which has its own reason and remedy.
type ExternalProblem struct {
	NoCA    bool
	Message string
}

// CheckServerSecret judges the Secret spec.tls.external.serverSecretRef
// names, as a cert-manager Certificate writes it: of type
// kubernetes.io/tls, with tls.crt (the certificate, then its chain),
// tls.key, and ca.crt (the issuing CA), each non-empty, and the
// certificates as CheckExternal wants them. It returns nil when all holds.
//
// A missing ca.crt is refused rather than taken from a second Secret:
// cert-manager leaves it empty only for issuers whose CA it does not know
// (ACME, some external issuers), and a public ACME CA cannot issue the
// in-cluster .svc names every server must carry, so such a certificate
// would fail the names check anyway. One Secret also keeps the trust
// anchor the one the issuer wrote beside the certificate, renewed with it,
// and keeps a second user Secret out of the pods and the backup Jobs.
func CheckServerSecret(secretType string, data map[string][]byte, spec Spec, now time.Time) *ExternalProblem {
	if secretType != SecretTypeTLS {
		return &ExternalProblem{Message: fmt.Sprintf("its type is %q, not %s (the type a cert-manager Certificate writes)",
			secretType, SecretTypeTLS)}
	}
	for _, key := range []string{CertKey, KeyKey} {
		if len(data[key]) == 0 {
			return &ExternalProblem{Message: "it has no " + key + " (or it is empty)"}
		}
	}
	if len(data[CAKey]) == 0 {
		return &ExternalProblem{NoCA: true, Message: "it has no ca.crt (or it is empty), the CA the operator, the servers and " +
			"the backup Jobs verify the servers against; cert-manager leaves ca.crt empty for ACME issuers, whose public CAs " +
			"cannot issue the servers' in-cluster .svc names: issue it from a CA, Vault or self-signed issuer"}
	}
	if problem := CheckExternal(data[CAKey], data[CertKey], data[KeyKey], spec, now); problem != "" {
		return &ExternalProblem{Message: problem}
	}
	return nil
}

// CheckExternal judges certificates a user provides (TLS mode External):
// ca.crt must hold PEM certificates, tls.crt and tls.key must be a pair,
// the server certificate must chain to ca.crt (through intermediates that
// tls.crt may carry after it), be valid now, and carry the names the
// operator and the servers reach each other by. It returns what is wrong,
// in words naming the key, never key material; "" when all holds.
func CheckExternal(caPEM, certPEM, keyPEM []byte, spec Spec, now time.Time) string {
	cas := parseCerts(caPEM)
	if len(cas) == 0 {
		return "ca.crt holds no PEM certificate"
	}
	roots := x509.NewCertPool()
	for _, ca := range cas {
		roots.AddCert(ca)
	}
	// The error of X509KeyPair is not passed on: it may describe the key.
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return "tls.crt and tls.key are not a certificate and its private key"
	}
	chain := parseCerts(certPEM)
	leaf := chain[0]
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return fmt.Sprintf("tls.crt is valid from %s to %s, not now", stamp(leaf.NotBefore), stamp(leaf.NotAfter))
	}
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: intermediates, CurrentTime: now}
	if _, err := leaf.Verify(opts); err != nil {
		return "tls.crt does not chain to a certificate in ca.crt: " + err.Error()
	}
	if missing := missingNames(leaf, RequiredNames(spec)); len(missing) > 0 {
		return fmt.Sprintf("tls.crt lacks names the servers are reached by: %s", strings.Join(missing, ", "))
	}
	return ""
}

// RequiredNames are the names a server certificate must answer for: each
// pod's stable name, by which the operator and joining peers reach it, and
// the client Service, in their .svc form.
func RequiredNames(s Spec) []string {
	var names []string
	for i := int32(0); i < s.Replicas; i++ {
		names = append(names, fmt.Sprintf("%s-%d.%s.%s.svc", s.ClusterName, i, s.HeadlessService, s.Namespace))
	}
	if s.ClientService != "" {
		names = append(names, s.ClientService+"."+s.Namespace+".svc")
	}
	return names
}

// missingNames lists the names leaf does not verify for, wildcards
// included.
func missingNames(leaf *x509.Certificate, names []string) []string {
	var missing []string
	for _, name := range names {
		if leaf.VerifyHostname(name) != nil {
			missing = append(missing, name)
		}
	}
	return missing
}
