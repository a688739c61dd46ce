package plugin

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/podstate"
)

// testServerCert is a CA and a server certificate it signed for names
// (IPs where they parse), as the operator issues them.
func testServerCert(t *testing.T, names ...string) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "prod/bao OpenBao CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "bao"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	// Like the operator's servers: the server's own certificate only.
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, ca
}

// fakeForwarder "forwards" to an httptest TLS server standing in for the
// pod's API port, and records where it was asked to forward.
type fakeForwarder struct {
	server   *httptest.Server
	pod      string
	podPort  int
	finished chan error
}

func (f *fakeForwarder) Forward(_ context.Context, _, pod string, _, podPort int, _ io.Writer) (int, <-chan error, error) {
	f.pod, f.podPort = pod, podPort
	return f.server.Listener.Addr().(*net.TCPAddr).Port, f.finished, nil
}

func newFakeForwarder(t *testing.T, cert tls.Certificate) *fakeForwarder {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sys/health" {
			_, _ = io.WriteString(w, `{"initialized":true,"sealed":false,"standby":false}`)
			return
		}
		http.NotFound(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	finished := make(chan error, 1)
	finished <- nil // the forward ends once bao-env printed the exports
	return &fakeForwarder{server: srv, finished: finished}
}

// exports reads the `export K=V` lines bao-env printed.
func exports(out string) map[string]string {
	env := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(l, "export "), "="); ok && strings.HasPrefix(l, "export ") {
			env[k] = v
		}
	}
	return env
}

// healthThrough GETs /v1/sys/health as the bao CLI would with the
// exports: BAO_CACERT as the only trusted certificates.
func healthThrough(t *testing.T, env map[string]string) error {
	t.Helper()
	pemBytes, err := os.ReadFile(env["BAO_CACERT"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("BAO_CACERT %s holds no certificate", env["BAO_CACERT"])
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: env["BAO_TLS_SERVER_NAME"]}}}
	resp, err := hc.Get(env["BAO_ADDR"] + "/v1/sys/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %s", resp.Status)
	}
	return nil
}

// baoEnvFixture is a cluster prod/bao whose active server bao-1 serves
// cert, beside its CA Secret holding a private key; read records every
// object the controller-runtime client was asked for.
func baoEnvFixture(t *testing.T, cert tls.Certificate) (*Commands, *kubefake.Clientset, *fakeForwarder, *[]string) {
	t.Helper()
	cluster := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "bao"}}
	caSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: cluster.TLSCASecretName()},
		Data: map[string][]byte{"ca.crt": []byte("public"), "tls.key": []byte("the CA's private key")}}
	read := &[]string{}
	cl := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(cluster, caSecret).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			*read = append(*read, typeName(c, obj)+" "+key.Name)
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			*read = append(*read, typeName(c, list))
			return c.List(ctx, list, opts...)
		},
	}).Build()
	standby, active := labelledPod("prod", "bao-0", cluster.PodSelectorLabels()), labelledPod("prod", "bao-1", cluster.PodSelectorLabels())
	standby.Labels[podstate.LabelActive], active.Labels[podstate.LabelActive] = "false", "true"
	kube := kubefake.NewClientset(standby, active, caSecret.DeepCopy())
	fw := newFakeForwarder(t, cert)
	return &Commands{Client: cl, Kube: kube, Namespace: "prod", Now: time.Now, Forwarder: fw}, kube, fw, read
}

// TestBaoEnvReadsNoSecretAndPrintsWorkingExports: bao-env forwards to the
// active server's port 8200, reads no Secret (the CA Secret holds the CA's
// private key; the fakes record every request), and prints exports with
// which a client verifies the server.
func TestBaoEnvReadsNoSecretAndPrintsWorkingExports(t *testing.T) {
	for _, tc := range []struct {
		name, serverName string
		sans             []string
	}{
		{"the certificate names 127.0.0.1", "", []string{"localhost", "127.0.0.1", "bao.prod.svc"}},
		{"it does not", "bao.prod.svc", []string{"bao.prod.svc", "bao-0.bao-internal.prod.svc"}},
	} {
		cert, _ := testServerCert(t, tc.sans...)
		cmds, kube, fw, read := baoEnvFixture(t, cert)
		var out, notes bytes.Buffer
		err := cmds.BaoEnv(context.Background(), "bao", BaoEnvOptions{CacheDir: t.TempDir()}, &out, &notes)
		if !errors.Is(err, ErrForwardEnded) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, a := range kube.Actions() {
			if a.GetResource().Resource == "secrets" {
				t.Errorf("%s: bao-env asked the API for secrets: %v", tc.name, a)
			}
		}
		for _, r := range *read {
			if strings.Contains(r, "Secret") {
				t.Errorf("%s: bao-env read %s", tc.name, r)
			}
		}
		if fw.pod != "bao-1" || fw.podPort != 8200 {
			t.Errorf("%s: forwarded to %s:%d, want the active bao-1:8200", tc.name, fw.pod, fw.podPort)
		}
		env := exports(out.String())
		if env["BAO_ADDR"] != "https://"+fw.server.Listener.Addr().String() || env["BAO_TLS_SERVER_NAME"] != tc.serverName {
			t.Errorf("%s: exports %v", tc.name, env)
		}
		if err := healthThrough(t, env); err != nil {
			t.Errorf("%s: GET sys/health with the exports: %v", tc.name, err)
		}
		if !strings.Contains(notes.String(), "Ctrl-C") {
			t.Errorf("%s: stderr does not say how to stop: %q", tc.name, notes.String())
		}
	}
}

