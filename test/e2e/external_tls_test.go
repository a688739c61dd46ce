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
	"maps"
	"math/big"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/test/fixtures"
)

// externalSecret is the Secret the cluster of the External TLS test names
// in spec.tls.external.serverSecretRef.
const externalSecret = "bao-cert"

// TestExternalTLSFromACertManagerSecretFormsAndRenews creates a cluster
// with tls.mode External before its Secret exists: it must say so in
// TLSReady and wait. Then the Secret arrives as a cert-manager Certificate
// writes it (type kubernetes.io/tls; tls.crt, tls.key, ca.crt; cert-manager's
// label and annotations: no cert-manager runs here, its Secret's shape is
// reproduced by fixtures.CertManagerSecret), issued by a CA of the test's
// own for only the names docs/configure.md asks for (each pod under the
// headless Service and the client Service, in their .svc form). The
// cluster must form three voters that serve exactly that certificate. Then
// the Secret is renewed in place, as cert-manager renews it: every server
// must serve the new certificate without a restart, and the Secret must
// carry nothing of the operator's.
func TestExternalTLSFromACertManagerSecretFormsAndRenews(t *testing.T) {
	installOperator(t)
	t.Parallel()
	ctx := context.Background()
	cl := backupClient(t)
	ns := createNamespace(ctx, t, cl, "e2e-external-tls")
	obj := clusterObject(t, ns, "bao", nil)
	obj.Object["spec"].(map[string]any)["tls"] = map[string]any{"mode": "External",
		"external": map[string]any{"serverSecretRef": map[string]any{"name": externalSecret}}}
	start := time.Now()
	if err := cl.Create(ctx, obj); err != nil {
		t.Fatalf("create OpenBaoCluster: %v", err)
	}
	want := fmt.Sprintf("waiting for Secret %s (spec.tls.external.serverSecretRef; type kubernetes.io/tls, keys tls.crt, tls.key, ca.crt) in namespace %s",
		externalSecret, ns)
	waitFor(ctx, t, time.Minute, "TLSReady False, waiting for the Secret", func() (bool, string) {
		cond := tlsReady(ctx, t, cl, ns)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == v1alpha1.ReasonWaitingForExternalSecrets &&
			cond.Message == want, fmt.Sprintf("%+v", cond)
	})
	if st := clusterStatus(ctx, t, cl, ns, "bao"); st["initialized"] == true || st["phase"] == "Running" {
		t.Fatalf("the cluster went on without its TLS Secret: %v", st)
	}
	logf("external TLS: TLSReady False (%s) %s after create", v1alpha1.ReasonWaitingForExternalSecrets, time.Since(start).Round(100*time.Millisecond))

	var names []string
	for i := range replicas {
		names = append(names, fmt.Sprintf("bao-%d.bao-internal.%s.svc", i, ns))
	}
	pki := newExternalCA(t)
	certPEM, keyPEM := pki.issue(t, append(names, "bao."+ns+".svc"))
	arrived := time.Now()
	secret := fixtures.CertManagerSecret(ns, "bao", "openbao-ca", externalSecret, certPEM, keyPEM, pki.caPEM)
	if err := cl.Create(ctx, secret); err != nil {
		t.Fatalf("create Secret %s: %v", externalSecret, err)
	}
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
		voters, err := raftVoters(pods[0], ns, pki.caPEM, token)
		return err == nil && len(voters) == replicas, fmt.Sprintf("voters %v (%v)", voters, err)
	})
	logf("external TLS: 3 voters %s after the Secret arrived", time.Since(arrived).Round(100*time.Millisecond))
	assertServed(t, pods, ns, pki.caPEM, certPEM)

	renewedPEM, renewedKey := pki.issue(t, append(names, "bao."+ns+".svc"))
	renewed := fixtures.CertManagerSecret(ns, "bao", "openbao-ca", externalSecret, renewedPEM, renewedKey, pki.caPEM)
	if err := cl.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	secret.Data, secret.Annotations = renewed.Data, renewed.Annotations
	if err := cl.Update(ctx, secret); err != nil {
		t.Fatalf("renew Secret %s: %v", externalSecret, err)
	}
	renewedAt := time.Now()
	leaf, _ := pem.Decode(renewedPEM)
	for _, p := range pods {
		waitFor(ctx, t, 3*time.Minute, p.Name+" to serve the renewed certificate", func() (bool, string) {
			got := servedCertificate(t, p.Status.PodIP, dnsName(p, ns), pki.caPEM)
			return bytes.Equal(got.Raw, leaf.Bytes), "still serial " + got.SerialNumber.String()
		})
	}
	for _, p := range serverPods(ctx, t, cl, ns, replicas) {
		if before := podByName(pods, p.Name); p.UID != before.UID || restarts(&p) != restarts(before) {
			t.Errorf("%s was restarted for the renewed certificate", p.Name)
		}
	}
	logf("external TLS: renewed certificate served by all %d servers %s after the renewal, without a restart",
		replicas, time.Since(renewedAt).Round(100*time.Millisecond))
	got := &corev1.Secret{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(secret), got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != secret.ResourceVersion || len(got.OwnerReferences) > 0 || !maps.Equal(got.Labels, secret.Labels) {
		t.Errorf("the operator wrote Secret %s: labels %v, owners %v", externalSecret, got.Labels, got.OwnerReferences)
	}
	assertNoLeaks(ctx, t, cl, ns, map[string]string{"the tls.key before the renewal": string(keyPEM)})
}

// assertServed checks every pod serves certPEM's leaf, verified by caPEM.
func assertServed(t *testing.T, pods []corev1.Pod, ns string, caPEM, certPEM []byte) {
	t.Helper()
	leaf, _ := pem.Decode(certPEM)
	for _, p := range pods {
		if got := servedCertificate(t, p.Status.PodIP, dnsName(p, ns), caPEM); !bytes.Equal(got.Raw, leaf.Bytes) {
			t.Errorf("%s serves a certificate other than the one in %s (serial %s)", p.Name, externalSecret, got.SerialNumber)
		}
	}
}

func tlsReady(ctx context.Context, t *testing.T, cl client.Client, ns string) *metav1.Condition {
	t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, c); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionTLSReady)
}

// externalCA is a user's own PKI, as a cert-manager CA Issuer holds it:
// nothing of the operator's is involved.
type externalCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	caPEM  []byte
	serial int64
}

func newExternalCA(t *testing.T) *externalCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e external CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &externalCA{cert: cert, key: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 1}
}

// issue signs a server certificate for names with a new key, each with
// its own serial, as a renewal does.
func (ca *externalCA) issue(t *testing.T, names []string) (certPEM, keyPEM []byte) {
	t.Helper()
	now := time.Now()
	return ca.issueValid(t, names, now.Add(-time.Hour), now.Add(24*time.Hour))
}

// issueValid is issue with the validity window given.
func (ca *externalCA) issueValid(t *testing.T, names []string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
