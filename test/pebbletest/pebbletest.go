// Package pebbletest runs Pebble, Let's Encrypt's ACME test server (built
// by `make tools`), on loopback for the ACME-mode tests. It validates every
// challenge without dialling anyone (PEBBLE_VA_ALWAYS_VALID), so clients
// need no DNS name that resolves to them.
package pebbletest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/openbao/operator/test/emulator"
	"github.com/openbao/operator/test/freeport"
	"github.com/openbao/operator/test/testbin"
)

// Server is one running Pebble.
type Server struct {
	// Directory is the ACME directory URL, https://HOST:PORT/dir.
	Directory string
	// HTTPSCA is the PEM CA of Pebble's own HTTPS listeners, which an ACME
	// client must trust (tls_acme_ca_root); it is not the issuing root.
	HTTPSCA []byte
	mgmt    string
	client  *http.Client
	*emulator.Process
}

// Start starts Pebble on loopback and stops it at the test's end.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartOn(t, "127.0.0.1")
}

// StartOn starts Pebble listening on the IP address host (the pod
// bridge's gateway for pods to reach it) and stops it at the test's end.
func StartOn(t testing.TB, host string) *Server {
	t.Helper()
	ip := net.ParseIP(host)
	if ip == nil {
		t.Fatalf("pebbletest: %q is not an IP address", host)
	}
	bin, err := testbin.Path("pebble")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caPEM, certPEM, keyPEM, err := httpsCertificates(ip)
	if err != nil {
		t.Fatal(err)
	}
	ports := make([]int, 4) // directory, management, and the challenge ports it never dials
	for i := range ports {
		if ports[i], err = freeport.Get(host); err != nil {
			t.Fatal(err)
		}
	}
	config := map[string]any{"pebble": map[string]any{
		"listenAddress":           net.JoinHostPort(host, fmt.Sprint(ports[0])),
		"managementListenAddress": net.JoinHostPort(host, fmt.Sprint(ports[1])),
		"httpPort":                ports[2], "tlsPort": ports[3],
		"certificate": filepath.Join(dir, "cert.pem"), "privateKey": filepath.Join(dir, "key.pem"),
		"profiles": map[string]any{"default": map[string]any{"description": "test", "validityPeriod": 86400}},
	}}
	configJSON, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"cert.pem": certPEM, "key.pem": keyPEM, "pebble.json": configJSON} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	s := &Server{
		Directory: "https://" + net.JoinHostPort(host, fmt.Sprint(ports[0])) + "/dir", HTTPSCA: caPEM,
		mgmt: "https://" + net.JoinHostPort(host, fmt.Sprint(ports[1])),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}},
	}
	// No random waits and no nonces refused on purpose: the test's time
	// goes to OpenBao, not to exercising the client's retries.
	env := []string{"PEBBLE_VA_ALWAYS_VALID=1", "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0"}
	s.Process, err = emulator.Start(bin, []string{"-config", filepath.Join(dir, "pebble.json")}, env,
		func(ctx context.Context) error { _, err := s.get(ctx, s.Directory); return err }, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Root returns the root that signs the certificates Pebble issues. It is
// generated at each start.
func (s *Server) Root(ctx context.Context) (*x509.Certificate, error) {
	rootPEM, err := s.get(ctx, s.mgmt+"/roots/0")
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(rootPEM)
	if block == nil {
		return nil, fmt.Errorf("Pebble's root is not PEM")
	}
	return x509.ParseCertificate(block.Bytes)
}

func (s *Server) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, err
}

// httpsCertificates makes a CA and, signed by it, the certificate of
// Pebble's listeners for ip.
func httpsCertificates(ip net.IP) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pebbletest HTTPS CA"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "pebble"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{ip}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}
