package envtest_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/pki"
)

func TestOperatorManagedTLSSecretsAreIssued(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: tls-issued}
spec: {version: 2.4.0, replicas: 3, tls: {extraSANs: [bao.example.com, 10.0.0.7]}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	var server, ca corev1.Secret
	eventually(t, wait, "both TLS Secrets exist", func() error {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: c.TLSCASecretName()}, &ca); err != nil {
			return err
		}
		return k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: c.TLSServerSecretName()}, &server)
	})
	if server.Type != corev1.SecretTypeTLS || metav1.GetControllerOf(&server) == nil || metav1.GetControllerOf(&server).UID != c.UID {
		t.Fatalf("server Secret type %s owner %v", server.Type, server.OwnerReferences)
	}
	leaf := verifyServerSecret(t, &server, ca.Data[pki.CAKey], time.Now())
	for _, name := range []string{
		"tls-issued-0.tls-issued-internal.managed.svc", "tls-issued-2.tls-issued-internal.managed.svc",
		"tls-issued.managed.svc", "localhost", "bao.example.com",
	} {
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("certificate does not cover %s: %v", name, err)
		}
	}
	for _, ip := range []string{"127.0.0.1", "10.0.0.7"} {
		if err := leaf.VerifyHostname(ip); err != nil {
			t.Errorf("certificate does not cover %s: %v", ip, err)
		}
	}
	eventually(t, wait, "TLSReady=True", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionTLSReady)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonCertificatesReady {
			return fmt.Errorf("TLSReady %s/%s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	// status.tls is what kubectl openbao status shows a user who may read
	// no Secret: the expiry of exactly the certificates in the Secrets.
	caCert, err := pki.NotAfter(ca.Data[pki.CAKey])
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "status.tls names both expiries", func() error {
		got := &v1alpha1.OpenBaoCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
			return err
		}
		st := got.Status.TLS
		if st == nil || st.ServerNotAfter == nil || st.CANotAfter == nil ||
			!st.ServerNotAfter.Time.Equal(leaf.NotAfter) || !st.CANotAfter.Time.Equal(caCert) {
			return fmt.Errorf("status.tls %+v, want server %s and CA %s", st, leaf.NotAfter, caCert)
		}
		return nil
	})
}

// verifyServerSecret checks that the Secret holds a matching pair that
// verifies against bundlePEM, and returns the leaf.
func verifyServerSecret(t *testing.T, s *corev1.Secret, bundlePEM []byte, at time.Time) *x509.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(s.Data[pki.CertKey], s.Data[pki.KeyKey])
	if err != nil {
		t.Fatalf("Secret %s: %v", s.Name, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundlePEM) {
		t.Fatal("CA bundle holds no certificate")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("server certificate does not verify against the CA bundle: %v", err)
	}
	return leaf
}

// TestRotationFollowsTheInjectedClock drives the reconciler with a fake
// clock: the Secrets stay untouched until the clock enters the rotation
// window, then only the server certificate is reissued.
func TestRotationFollowsTheInjectedClock(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "rotation")
	c := newCluster(t, "rotation", `
metadata: {name: rotating}
spec: {version: 2.4.0, tls: {rotationPeriod: 3h}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	clock := clocktesting.NewFakeClock(time.Now())
	r, err := newReconciler(k8s, k8s, &events.FakeRecorder{})
	if err != nil {
		t.Fatal(err)
	}
	r.Clock, r.Random = clock, rand.Reader
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	reconcileOK := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	}
	reconcileOK()
	ca0, server0 := tlsSecrets(t, c)

	clock.Step(time.Hour) // 2h of 3h left: outside the window (the last third)
	reconcileOK()
	ca1, server1 := tlsSecrets(t, c)
	if ca1.ResourceVersion != ca0.ResourceVersion || server1.ResourceVersion != server0.ResourceVersion {
		t.Fatal("a reconcile outside the rotation window rewrote a TLS Secret")
	}

	clock.Step(time.Hour + 10*time.Minute) // 50 min left: inside the window
	reconcileOK()
	ca2, server2 := tlsSecrets(t, c)
	if ca2.ResourceVersion != ca0.ResourceVersion {
		t.Error("rotating the server certificate rewrote the CA Secret")
	}
	if string(server2.Data[pki.CertKey]) == string(server0.Data[pki.CertKey]) {
		t.Fatal("inside the rotation window the server certificate was not reissued")
	}
	old, fresh := serial(t, server0.Data[pki.CertKey]), serial(t, server2.Data[pki.CertKey])
	if old == fresh {
		t.Fatalf("reissued certificate kept serial %s", old)
	}
	verifyServerSecret(t, server2, ca2.Data[pki.CAKey], clock.Now())
}

func tlsSecrets(t *testing.T, c *v1alpha1.OpenBaoCluster) (ca, server *corev1.Secret) {
	t.Helper()
	ca, server = &corev1.Secret{}, &corev1.Secret{}
	for name, s := range map[string]*corev1.Secret{c.TLSCASecretName(): ca, c.TLSServerSecretName(): server} {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: name}, s); err != nil {
			t.Fatal(err)
		}
	}
	return ca, server
}

func serial(t *testing.T, certPEM []byte) string {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber.String()
}
