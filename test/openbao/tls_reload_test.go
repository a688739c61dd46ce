package openbao_test

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/pki"
	"github.com/openbao/operator/test/baotest"
	"github.com/openbao/operator/test/testbin"
)

// tlsConfig is the listener the operator renders, reading the files of the
// mounted server Secret.
const tlsConfig = `
ui            = false
disable_mlock = true
api_addr      = "https://127.0.0.1:{{api_port}}"
cluster_addr  = "https://127.0.0.1:{{cluster_port}}"

storage "raft" {
  path    = "{{dir}}/raft"
  node_id = "{{node_id}}"
}

listener "tcp" {
  address         = "127.0.0.1:{{api_port}}"
  cluster_address = "127.0.0.1:{{cluster_port}}"
  tls_cert_file   = "{{tls}}/tls.crt"
  tls_key_file    = "{{tls}}/tls.key"
}

seal "static" {
  current_key_id = "test-1"
  current_key    = "file://{{dir}}/unseal.key"
}
`

// rotation drives the pure PKI over a simulated clock and publishes its
// output into a Secret volume that a real bao under bao-wrapper serves.
type rotation struct {
	t    *testing.T
	spec pki.Spec
	now  time.Time
	obs  pki.Observed
	dir  string // the mounted server Secret
}

// step decides at the current time, carries out the plan and publishes it.
func (r *rotation) step(want ...pki.Reason) {
	r.t.Helper()
	plan := pki.Decide(r.obs, r.spec, r.now)
	if !slices.Contains(want, plan.Reason) {
		r.t.Fatalf("at %s: plan %s (%s), want %s", r.now, plan.Reason, plan.Message, want)
	}
	out, err := pki.Execute(plan, r.obs, r.spec, r.now, rand.Reader)
	if err != nil {
		r.t.Fatal(err)
	}
	if again := pki.Decide(out, r.spec, r.now); !again.NothingToDo() {
		r.t.Fatalf("second pass at %s: %s", r.now, again.Message)
	}
	r.obs = out
	if err := baotest.WriteSecretVolume(r.dir, pki.ServerSecretData(out.Server)); err != nil {
		r.t.Fatal(err)
	}
	r.t.Logf("%s: %s", plan.Reason, plan.Message)
}

func (r *rotation) cert() []byte { return r.obs.Server.CertPEM }

// TestCertificateRotationReloadsWithoutRestart: bao 2.4.0 under the wrapper
// picks up a reissued server certificate and a CA renewal through SIGHUP,
// keeps its PID, and a client that trusts only the published CA bundle
// handshakes at every step.
func TestCertificateRotationReloadsWithoutRestart(t *testing.T) {
	t.Parallel()
	r := &rotation{t: t, dir: t.TempDir(), now: time.Now().UTC().Truncate(time.Second),
		spec: pki.Spec{ClusterName: "bao", Namespace: "test", HeadlessService: "bao-internal",
			ClientService: "bao", Replicas: 3, RotationPeriod: time.Hour, BundlePropagation: time.Minute}}
	r.step(pki.ReasonMissing)
	firstBundle := r.obs.Server.BundlePEM

	watch := strings.Join([]string{"tls.crt", "tls.key", "ca.crt"}, ","+r.dir+"/")
	bao := baotest.Start(t, baotest.Options{
		TLS:     true,
		Config:  strings.ReplaceAll(tlsConfig, "{{tls}}", r.dir),
		Wrapper: []string{buildWrapper(t), "-interval", "200ms", "-watch", r.dir + "/" + watch, "--"},
	})
	baoPID := childOf(t, bao.PID())
	addr := strings.TrimPrefix(bao.Addr, "https://")
	expectServed(t, addr, firstBundle, r.now, r.cert())

	// The server certificate enters its rotation window and is reissued.
	r.now = r.now.Add(r.spec.RotationPeriod - r.spec.RenewBefore() + time.Minute)
	r.step(pki.ReasonWithinRotationWindow)
	expectServed(t, addr, firstBundle, r.now, r.cert())
	preRenewal := r.obs.Server.BundlePEM

	// The CA nears its end: a successor is published beside it while the old
	// CA still signs. A client holding the pre-renewal bundle still works.
	r.now = r.now.Add(r.spec.CAValidity() - r.spec.CARenewBefore())
	r.step(pki.ReasonCANearExpiry)
	overlap := r.obs.Server.BundlePEM
	if n := strings.Count(string(overlap), "BEGIN CERTIFICATE"); n != 2 {
		t.Fatalf("overlap bundle holds %d CAs, want 2", n)
	}
	expectServed(t, addr, preRenewal, r.now, r.cert())
	expectServed(t, addr, overlap, r.now, r.cert())

	// After the propagation delay the successor signs; clients that picked
	// up the overlap bundle keep working, one that never refreshed does not.
	r.now = r.now.Add(r.spec.Propagation())
	r.step(pki.ReasonCAPromoted)
	expectServed(t, addr, overlap, r.now, r.cert())
	if err := handshake(addr, preRenewal, r.now, nil); err == nil {
		t.Fatal("a client trusting only the old CA accepted the new CA's certificate")
	}

	// The server certificate keeps rotating under the new CA; once the old
	// CA has expired it leaves the bundle.
	updates := 3
	for strings.Count(string(r.obs.Server.BundlePEM), "BEGIN CERTIFICATE") > 1 {
		r.now = r.now.Add(r.spec.RotationPeriod - r.spec.RenewBefore() + time.Minute)
		r.step(pki.ReasonWithinRotationWindow, pki.ReasonBundleChanged)
		updates++
		expectServed(t, addr, r.obs.Server.BundlePEM, r.now, r.cert())
		if updates > 10 {
			t.Fatal("the old CA never left the bundle")
		}
	}

	if got := childOf(t, bao.PID()); got != baoPID {
		t.Fatalf("bao pid changed from %d to %d: it was restarted", baoPID, got)
	}
	if n := strings.Count(bao.Log(), "sending SIGHUP"); n != updates {
		t.Errorf("wrapper sent SIGHUP %d times for %d updates", n, updates)
	}
	expectHealthAnswers(t, bao.Addr, r.obs.Server.BundlePEM, r.now)
}

