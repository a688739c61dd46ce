package openbao_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/autopilot"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/pki"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/test/baotest"
	"github.com/openbao/operator/test/pebbletest"
)

// acmeDomain is the name clients reach the ACME listener by; Pebble
// validates it without resolving it.
const acmeDomain = "bao.example.com"

// TestACMEClusterFormsAgainstARealACMEServer runs three servers with the
// config.hcl the operator renders for an ACME cluster and the certificates
// its CA issues: the API listener orders its certificate from Pebble, the
// operator initializes pod-0 and the joiners join over the internal
// listener, and three voters form. A client then verifies each server's
// API listener against Pebble's root.
func TestACMEClusterFormsAgainstARealACMEServer(t *testing.T) {
	t.Parallel()
	acme := pebbletest.Start(t)
	c := &v1alpha1.OpenBaoCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "test"},
		Spec: v1alpha1.OpenBaoClusterSpec{Version: "2.4.0", Replicas: 3, TLS: v1alpha1.TLSSpec{
			Mode: v1alpha1.TLSModeACME, ACME: &v1alpha1.ACMESpec{Directory: acme.Directory, Domains: []string{acmeDomain}},
		}},
	}
	files := operatorTLSFiles(t, c)
	files["unseal.key"] = newUnsealKey(t)
	// Pebble's HTTPS CA stands in for the public roots a real directory
	// chains to: bao's ACME client reads the system roots.
	files["acme-https-ca.crt"] = acme.HTTPSCA
	config := acmeLoopbackConfig(t, c)

	start := time.Now()
	node0 := startACMENode(t, "node-0", "https://127.0.0.1:{{api_port}}", config, files)
	ca := files[pki.CAKey]
	c0 := baoClient(t, node0, ca, openbao.Token{})
	waitForDecision(t, c0, false, bootstrap.ActionInitialize, 30*time.Second)
	store := &memoryStore{}
	want := autopilot.For(3, autopilot.Overrides{}, autopilot.PhaseBootstrap)
	out, err := bootstrap.Initialize(context.Background(), c0, store, bootstrap.InitOptions{Autopilot: &want,
		ClientWithToken: func(tok openbao.Token) (openbao.Client, error) {
			return openbao.New(openbao.Options{Address: node0.Addr, CACert: ca, Token: tok})
		}})
	if err != nil || out.AutopilotErr != nil {
		t.Fatalf("initialize over the internal listener: %v, autopilot: %v", err, out.AutopilotErr)
	}
	nodes := []*baotest.Server{node0}
	for _, id := range []string{"node-1", "node-2"} {
		nodes = append(nodes, startACMENode(t, id, node0.Addr, config, files))
	}
	raft := waitForVoters(t, baoClient(t, node0, ca, store.Token()), 3, 2*time.Minute)
	t.Logf("3 voters %s after pod-0's start: %v", seconds(time.Since(start)), raft.Voters())

	root, err := acme.Root(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		checkACMEListener(t, n, root)
	}
}

// operatorTLSFiles issues the cluster's CA and server certificate as the
// operator does, laid out as the pod mounts them.
func operatorTLSFiles(t *testing.T, c *v1alpha1.OpenBaoCluster) map[string][]byte {
	t.Helper()
	spec, now := values.PKISpec(c), time.Now()
	obs, err := pki.Execute(pki.Decide(pki.Observed{}, spec, now), pki.Observed{}, spec, now, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	files := pki.ServerSecretData(obs.Server)
	files[pki.CAKey] = obs.CA.BundlePEM
	return files
}

// acmeLoopbackConfig is the config.hcl the operator renders for c, with
// the pod's ports, paths and pod-0's address remapped into a baotest
// server; {{leader}} is the address the node joins.
func acmeLoopbackConfig(t *testing.T, c *v1alpha1.OpenBaoCluster) string {
	t.Helper()
	cfg, err := values.ConfigFor(values.Input{Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	config := strings.NewReplacer(
		`"/etc/bao/tls/`, `"{{dir}}/`,
		`"file:///etc/bao/unseal/key"`, `"file://{{dir}}/unseal.key"`,
		`":8200"`, `"127.0.0.1:{{acme_port}}"`,
		`":8201"`, `"127.0.0.1:{{cluster_port}}"`,
		`":8202"`, `"127.0.0.1:{{api_port}}"`,
		`"127.0.0.1:8203"`, `"127.0.0.1:{{internal_cluster_port}}"`,
		`"`+c.PodAPIAddress(0)+`"`, `"{{leader}}"`,
		`"/bao/data/acme"`, `"{{dir}}/acme"`,
		`"/bao/data"`, `"{{dir}}/raft"`,
		"service_registration \"kubernetes\" {\n}\n", "",
	).Replace(cfg.HCL)
	for _, want := range []string{"{{leader}}", "{{acme_port}}", "{{internal_cluster_port}}", `leader_ca_cert_file   = "{{dir}}/ca.crt"`} {
		if !strings.Contains(config, want) {
			t.Fatalf("the rendered ACME config has no %s where the remapping expects it:\n%s", want, cfg.HCL)
		}
	}
	if strings.Contains(config, "/etc/bao") || strings.Contains(config, "service_registration") || strings.Contains(config, ".svc:") {
		t.Fatalf("remapping left pod paths or addresses behind:\n%s", config)
	}
	return config
}

// startACMENode starts a server whose {{api_port}} (Addr) is the internal
// listener, as BAO_API_ADDR is in a pod, and {{acme_port}} the API
// listener clients use.
func startACMENode(t *testing.T, id, leader, config string, files map[string][]byte) *baotest.Server {
	t.Helper()
	s := baotest.Start(t, baotest.Options{
		NodeID: id, Config: strings.ReplaceAll(config, "{{leader}}", leader), Files: files, CACert: files[pki.CAKey],
		Ports: []string{"acme_port", "internal_cluster_port"},
		Env: []string{
			"BAO_API_ADDR=https://127.0.0.1:{{api_port}}",
			"BAO_CLUSTER_ADDR=https://127.0.0.1:{{cluster_port}}",
			"BAO_RAFT_NODE_ID={{node_id}}",
			"SSL_CERT_FILE={{dir}}/acme-https-ca.crt",
		},
	})
	t.Cleanup(func() { dumpLog(t, s) })
	return s
}

// checkACMEListener asks the server's API listener for its health as a
// client of acmeDomain that trusts only Pebble's root. The first handshake
// orders the certificate, so the client tries again until it is served.
func checkACMEListener(t *testing.T, s *baotest.Server, root *x509.Certificate) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(root)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: acmeDomain, MinVersion: tls.VersionTLS12}}}
	url := fmt.Sprintf("https://127.0.0.1:%d/v1/sys/health", s.Ports["acme_port"])
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			chain := resp.TLS.VerifiedChains[0]
			if !chain[len(chain)-1].Equal(root) || chain[0].VerifyHostname(acmeDomain) != nil {
				t.Fatalf("%s: served %s, not Pebble's certificate for %s", url, chain[0].Subject, acmeDomain)
			}
			if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("%s: %s, want an active or standby server", url, resp.Status)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no handshake verified against Pebble's root: %v", url, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
