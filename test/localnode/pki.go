package localnode

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certRequest is one certificate the cluster needs.
type certRequest struct {
	File   string // base name of the .crt and .key files
	CN     string
	Orgs   []string
	DNS    []string
	IPs    []net.IP
	Server bool
	Client bool
	// FrontProxy signs with the front-proxy CA instead of the cluster CA.
	FrontProxy bool
}

// certRequests lists every certificate of the node: the API server's serving
// certificate, the kubelet's serving certificate and one client certificate
// per identity (the names and groups are what RBAC and the Node authorizer
// expect).
func certRequests(c Config, nodeIP net.IP) []certRequest {
	apiDNS := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	apiIPs := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(c.APIServerIP), nodeIP}
	return []certRequest{
		{File: "apiserver", CN: "kube-apiserver", DNS: apiDNS, IPs: apiIPs, Server: true},
		{File: "apiserver-kubelet-client", CN: "kube-apiserver-kubelet-client", Orgs: []string{"system:masters"}, Client: true},
		{File: "admin", CN: "localnode-admin", Orgs: []string{"system:masters"}, Client: true},
		{File: "controller-manager", CN: "system:kube-controller-manager", Client: true},
		{File: "scheduler", CN: "system:kube-scheduler", Client: true},
		{File: "kubelet", CN: "system:node:" + c.NodeName, Orgs: []string{"system:nodes"}, Client: true},
		{File: "kubelet-serving", CN: "system:node:" + c.NodeName, DNS: []string{c.NodeName, "localhost"}, IPs: []net.IP{nodeIP, net.ParseIP("127.0.0.1")}, Server: true},
		{File: "kube-proxy", CN: "system:kube-proxy", Client: true},
		// The API server's client identity towards aggregated API servers
		// (OLM's packageserver, metrics-server): they trust the user it
		// names in X-Remote-User because this certificate says so.
		{File: "front-proxy-client", CN: "front-proxy-client", Client: true, FrontProxy: true},
	}
}

// writePKI creates the cluster CA, the service-account signing key and
// every certificate in certRequests under dir.
func writePKI(dir string, reqs []certRequest, now time.Time) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create pki dir: %w", err)
	}
	caKey, caCert, err := newCA("localnode-ca", now)
	if err != nil {
		return err
	}
	if err := writeKeyPair(dir, "ca", caCert.Raw, caKey); err != nil {
		return err
	}
	// A CA of its own, as kubeadm has: kube-controller-manager signs
	// approved CSRs with the cluster CA, and such a certificate must never
	// pass as the front proxy.
	fpKey, fpCert, err := newCA("localnode-front-proxy-ca", now)
	if err != nil {
		return err
	}
	if err := writeKeyPair(dir, "front-proxy-ca", fpCert.Raw, fpKey); err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	if err := writeServiceAccountKey(dir, saKey); err != nil {
		return err
	}
	for _, r := range reqs {
		signer, signerKey := caCert, caKey
		if r.FrontProxy {
			signer, signerKey = fpCert, fpKey
		}
		der, key, err := issue(r, signer, signerKey, now)
		if err != nil {
			return fmt.Errorf("issue %s: %w", r.File, err)
		}
		if err := writeKeyPair(dir, r.File, der, key); err != nil {
			return err
		}
	}
	return nil
}

func newCA(cn string, now time.Time) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return key, cert, nil
}

func issue(r certRequest, ca *x509.Certificate, caKey crypto.Signer, now time.Time) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, fmt.Errorf("generate serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: r.CN, Organization: r.Orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     r.DNS,
		IPAddresses:  r.IPs,
	}
	if r.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if r.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign: %w", err)
	}
	return der, key, nil
}

func writeKeyPair(dir, name string, certDER []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode %s key: %w", name, err)
	}
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", certDER, 0o644); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, name+".key"), "EC PRIVATE KEY", keyDER, 0o600)
}

func writeServiceAccountKey(dir string, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode service-account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("encode service-account public key: %w", err)
	}
	if err := writePEM(filepath.Join(dir, "sa.key"), "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pubDER, 0o644)
}

func writePEM(path, blockType string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
