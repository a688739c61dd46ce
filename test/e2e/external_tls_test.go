package e2e_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
)

// TestExternalTLSClusterWaitsForItsSecretsThenForms creates a cluster with
// tls.mode External before its Secrets exist: it must say so in TLSReady
// and wait. Then the Secrets arrive, made here by a CA of the test's own
// with only the names docs/configure.md asks for (each pod under the headless
// Service and the client Service, in their .svc form), and the cluster
// must form three voters that serve exactly that certificate.
func TestExternalTLSClusterWaitsForItsSecretsThenForms(t *testing.T) {
	installOperator(t)
	t.Parallel()
	ctx := context.Background()
	cl := backupClient(t)
	ns := createNamespace(ctx, t, cl, "e2e-external-tls")
	obj := clusterObject(t, ns, "bao", nil)
	obj.Object["spec"].(map[string]any)["tls"] = map[string]any{"mode": "External"}
	start := time.Now()
	if err := cl.Create(ctx, obj); err != nil {
		t.Fatalf("create OpenBaoCluster: %v", err)
	}
	want := fmt.Sprintf("waiting for Secret bao-tls-ca (key ca.crt) and Secret bao-tls-server (keys tls.crt, tls.key) in namespace %s", ns)
	waitFor(ctx, t, time.Minute, "TLSReady False, waiting for the Secrets", func() (bool, string) {
		cond := tlsReady(ctx, t, cl, ns)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == v1alpha1.ReasonWaitingForExternalSecrets &&
			cond.Message == want, fmt.Sprintf("%+v", cond)
	})
	if st := clusterStatus(ctx, t, cl, ns, "bao"); st["initialized"] == true || st["phase"] == "Running" {
		t.Fatalf("the cluster went on without its TLS Secrets: %v", st)
	}
	logf("external TLS: TLSReady False (%s) %s after create", v1alpha1.ReasonWaitingForExternalSecrets, time.Since(start).Round(100*time.Millisecond))

	var names []string
	for i := range replicas {
		names = append(names, fmt.Sprintf("bao-%d.bao-internal.%s.svc", i, ns))
	}
	caPEM, certPEM, keyPEM := issueExternalTLS(t, append(names, "bao."+ns+".svc"))
	arrived := time.Now()
	createExternalTLSSecrets(ctx, t, cl, ns, caPEM, certPEM, keyPEM)
	waitFor(ctx, t, 3*time.Minute, fmt.Sprintf("phase Running with %d ready servers", replicas), func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "bao")
		return st["phase"] == "Running" && fmt.Sprint(st["readyReplicas"]) == fmt.Sprint(replicas), fmt.Sprint(st)
	})
	if cond := tlsReady(ctx, t, cl, ns); cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonExternalSecretsReady {
		t.Errorf("TLSReady %+v, want True, %s", cond, v1alpha1.ReasonExternalSecretsReady)
	}
	token := string(secretData(ctx, t, cl, ns, "bao-root-token", "token"))
	pods := serverPods(ctx, t, cl, ns, replicas)
	waitFor(ctx, t, 2*time.Minute, "three Raft voters", func() (bool, string) {
		voters, err := raftVoters(pods[0], ns, caPEM, token)
		return err == nil && len(voters) == replicas, fmt.Sprintf("voters %v (%v)", voters, err)
	})
	logf("external TLS: 3 voters %s after the Secrets arrived", time.Since(arrived).Round(100*time.Millisecond))
	leaf, _ := pem.Decode(certPEM)
	for _, p := range pods {
		if got := servedCertificate(t, p.Status.PodIP, dnsName(p, ns), caPEM); !bytes.Equal(got.Raw, leaf.Bytes) {
			t.Errorf("%s serves a certificate other than the one in bao-tls-server (serial %s)", p.Name, got.SerialNumber)
		}
	}
	assertNoLeaks(ctx, t, cl, ns, nil)
}

func tlsReady(ctx context.Context, t *testing.T, cl client.Client, ns string) *metav1.Condition {
	t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, c); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionTLSReady)
}

// issueExternalTLS makes a CA and a server certificate for names, as a
// user's own PKI would: nothing of the operator's is involved.
func issueExternalTLS(t *testing.T, names []string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e external CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	serverKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serverTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	serverDER, err := x509.CreateCertificate(rand.Reader, serverTmpl, caTmpl, &serverKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(serverKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: serverDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func createExternalTLSSecrets(ctx context.Context, t *testing.T, cl client.Client, ns string, caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "bao-tls-ca", Namespace: ns}, Data: map[string][]byte{"ca.crt": caPEM}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bao-tls-server", Namespace: ns}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}},
	} {
		if err := cl.Create(ctx, s); err != nil {
			t.Fatalf("create Secret %s: %v", s.Name, err)
		}
	}
}
