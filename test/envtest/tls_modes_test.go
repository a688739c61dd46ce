package envtest_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/pki"
	"github.com/openbao/operator/internal/values"
)

func TestExternalTLSWaitsForItsSecretsThenProceeds(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: external}
spec: {version: 2.4.0, tls: {mode: External}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "TLSReady=False WaitingForExternalSecrets", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionTLSReady)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonWaitingForExternalSecrets {
			return fmt.Errorf("TLSReady %s/%s", cond.Status, cond.Reason)
		}
		if !strings.Contains(cond.Message, "external-tls-ca") || !strings.Contains(cond.Message, "external-tls-server") {
			return fmt.Errorf("message does not name both Secrets: %s", cond.Message)
		}
		return nil
	})
	latest := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), latest); err != nil {
		t.Fatal(err)
	}
	if cond := findDegraded(latest); cond != nil && cond.Status == metav1.ConditionTrue {
		t.Fatalf("waiting for external Secrets is not an error, but Degraded is %s: %s", cond.Reason, cond.Message)
	}

	createExternalSecrets(t, c)
	eventually(t, 2*externalRetry(), "TLSReady=True after the Secrets appear", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionTLSReady)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonExternalSecretsReady {
			return fmt.Errorf("TLSReady %s/%s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
}

func externalRetry() time.Duration { return 20 * time.Second }

// TestExternalTLSRefusesACertificateOfAnotherCA: Secrets that exist but do
// not fit (here a server certificate of another CA than ca.crt) leave
// TLSReady False with a message saying what is wrong, and the cluster
// Degraded: a person must act.
func TestExternalTLSRefusesACertificateOfAnotherCA(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: ext-mismatch}
spec: {version: 2.4.0, tls: {mode: External}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	createExternalSecretsSignedBy(t, c, false)
	eventually(t, externalRetry()+wait, "TLSReady=False InvalidExternalSecrets", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionTLSReady)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonInvalidExternalSecrets ||
			!strings.Contains(cond.Message, "does not chain to a certificate in ca.crt") {
			return fmt.Errorf("TLSReady %s/%s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	eventually(t, wait, "Degraded=True InvalidExternalSecrets", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionDegraded)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonInvalidExternalSecrets {
			return fmt.Errorf("Degraded %s/%s", cond.Status, cond.Reason)
		}
		return nil
	})
}

// createExternalSecrets provides the Secrets as a user would, with no label
// or owner of the operator's.
func createExternalSecrets(t *testing.T, c *v1alpha1.OpenBaoCluster) {
	t.Helper()
	createExternalSecretsSignedBy(t, c, true)
}

// createExternalSecretsSignedBy issues the server certificate from the CA
// in ca.crt, or, with sameCA false, from another one.
func createExternalSecretsSignedBy(t *testing.T, c *v1alpha1.OpenBaoCluster, sameCA bool) {
	t.Helper()
	spec := pki.Spec{ClusterName: c.Name, Namespace: c.Namespace, HeadlessService: c.HeadlessServiceName(),
		ClientService: c.ClientServiceName(), Replicas: 3}
	now := time.Now()
	caCert, caKey, err := pki.NewCA(spec, now, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	issuerCert, issuerKey := caCert, caKey
	if !sameCA {
		if issuerCert, issuerKey, err = pki.NewCA(spec, now, rand.Reader); err != nil {
			t.Fatal(err)
		}
	}
	cert, key, err := pki.IssueServerCert(issuerCert, issuerKey, spec, now, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: c.TLSCASecretName(), Namespace: c.Namespace}, Data: map[string][]byte{pki.CAKey: caCert}},
		{ObjectMeta: metav1.ObjectMeta{Name: c.TLSServerSecretName(), Namespace: c.Namespace}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{pki.CertKey: cert, pki.KeyKey: key}},
	} {
		if err := k8s.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
}

// TestACMEIssuesTheInternalListenersCertificate: no ACME CA issues the
// .svc names the operator and the joining servers dial, so with ACME the
// operator runs its CA for the internal listener as in OperatorManaged
// mode, and TLSReady says which port serves what.
func TestACMEIssuesTheInternalListenersCertificate(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: acme}
spec:
  version: 2.4.0
  tls: {mode: ACME, acme: {directory: "https://acme.example/directory", domains: [bao.example.com]}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "TLSReady=True by ACME and children applied", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionTLSReady)
		if err != nil {
			return err
		}
		if cond.Reason != v1alpha1.ReasonACMEByOpenBao || !strings.Contains(cond.Message, c.TLSServerSecretName()) {
			return fmt.Errorf("TLSReady %s: %s", cond.Reason, cond.Message)
		}
		_, err = condition(ctx, c, v1alpha1.ConditionDegraded)
		return err
	})
	secrets := map[string]*corev1.Secret{}
	for _, name := range []string{c.TLSCASecretName(), c.TLSServerSecretName()} {
		secrets[name] = &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: name}, secrets[name]); err != nil {
			t.Fatalf("ACME mode: Secret %s: %v", name, err)
		}
	}
	server := secrets[c.TLSServerSecretName()].Data
	if problem := pki.CheckExternal(secrets[c.TLSCASecretName()].Data[pki.CAKey], server[pki.CertKey], server[pki.KeyKey],
		values.PKISpec(c), time.Now()); problem != "" {
		t.Errorf("the internal listener's certificate does not serve the in-cluster names: %s", problem)
	}
}
