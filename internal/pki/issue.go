package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"slices"
	"time"
)

// NewCA creates a self-signed ECDSA P-256 root CA valid from now (backdated
// by ClockSkew) for spec.CAValidity(). It returns the certificate and the
// PKCS#8 key as PEM.
func NewCA(spec Spec, now time.Time, random io.Reader) (certPEM, keyPEM []byte, err error) {
	ca, err := newCA(spec, now, random)
	if err != nil {
		return nil, nil, err
	}
	return ca.certPEM, ca.keyPEM, nil
}

func newCA(spec Spec, now time.Time, random io.Reader) (*pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := newSerial(random)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		// The time in the name tells successive CAs apart in bundles and logs.
		Subject: pkix.Name{
			Organization: []string{"OpenBao Operator"},
			CommonName: fmt.Sprintf("%s/%s OpenBao CA %s", spec.Namespace, spec.ClusterName,
				now.UTC().Format("20060102T150405Z")),
		},
		NotBefore:             now.Add(-ClockSkew),
		NotAfter:              now.Add(spec.CAValidity()),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true, // it signs leaves only
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	return sign(tmpl, tmpl, key, key, random)
}

// IssueServerCert signs a server certificate for DesiredSANs(spec) with the
// given CA, valid for spec's rotation period but never beyond the CA.
func IssueServerCert(caCertPEM, caKeyPEM []byte, spec Spec, now time.Time, random io.Reader) (certPEM, keyPEM []byte, err error) {
	ca, err := parsePair(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("read CA: %w", err)
	}
	leaf, err := issueServer(ca, spec, now, random)
	if err != nil {
		return nil, nil, err
	}
	return leaf.certPEM, leaf.keyPEM, nil
}

func issueServer(ca *pair, spec Spec, now time.Time, random io.Reader) (*pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return nil, fmt.Errorf("generate server key: %w", err)
	}
	serial, err := newSerial(random)
	if err != nil {
		return nil, err
	}
	sans := DesiredSANs(spec)
	notAfter := now.Add(spec.rotationPeriod())
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter // a leaf must not outlive its CA: the bundle relies on it
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			Organization: []string{"OpenBao Operator"},
			CommonName:   spec.ClusterName + "." + spec.Namespace,
		},
		DNSNames:    sans.DNSNames,
		IPAddresses: sans.IPs,
		NotBefore:   now.Add(-ClockSkew),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		// Raft peers present this certificate both as servers and as clients.
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	return sign(tmpl, ca.cert, key, ca.key, random)
}

// sign creates the certificate and returns it with its key, parsed and as PEM.
func sign(tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey, random io.Reader) (*pair, error) {
	der, err := x509.CreateCertificate(random, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, fmt.Errorf("sign certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse signed certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return &pair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// newSerial draws a positive 128-bit serial number.
func newSerial(random io.Reader) (*big.Int, error) {
	if random == nil {
		random = rand.Reader
	}
	serial, err := rand.Int(random, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("draw serial number: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}

// keyID is RFC 7093 method 1: the leftmost 160 bits of the SHA-256 of the
// subject public key.
func keyID(pub *ecdsa.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil // cannot happen for a P-256 key; x509 then derives its own
	}
	sum := sha256.Sum256(der)
	return sum[:20]
}

// BundlePEM returns the CA bundle to publish: the active CA, then the
// successor if any, then every other CA of the previous bundle that has not
// expired at now. A previous CA is kept until it expires because every
// certificate it signed expires no later than it does (see issueServer).
func BundlePEM(activePEM, nextPEM, previousPEM []byte, now time.Time) []byte {
	certs := parseCerts(activePEM)
	certs = append(certs, parseCerts(nextPEM)...)
	old := parseCerts(previousPEM)
	// Newest first, so a human reading ca.crt sees the order of rotation.
	slices.SortStableFunc(old, func(a, b *x509.Certificate) int { return b.NotAfter.Compare(a.NotAfter) })
	for _, c := range old {
		if now.Before(c.NotAfter) {
			certs = append(certs, c)
		}
	}
	var out bytes.Buffer
	var seen [][]byte
	for _, c := range certs {
		if slices.ContainsFunc(seen, func(raw []byte) bool { return bytes.Equal(raw, c.Raw) }) {
			continue
		}
		seen = append(seen, c.Raw)
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return out.Bytes()
}

// CertHash is the hex SHA-256 of the DER of the first certificate in certPEM:
// the value of the CertHashAnnotation.
func CertHash(certPEM []byte) (string, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return "", fmt.Errorf("hash certificate: %w", err)
	}
	sum := sha256.Sum256(cert.Raw)
	return fmt.Sprintf("%x", sum), nil
}

// NotAfter is the expiry of the first certificate in certPEM.
func NotAfter(certPEM []byte) (time.Time, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return time.Time{}, fmt.Errorf("read certificate expiry: %w", err)
	}
	return cert.NotAfter, nil
}

// Validity is the validity window of the first certificate in certPEM.
func Validity(certPEM []byte) (notBefore, notAfter time.Time, err error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("read certificate validity: %w", err)
	}
	return cert.NotBefore, cert.NotAfter, nil
}