// expectServed waits until a fresh handshake that trusts bundle sees the
// certificate certPEM (by serial), and checks that the served certificate's
// hash is the one the operator annotates the pod with.
func expectServed(t *testing.T, addr string, bundle []byte, now time.Time, certPEM []byte) {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	want, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	serial := want.SerialNumber
	wantHash, err := pki.CertHash(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	deadline := began.Add(15 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		var leaf *x509.Certificate
		last = handshake(addr, bundle, now, &leaf)
		if last == nil && leaf.SerialNumber.Cmp(serial) == 0 {
			if got := fmt.Sprintf("%x", sha256.Sum256(leaf.Raw)); got != wantHash {
				t.Fatalf("served certificate hash %s, CertHash %s", got, wantHash)
			}
			t.Logf("serial %x served %s after publishing", serial, time.Since(began).Round(time.Millisecond))
			return
		}
		if last == nil {
			last = fmt.Errorf("served serial %x, want %x", leaf.SerialNumber, serial)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("handshake with %s: %v", addr, last)
}

// handshake connects as a client that trusts only bundle, at the simulated
// time now, and returns the verified leaf.
func handshake(addr string, bundle []byte, now time.Time, leaf **x509.Certificate) error {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return errors.New("bundle holds no certificate")
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "localhost", Time: func() time.Time { return now }})
	if err != nil {
		return err
	}
	defer conn.Close()
	if leaf != nil {
		*leaf = conn.ConnectionState().PeerCertificates[0]
	}
	return nil
}

// expectHealthAnswers checks that the API itself answers over the reloaded
// listener (501: not initialized).
func expectHealthAnswers(t *testing.T, addr string, bundle []byte, now time.Time) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, Time: func() time.Time { return now }}}}
	resp, err := client.Get(addr + "/v1/sys/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented {
		t.Fatalf("health: %d", resp.StatusCode)
	}
}

// buildWrapper compiles cmd/bao-wrapper, as the bao-wrapper image ships it.
func buildWrapper(t *testing.T) string {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bao-wrapper")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/bao-wrapper")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build bao-wrapper: %v\n%s", err, msg)
	}
	return out
}

// childOf returns the single child process of pid: bao under the wrapper.
// Children are listed per thread, and Go forks from any thread.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	lists, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(lists) == 0 {
		t.Fatalf("list children of %d: %v", pid, err)
	}
	var fields []string
	for _, list := range lists {
		data, _ := os.ReadFile(list)
		fields = append(fields, strings.Fields(string(data))...)
	}
	if len(fields) != 1 {
		t.Fatalf("wrapper %d has children %v, want one", pid, fields)
	}
	child, _ := strconv.Atoi(fields[0])
	return child
}

// TestWrapperExitsWithBaosExitCode: bao refusing its configuration exits
// with some code; under the wrapper the container must exit with the same.
func TestWrapperExitsWithBaosExitCode(t *testing.T) {
	t.Parallel()
	bao, err := testbin.Path("bao")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"server", "-config=" + filepath.Join(t.TempDir(), "missing.hcl")}
	direct := exec.Command(bao, args...).Run()
	wrapped := exec.Command(buildWrapper(t), append([]string{"--", bao}, args...)...).Run()
	var d, w *exec.ExitError
	if !errors.As(direct, &d) || !errors.As(wrapped, &w) {
		t.Fatalf("want both to fail: direct %v, wrapped %v", direct, wrapped)
	}
	if d.ExitCode() != w.ExitCode() {
		t.Fatalf("bao exits %d, the wrapper %d", d.ExitCode(), w.ExitCode())
	}
}
