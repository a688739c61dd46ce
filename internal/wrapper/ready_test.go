package wrapper

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReadiness(t *testing.T) {
	cases := map[string]struct {
		health int
		leader Leader
		ready  bool
	}{
		"the active server is ready":                              {200, Leader{HAEnabled: true, IsSelf: true}, true},
		"a standby that knows the active server is ready":         {200, Leader{HAEnabled: true, LeaderAddress: "https://bao-0:8200"}, true},
		"a standby that does not know the active server is not":   {200, Leader{HAEnabled: true}, false},
		"a sealed server is not ready":                            {503, Leader{}, false},
		"an uninitialized server is not ready":                    {501, Leader{}, false},
		"a server without HA serves clients itself":               {200, Leader{}, true},
		"a sealed server is not ready whatever sys/leader said":   {503, Leader{HAEnabled: true, IsSelf: true}, false},
		"a standby answering sys/health with 429 is not counted ": {429, Leader{HAEnabled: true, LeaderAddress: "x"}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ready, reason := Readiness(tc.health, tc.leader)
			if ready != tc.ready {
				t.Fatalf("Readiness(%d, %+v) = %t (%s), want %t", tc.health, tc.leader, ready, reason, tc.ready)
			}
			if !ready && reason == "" {
				t.Error("not ready without a reason")
			}
		})
	}
}

// TestReadyAsksTheServerAtBAO_ADDR runs the check against a TLS server
// standing in for OpenBao, verified with the CA in BAO_CACERT.
func TestReadyAsksTheServerAtBAO_ADDR(t *testing.T) {
	cases := map[string]struct {
		health int
		leader string
		want   string // "" for ready, else part of the error
	}{
		"active":                     {200, `{"ha_enabled":true,"is_self":true,"leader_address":"https://bao-0:8200"}`, ""},
		"standby knowing the active": {200, `{"ha_enabled":true,"is_self":false,"leader_address":"https://bao-0:8200"}`, ""},
		"standby not knowing it":     {200, `{"ha_enabled":true,"is_self":false,"leader_address":""}`, "does not know the active server"},
		"sealed":                     {503, ``, "HTTP 503"},
		"sys/leader fails":           {200, `!500`, "sys/leader answers HTTP 500"},
		"sys/leader answers garbage": {200, `{`, "decode sys/leader"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/v1/sys/health":
					if r.URL.Query().Get("standbyok") != "true" {
						w.WriteHeader(http.StatusTooManyRequests)
						return
					}
					w.WriteHeader(tc.health)
				case "/v1/sys/leader":
					if tc.leader == "!500" {
						w.WriteHeader(http.StatusInternalServerError)
						return
					}
					_, _ = w.Write([]byte(tc.leader))
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			ca := filepath.Join(t.TempDir(), "ca.crt")
			if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("BAO_ADDR", srv.URL)
			t.Setenv("BAO_CACERT", ca)
			err := Ready(context.Background())
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("not ready: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Ready() = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestReadyTrustsOnlyBAO_CACERT(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	// Another CA: httptest's servers all present one certificate.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BAO_ADDR", srv.URL)
	t.Setenv("BAO_CACERT", ca)
	if err := Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Ready() against a server another CA signed = %v, want a certificate error", err)
	}
}

func TestReadyWithoutBAO_ADDRIsNotReady(t *testing.T) {
	t.Setenv("BAO_ADDR", "")
	if err := Ready(context.Background()); err == nil {
		t.Fatal("ready without an address")
	}
}

// TestReadyVerifiesTheServersStableName: a certificate the user provides
// names the servers' stable names, not the loopback address BAO_ADDR
// dials; the check verifies it for the host of BAO_API_ADDR.
func TestReadyVerifiesTheServersStableName(t *testing.T) {
	const stable = "bao-0.bao-internal.team.svc"
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "a user's CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), DNSNames: []string{stable},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sys/leader" {
			_, _ = w.Write([]byte(`{"ha_enabled":true,"is_self":true}`))
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}}}
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BAO_ADDR", srv.URL) // https://127.0.0.1:PORT
	t.Setenv("BAO_CACERT", ca)
	t.Setenv("BAO_API_ADDR", "https://"+stable+":8200")
	if err := Ready(context.Background()); err != nil {
		t.Fatalf("a certificate naming the stable name: %v", err)
	}
	t.Setenv("BAO_API_ADDR", "https://bao-1.bao-internal.team.svc:8200")
	if err := Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a certificate for another server's name = %v, want a certificate error", err)
	}
}
