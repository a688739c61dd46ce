package e2e_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/test/localnode"
)

// TestClusterPodServesOperatorIssuedTLSAndReloadsWithoutRestart creates an
// OpenBaoCluster in a namespace that enforces the restricted level. Until
// the bootstrap step exists the cluster stays at one uninitialized server,
// which is enough to prove the TLS path end to end: the pod, running under
// bao-wrapper, serves a certificate that verifies against <cluster>-tls-ca
// for its stable DNS name, and a forced reissue reaches it with no restart.
func TestClusterPodServesOperatorIssuedTLSAndReloadsWithoutRestart(t *testing.T) {
	cl := installOperator(t)
	built, err := localnode.BuildImages(node, localnode.ImageOpenBao)
	if err != nil {
		t.Fatal(err)
	}
	ref := built[localnode.ImageOpenBao].Ref
	repo, tag, _ := strings.Cut(ref, ":")
	ctx := context.Background()
	ns := createNamespace(ctx, t, cl, "e2e-cluster")
	cluster := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "openbao.org/v1alpha1", "kind": "OpenBaoCluster",
		"metadata": map[string]any{"name": "bao", "namespace": ns},
		"spec": map[string]any{
			"version": tag, "image": repo, "replicas": int64(3),
			"storage": map[string]any{"size": "64Mi"},
		},
	}}
	if err := cl.Create(ctx, cluster); err != nil {
		t.Fatalf("create OpenBaoCluster: %v", err)
	}
	pod := waitForServerContainer(ctx, t, cl, ns, "bao-0")
	caPEM := secretData(ctx, t, cl, ns, "bao-tls-ca", "ca.crt")
	serverName := "bao-0.bao-internal." + ns + ".svc"
	first := servedCertificate(t, pod.Status.PodIP, serverName, caPEM)

	// Deleting the server Secret makes the operator reissue it from the
	// same CA; the kubelet updates the projected volume and bao-wrapper
	// sends SIGHUP.
	server := &corev1.Secret{}
	server.Name, server.Namespace = "bao-tls-server", ns
	if err := cl.Delete(ctx, server); err != nil {
		t.Fatal(err)
	}
	var second *x509.Certificate
	waitFor(ctx, t, 3*time.Minute, "the reissued certificate to be served", func() (bool, string) {
		second = servedCertificate(t, pod.Status.PodIP, serverName, caPEM)
		return second.SerialNumber.Cmp(first.SerialNumber) != 0, "still serial " + first.SerialNumber.String()
	})
	after := &corev1.Pod{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), after); err != nil {
		t.Fatal(err)
	}
	if after.UID != pod.UID || restarts(after) != restarts(pod) {
		t.Fatalf("the pod was restarted for the new certificate (uid %s→%s, restarts %d→%d)",
			pod.UID, after.UID, restarts(pod), restarts(after))
	}
	logf("certificate reissued and served without restart: serial %s → %s", first.SerialNumber, second.SerialNumber)
}

// waitForServerContainer waits until the pod's OpenBao container runs.
func waitForServerContainer(ctx context.Context, t *testing.T, cl client.Client, ns, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	waitFor(ctx, t, 3*time.Minute, name+"'s openbao container to run", func() (bool, string) {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			return false, err.Error()
		}
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == "openbao" && s.State.Running != nil && pod.Status.PodIP != "" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %s, statuses %+v", pod.Status.Phase, pod.Status.ContainerStatuses)
	})
	return pod
}

func secretData(ctx context.Context, t *testing.T, cl client.Client, ns, name, key string) []byte {
	t.Helper()
	s := &corev1.Secret{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s.Data[key]
}

// servedCertificate asks the server for /v1/sys/health over TLS that must
// verify against caPEM for serverName, and returns the leaf it served.
func servedCertificate(t *testing.T, podIP, serverName string, caPEM []byte) *x509.Certificate {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.crt holds no certificate")
	}
	var leaf *x509.Certificate
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12,
			VerifyConnection: func(cs tls.ConnectionState) error {
				leaf = cs.PeerCertificates[0]
				return nil
			}},
		DisableKeepAlives: true, // every call is a new handshake
	}}
	resp, err := client.Get("https://" + net.JoinHostPort(podIP, "8200") + "/v1/sys/health")
	if err != nil {
		t.Fatalf("TLS to %s as %s: %v", podIP, serverName, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented && resp.StatusCode != http.StatusOK {
		t.Fatalf("health answered %d, want 501 (uninitialized) or 200", resp.StatusCode)
	}
	return leaf
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}