// TestBaoEnvAsJSONHoldsTheSameVariables: -o json gives a script the
// variables, and which pod they lead to.
func TestBaoEnvAsJSONHoldsTheSameVariables(t *testing.T) {
	cert, _ := testServerCert(t, "bao.prod.svc")
	cmds, _, fw, _ := baoEnvFixture(t, cert)
	var out, notes bytes.Buffer
	err := cmds.BaoEnv(context.Background(), "bao", BaoEnvOptions{CacheDir: t.TempDir(), Format: OutputJSON}, &out, &notes)
	if !errors.Is(err, ErrForwardEnded) {
		t.Fatal(err)
	}
	var v BaoEnvView
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("%v in %q", err, out.String())
	}
	if v.BaoAddr != "https://"+fw.server.Listener.Addr().String() || v.Pod != "bao-1" || !v.Pinned || v.BaoTLSServerName != "bao.prod.svc" {
		t.Errorf("view %+v", v)
	}
	env := map[string]string{"BAO_ADDR": v.BaoAddr, "BAO_CACERT": v.BaoCACert, "BAO_TLS_SERVER_NAME": v.BaoTLSServerName}
	if err := healthThrough(t, env); err != nil {
		t.Errorf("GET sys/health with the JSON's variables: %v", err)
	}
}

func typeName(c client.Client, obj runtime.Object) string {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return "unknown"
	}
	return gvk.Kind
}

// TestTrustAnchorsPreferTheCAThePresentedChainHolds: a CA in the chain is
// trusted (it outlives the server's certificate); without one the
// server's own certificate is pinned.
func TestTrustAnchorsPreferTheCAThePresentedChainHolds(t *testing.T) {
	cert, ca := testServerCert(t, "127.0.0.1")
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	if got, pinned := TrustAnchors([]*x509.Certificate{leaf, ca}); len(got) != 1 || got[0] != ca || pinned {
		t.Errorf("leaf and CA: got %d anchors, pinned %v", len(got), pinned)
	}
	if got, pinned := TrustAnchors([]*x509.Certificate{leaf}); len(got) != 1 || got[0] != leaf || !pinned {
		t.Errorf("leaf alone: got %d anchors, pinned %v", len(got), pinned)
	}
}

// TestActiveServerIsTheLabelledOneElseTheRaftLeader covers how bao-env
// chooses the pod to forward to.
func TestActiveServerIsTheLabelledOneElseTheRaftLeader(t *testing.T) {
	cluster := func(leader string) *v1alpha1.OpenBaoCluster {
		c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "bao"}}
		if leader != "" {
			c.Status.Raft = &v1alpha1.RaftStatus{Leader: leader}
		}
		return c
	}
	pod := func(name, active string, phase corev1.PodPhase) corev1.Pod {
		p := labelledPod("prod", name, map[string]string{})
		if active != "" {
			p.Labels[podstate.LabelActive] = active
		}
		p.Status.Phase = phase
		return *p
	}
	run := corev1.PodRunning
	for _, tc := range []struct {
		name   string
		leader string
		pods   []corev1.Pod
		want   string
	}{
		{"the labelled pod", "bao-0", []corev1.Pod{pod("bao-0", "false", run), pod("bao-2", "true", run)}, "bao-2"},
		{"no label: the Raft leader", "bao-1", []corev1.Pod{pod("bao-0", "", run), pod("bao-1", "", run)}, "bao-1"},
		{"two labels: the Raft leader of them", "bao-1", []corev1.Pod{pod("bao-0", "true", run), pod("bao-1", "true", run)}, "bao-1"},
		{"a labelled pod that is not running does not count", "bao-0", []corev1.Pod{pod("bao-0", "", run), pod("bao-1", "true", corev1.PodPending)}, "bao-0"},
		{"a pod of another name does not count", "", []corev1.Pod{pod("bao-x", "true", run), pod("bao-0", "true", run)}, "bao-0"},
		{"no label, the leader gone", "bao-2", []corev1.Pod{pod("bao-0", "", run)}, ""},
	} {
		got, err := ActiveServer(cluster(tc.leader), tc.pods)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}
