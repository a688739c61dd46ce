package openbao_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/pki"
	"github.com/openbao/operator/test/baotest"
)

// joinerConfig is a second node that joins the first over its TLS API,
// trusting the CA bundle file of its own mounted Secret.
const joinerConfig = `
ui            = false
disable_mlock = true
api_addr      = "https://127.0.0.1:{{api_port}}"
cluster_addr  = "https://127.0.0.1:{{cluster_port}}"

storage "raft" {
  path    = "{{dir}}/raft"
  node_id = "{{node_id}}"
  retry_join {
    leader_api_addr     = "{{leader}}"
    leader_ca_cert_file = "{{tls}}/ca.crt"
  }
}

listener "tcp" {
  address         = "127.0.0.1:{{api_port}}"
  cluster_address = "127.0.0.1:{{cluster_port}}"
  tls_cert_file   = "{{tls}}/tls.crt"
  tls_key_file    = "{{tls}}/tls.key"
}

seal "static" {
  current_key_id = "test-1"
  current_key    = "file://{{leader_dir}}/unseal.key"
}
`

// TestPeerWithOverlapBundleJoinsLeaderOnNewCA: a Raft peer whose mounted
// bundle was last refreshed when the successor CA was published (old CA
// first, new CA second) joins a leader that already serves a certificate
// from the new CA. That is the state a peer may be in during the
// propagation delay, and bao must honour every CA in the file.
func TestPeerWithOverlapBundleJoinsLeaderOnNewCA(t *testing.T) {
	t.Parallel()
	spec := pki.Spec{ClusterName: "bao", Namespace: "test", HeadlessService: "bao-internal",
		ClientService: "bao", Replicas: 2, RotationPeriod: time.Hour, BundlePropagation: time.Minute}
	// bao checks certificates against the real clock, so the simulated
	// history starts in the past and its last step is now.
	start := time.Now().UTC().Truncate(time.Second).Add(-(spec.CAValidity() - spec.CARenewBefore()) - spec.Propagation())
	r := &rotation{t: t, dir: t.TempDir(), now: start, spec: spec}
	r.step(pki.ReasonMissing)
	r.now = r.now.Add(r.spec.CAValidity() - r.spec.CARenewBefore())
	r.step(pki.ReasonCANearExpiry)
	overlap := r.obs.Server.BundlePEM
	r.now = r.now.Add(r.spec.Propagation())
	r.step(pki.ReasonCAPromoted)
	if strings.Index(string(overlap), string(r.obs.CA.CertPEM)) <= 0 {
		t.Fatal("the new CA should be the second certificate of the overlap bundle")
	}

	leader := baotest.Start(t, baotest.Options{TLS: true, Config: strings.ReplaceAll(tlsConfig, "{{tls}}", r.dir)})
	client := bundleClient(overlap, r.now)
	if status := tlsRequest(t, client, http.MethodPut, leader.Addr+"/v1/sys/init", "{}"); status != http.StatusOK {
		t.Fatalf("init: %d", status)
	}
	waitForHealthTLS(t, client, leader.Addr, http.StatusOK)

	joinerTLS := t.TempDir()
	files := pki.ServerSecretData(r.obs.Server)
	files[pki.CAKey] = overlap // not yet refreshed
	if err := baotest.WriteSecretVolume(joinerTLS, files); err != nil {
		t.Fatal(err)
	}
	joiner := baotest.Start(t, baotest.Options{NodeID: "node-1", TLS: true, Config: strings.NewReplacer(
		"{{tls}}", joinerTLS, "{{leader}}", leader.Addr, "{{leader_dir}}", leader.Dir).Replace(joinerConfig)})
	t.Cleanup(func() { dumpLog(t, joiner) })
	// 429: an unsealed standby, which a joiner becomes only once it has
	// joined through the leader's TLS API and fetched the keyring.
	waitForHealthTLS(t, client, joiner.Addr, http.StatusTooManyRequests)
}

// bundleClient trusts only bundle, at the simulated time now.
func bundleClient(bundle []byte, now time.Time) *http.Client {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, Time: func() time.Time { return now }}}}
}

func tlsRequest(t *testing.T, client *http.Client, method, url, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body) // sys/init's body holds the root token: never logged
	return resp.StatusCode
}

func waitForHealthTLS(t *testing.T, client *http.Client, addr string, want int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	last := 0
	for time.Now().Before(deadline) {
		if last = tlsRequest(t, client, http.MethodGet, addr+"/v1/sys/health", ""); last == want {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("health of %s: %d, want %d", addr, last, want)
}

// dumpLog shows a server's log when the test failed.
func dumpLog(t testing.TB, s *baotest.Server) {
	t.Helper()
	if t.Failed() {
		t.Logf("log of %s:\n%s", s.Addr, s.Log())
	}
}
