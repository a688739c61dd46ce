package e2e_test

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const replicas = 3

// TestClusterFormsServesTLSAndRotatesWithoutRestart creates a 3-replica
// OpenBaoCluster in a namespace that enforces the restricted level and lets
// the operator alone take it to three Raft voters. Then every server must
// serve a certificate that verifies against <cluster>-tls-ca for its stable
// DNS name, a forced reissue must reach every server with no restart, and
// no secret of the namespace may appear in a log, an event or a status.
func TestClusterFormsServesTLSAndRotatesWithoutRestart(t *testing.T) {
	cl := installOperator(t)
	t.Parallel()
	ctx := context.Background()
	ns := createNamespace(ctx, t, cl, "e2e-cluster")
	start := time.Now()
	createCluster(ctx, t, cl, ns, "bao")
	waitFor(ctx, t, 5*time.Minute, "phase Running with 3 ready servers", func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "bao")
		return st["phase"] == "Running" && fmt.Sprint(st["readyReplicas"]) == fmt.Sprint(replicas), fmt.Sprint(st)
	})
	logf("cluster Running with %d ready servers %s after create", replicas, time.Since(start).Round(100*time.Millisecond))

	token := string(secretData(ctx, t, cl, ns, "bao-root-token", "token"))
	caPEM := secretData(ctx, t, cl, ns, "bao-tls-ca", "ca.crt")
	pods := serverPods(ctx, t, cl, ns, replicas)
	waitFor(ctx, t, 2*time.Minute, "three Raft voters", func() (bool, string) {
		voters, err := raftVoters(pods[0], ns, caPEM, token)
		return err == nil && len(voters) == replicas, fmt.Sprintf("voters %v (%v)", voters, err)
	})
	logf("3 Raft voters %s after create", time.Since(start).Round(100*time.Millisecond))

	first := map[string]*x509.Certificate{}
	for _, p := range pods {
		first[p.Name] = servedCertificate(t, p.Status.PodIP, dnsName(p, ns), caPEM)
	}
	forceReissue(ctx, t, cl, ns)
	for _, p := range pods {
		waitFor(ctx, t, 3*time.Minute, p.Name+" to serve the reissued certificate", func() (bool, string) {
			got := servedCertificate(t, p.Status.PodIP, dnsName(p, ns), caPEM)
			return got.SerialNumber.Cmp(first[p.Name].SerialNumber) != 0, "still serial " + got.SerialNumber.String()
		})
	}
	for _, p := range serverPods(ctx, t, cl, ns, replicas) {
		if before := podByName(pods, p.Name); p.UID != before.UID || restarts(&p) != restarts(before) {
			t.Errorf("%s was restarted for the new certificate", p.Name)
		}
	}
	logf("reissued certificate served by all %d servers without a restart", replicas)
	bin := pluginStatusAndReport(ctx, t, cl, ns)
	pluginRotateCerts(ctx, t, cl, bin, ns, caPEM)
	pluginBaoEnv(t, bin, ns)
	pluginLogs(ctx, t, bin, ns) // after bao-env: its step-down moves the active server
	assertNoLeaks(ctx, t, cl, ns, nil)
}

func createCluster(ctx context.Context, t *testing.T, cl client.Client, ns, name string) {
	t.Helper()
	createClusterWith(ctx, t, cl, ns, name, nil)
}

func clusterStatus(ctx context.Context, t testing.TB, cl client.Client, ns, name string) map[string]any {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("openbao.org/v1alpha1")
	u.SetKind("OpenBaoCluster")
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	st, _ := u.Object["status"].(map[string]any)
	return st
}

func serverPods(ctx context.Context, t testing.TB, cl client.Client, ns string, n int) []corev1.Pod {
	t.Helper()
	return clusterServerPods(ctx, t, cl, ns, "bao", n)
}

func clusterServerPods(ctx context.Context, t testing.TB, cl client.Client, ns, cluster string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	for i := range n {
		p := &corev1.Pod{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("%s-%d", cluster, i)}, p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, *p)
	}
	return pods
}

