package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// Problems found while reading a certificate and its key. They carry no key
// or certificate bytes, only what is wrong, so they are safe for events.
var (
	errMissing     = errors.New("missing")
	errInvalidPEM  = errors.New("invalid PEM")
	errKeyMismatch = errors.New("key does not match certificate")
)

// pair is a parsed certificate with its private key and the PEM they came from.
type pair struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

// parsePair reads a certificate and key; the error wraps errMissing when both
// are empty, errInvalidPEM when either does not parse, errKeyMismatch when
// the key is not the certificate's.
func parsePair(certPEM, keyPEM []byte) (*pair, error) {
	if len(certPEM) == 0 && len(keyPEM) == 0 {
		return nil, errMissing
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate: %v", errInvalidPEM, err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: private key: %v", errInvalidPEM, err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errKeyMismatch
	}
	return &pair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// parseCert parses the first PEM block, which must be a certificate.
func parseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	if block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("PEM block is %q, not CERTIFICATE", block.Type)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	return cert, nil
}

// parseCerts parses every CERTIFICATE block of a bundle, skipping blocks that
// do not parse: a bundle is rebuilt from the good ones.
func parseCerts(data []byte) []*x509.Certificate {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			certs = append(certs, cert)
		}
	}
}

// parseKey reads an ECDSA key in PKCS#8 or SEC 1 form. Its errors never quote
// the input: a key that does not parse may still be mostly secret.
func parseKey(data []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	var key crypto.PrivateKey
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("PEM block is %q, not a private key", block.Type)
	}
	if err != nil {
		return nil, errors.New("key does not parse")
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("key is %T, not ECDSA", key)
	}
	return ec, nil
}
