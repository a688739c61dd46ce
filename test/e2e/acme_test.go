package e2e_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/test/pebbletest"
)

// acmeDomain is the name clients reach the ACME listener by; Pebble
// validates it without resolving it.
const acmeDomain = "bao.example.com"

// TestACMEClusterFormsAgainstPebble: a 3-replica ACME cluster whose
// directory is Pebble on the host, behind a private CA named by
// tls.acme.caSecretRef. The operator alone takes it to three Raft voters
// over the internal listener (port 8202), and every server's API port
// serves a certificate that verifies against Pebble's root for the ACME
// domain.
func TestACMEClusterFormsAgainstPebble(t *testing.T) {
	cl := installOperator(t)
	t.Parallel()
	ctx := context.Background()
	ns := createNamespace(ctx, t, cl, "e2e-acme")
	acme := pebbletest.StartOn(t, bridgeGateway(t))
	t.Cleanup(func() { showACMELogs(ctx, t, ns, acme) })
	caSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "acme-ca", Namespace: ns},
		Data: map[string][]byte{"ca.crt": acme.HTTPSCA}}
	if err := cl.Create(ctx, caSecret); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cluster := clusterObject(t, ns, "bao", nil)
	cluster.Object["spec"].(map[string]any)["tls"] = map[string]any{"mode": "ACME", "acme": map[string]any{
		"directory": acme.Directory, "domains": []any{acmeDomain}, "caSecretRef": map[string]any{"name": "acme-ca"},
	}}
	if err := cl.Create(ctx, cluster); err != nil {
		t.Fatalf("create OpenBaoCluster: %v", err)
	}
	pods := waitFormed(ctx, t, cl, ns, "8202") // the internal listener
	logf("ACME cluster: 3 Raft voters %s after create", time.Since(start).Round(100*time.Millisecond))

	root, err := acme.Root(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		checkACMECertificate(ctx, t, p.Status.PodIP, root)
	}
	logf("every server's API port serves a certificate from Pebble for %s", acmeDomain)
	assertNoLeaks(ctx, t, cl, ns, nil)
}

// checkACMECertificate calls the server's API port as a client of
// acmeDomain that trusts only Pebble's root; the first handshake orders
// the certificate, so it tries again until one verifies.
func checkACMECertificate(ctx context.Context, t *testing.T, podIP string, root *x509.Certificate) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(root)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: acmeDomain, MinVersion: tls.VersionTLS12}}}
	url := "https://" + net.JoinHostPort(podIP, "8200") + "/v1/sys/health?standbyok=true"
	waitFor(ctx, t, time.Minute, podIP+" to serve Pebble's certificate", func() (bool, string) {
		resp, err := c.Get(url)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		chain := resp.TLS.VerifiedChains[0]
		if !chain[len(chain)-1].Equal(root) {
			t.Fatalf("%s: chain ends at %s, not Pebble's root", url, chain[len(chain)-1].Subject)
		}
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}

// showACMELogs shows, when the test failed, what the servers' ACME clients
// and Pebble said.
func showACMELogs(ctx context.Context, t *testing.T, ns string, acme *pebbletest.Server) {
	if !t.Failed() {
		return
	}
	cs := clientset(t)
	for i := range replicas {
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("bao-%d", i), metav1.GetOptions{})
		if err != nil {
			continue
		}
		for _, line := range strings.Split(podLogs(ctx, t, cs, pod), "\n") {
			if strings.Contains(line, "acme") || strings.Contains(line, "TLS handshake") {
				t.Logf("%s: %s", pod.Name, line)
			}
		}
	}
	if data, err := os.ReadFile(acme.LogPath); err == nil {
		t.Logf("pebble:\n%s", data)
	}
}