func podByName(pods []corev1.Pod, name string) *corev1.Pod {
	for i := range pods {
		if pods[i].Name == name {
			return &pods[i]
		}
	}
	return &corev1.Pod{}
}

// dnsName is the server's name in its cluster's headless Service.
func dnsName(p corev1.Pod, ns string) string {
	return p.Name + "." + cmp.Or(p.Labels[v1alpha1.LabelCluster], "bao") + "-internal." + ns + ".svc"
}

// forceReissue deletes the server Secret; the operator reissues it from the
// same CA, the kubelet updates the projected volume, and each pod's
// bao-wrapper sends SIGHUP. The lock of config/admission refuses the
// deletion to an administrator, with the way past it in the message; a
// member of the break-glass group deletes it.
func forceReissue(ctx context.Context, t *testing.T, cl client.Client, ns string) {
	t.Helper()
	s := &corev1.Secret{}
	s.Name, s.Namespace = "bao-tls-server", ns
	err := cl.Delete(ctx, s)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "member of the group "+v1alpha1.BreakGlassGroup) {
		t.Fatalf("an administrator deleting %s by hand: got %v, want a refusal naming the break-glass group", s.Name, err)
	}
	if err := breakGlassClient(t).Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
}

func secretData(ctx context.Context, t testing.TB, cl client.Client, ns, name, key string) []byte {
	t.Helper()
	s := &corev1.Secret{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s.Data[key]
}

func tlsClient(caPEM []byte, serverName string, onLeaf func(*x509.Certificate)) *http.Client {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12,
			VerifyConnection: func(cs tls.ConnectionState) error {
				if onLeaf != nil {
					onLeaf(cs.PeerCertificates[0])
				}
				return nil
			}},
		DisableKeepAlives: true, // every call is a new handshake
	}}
}

// servedCertificate calls /v1/sys/health over TLS that must verify against
// caPEM for serverName, and returns the leaf the server presented.
func servedCertificate(t *testing.T, podIP, serverName string, caPEM []byte) *x509.Certificate {
	t.Helper()
	var leaf *x509.Certificate
	resp, err := tlsClient(caPEM, serverName, func(c *x509.Certificate) { leaf = c }).
		Get("https://" + net.JoinHostPort(podIP, "8200") + "/v1/sys/health?standbyok=true")
	if err != nil {
		t.Fatalf("TLS to %s as %s: %v", podIP, serverName, err)
	}
	resp.Body.Close()
	return leaf
}

// raftVoters reads the Raft configuration with the root token.
func raftVoters(p corev1.Pod, ns string, caPEM []byte, token string) ([]string, error) {
	_, voters, err := raftMembers(p, ns, caPEM, token)
	return voters, err
}

// raftMembers reads the Raft configuration with the root token and returns
// the node ids of every server and of the voters among them.
func raftMembers(p corev1.Pod, ns string, caPEM []byte, token string) (servers, voters []string, err error) {
	return raftMembersAt(p, "8200", ns, caPEM, token)
}

// raftMembersAt is raftMembers through the pod's port (8202, the internal
// listener, with ACME).
func raftMembersAt(p corev1.Pod, port, ns string, caPEM []byte, token string) (servers, voters []string, err error) {
	req, err := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(p.Status.PodIP, port)+"/v1/sys/storage/raft/configuration", nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("X-Vault-Token", token)
	resp, err := tlsClient(caPEM, dnsName(p, ns), nil).Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Config struct {
				Servers []struct {
					NodeID string `json:"node_id"`
					Voter  bool   `json:"voter"`
				} `json:"servers"`
			} `json:"config"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, nil, fmt.Errorf("status %d: %w", resp.StatusCode, err)
	}
	for _, s := range body.Data.Config.Servers {
		servers = append(servers, s.NodeID)
		if s.Voter {
			voters = append(voters, s.NodeID)
		}
	}
	return servers, voters, nil
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}
