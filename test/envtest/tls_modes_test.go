package envtest_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/pki"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/test/fixtures"
)

// TestExternalTLSWaitsForItsSecretThenProceeds: a cluster whose
// serverSecretRef names a Secret that does not exist yet says so in
// TLSReady without being Degraded, and is ready once cert-manager's Secret
// appears.
func TestExternalTLSWaitsForItsSecretThenProceeds(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: external}
spec: {version: 2.4.0, tls: {mode: External, external: {serverSecretRef: {name: external-cert}}}}
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
		if !strings.Contains(cond.Message, "Secret external-cert (spec.tls.external.serverSecretRef") {
			return fmt.Errorf("message does not name the Secret and the field: %s", cond.Message)
		}
		return nil
	})
	latest := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), latest); err != nil {
		t.Fatal(err)
	}
	if cond := findDegraded(latest); cond != nil && cond.Status == metav1.ConditionTrue {
		t.Fatalf("waiting for the external Secret is not an error, but Degraded is %s: %s", cond.Reason, cond.Message)
	}

	createCertManagerSecret(t, c, "external-cert", issueFrom(t, c, nil, true))
	eventually(t, 2*externalRetry(), "TLSReady=True after the Secret appears", func() error {
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

// TestExternalTLSRefusesWhatCannotBeServed: a Secret that exists but does
// not fit leaves TLSReady False with a message naming the key at fault,
// and the cluster Degraded: a person must act. A certificate of another CA
// than ca.crt is InvalidExternalSecrets; a Secret without ca.crt, as
// cert-manager's ACME issuers write it, is ExternalSecretWithoutCA.
func TestExternalTLSRefusesWhatCannotBeServed(t *testing.T) {
	for _, tc := range []struct {
		name, reason, says string
		sameCA, withCA     bool
	}{
		{"ext-mismatch", v1alpha1.ReasonInvalidExternalSecrets, "tls.crt does not chain to a certificate in ca.crt", false, true},
		{"ext-no-ca", v1alpha1.ReasonExternalSecretWithoutCA, "it has no ca.crt", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := newCluster(t, managedNamespace, fmt.Sprintf(`
metadata: {name: %s}
spec: {version: 2.4.0, tls: {mode: External, external: {serverSecretRef: {name: %[1]s-cert}}}}
`, tc.name))
			if err := k8s.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			issued := issueFrom(t, c, nil, tc.sameCA)
			if !tc.withCA {
				issued.ca = nil
			}
			createCertManagerSecret(t, c, tc.name+"-cert", issued)
			eventually(t, externalRetry()+wait, "TLSReady=False "+tc.reason, func() error {
				cond, err := condition(ctx, c, v1alpha1.ConditionTLSReady)
				if err != nil {
					return err
				}
				if cond.Status != metav1.ConditionFalse || cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.says) {
					return fmt.Errorf("TLSReady %s/%s: %s", cond.Status, cond.Reason, cond.Message)
				}
				return nil
			})
			eventually(t, wait, "Degraded=True "+tc.reason, func() error {
				cond, err := condition(ctx, c, v1alpha1.ConditionDegraded)
				if err != nil {
					return err
				}
				if cond.Status != metav1.ConditionTrue || cond.Reason != tc.reason {
					return fmt.Errorf("Degraded %s/%s", cond.Status, cond.Reason)
				}
				return nil
			})
		})
	}
}

// TestARenewedExternalSecretReachesTheServersAndStaysTheUsers plays
// cert-manager renewing the Secret in place (a new key and certificate
// from the same CA). The operator hands the servers the new certificate
// without touching the pod template (the kubelet updates the projected
// files and bao-wrapper reloads them; envtest runs no kubelet, so the
// ready pod's cert-hash annotation is what shows it), and never writes
// the Secret: no label, owner or annotation of its own, the same
// resourceVersion the renewal left.
func TestARenewedExternalSecretReachesTheServersAndStaysTheUsers(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: ext-renew}
spec: {version: 2.4.0, tls: {mode: External, external: {serverSecretRef: {name: ext-renew-cert}}}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	first := issueFrom(t, c, nil, true)
	secret := createCertManagerSecret(t, c, "ext-renew-cert", first)
	pod := fakeServerPod(t, "ext-renew", 0, true)
	sts := &appsv1.StatefulSet{}
	eventually(t, 2*externalRetry(), "the ready pod carries the first certificate's hash", func() error {
		if err := podCertHash(ctx, pod, first.cert); err != nil {
			return err
		}
		return k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.StatefulSetName()}, sts)
	})
	if err := projectsOnly(sts, "ext-renew-cert"); err != nil {
		t.Fatal(err)
	}

	renewed := issueFrom(t, c, &first, true)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	// cert-manager writes its data, labels and annotations again.
	shape := fixtures.CertManagerSecret(c.Namespace, c.Name, "openbao-ca", secret.Name, renewed.cert, renewed.key, renewed.ca)
	secret.Data, secret.Labels, secret.Annotations = shape.Data, shape.Labels, shape.Annotations
	if err := k8s.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*externalRetry(), "the ready pod carries the renewed certificate's hash", func() error {
		return podCertHash(ctx, pod, renewed.cert)
	})
	after := &appsv1.StatefulSet{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), after); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(sts.Spec.Template, after.Spec.Template) {
		t.Error("the renewal changed the StatefulSet's pod template: it would restart every server")
	}
	got := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != secret.ResourceVersion || len(got.OwnerReferences) > 0 ||
		!maps.Equal(got.Labels, shape.Labels) || !maps.Equal(got.Annotations, shape.Annotations) {
		t.Errorf("the operator wrote the user's Secret: labels %v, annotations %v, owners %v, resourceVersion %s (renewal left %s)",
			got.Labels, got.Annotations, got.OwnerReferences, got.ResourceVersion, secret.ResourceVersion)
	}
}

// TestNoDeletionPolicyDeletesTheExternalSecret: the Secret is the user's
// (cert-manager's); deleting the cluster under DeleteAll, which deletes
// every Secret the operator wrote, leaves it as it was.
func TestNoDeletionPolicyDeletesTheExternalSecret(t *testing.T) {
	ctx := context.Background()
	ns := "del-external-tls"
	createNamespace(t, ns)
	c := newCluster(t, ns, `
metadata: {name: bao}
spec: {version: 2.4.0, deletionPolicy: DeleteAll, tls: {mode: External, external: {serverSecretRef: {name: bao-cert}}}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	secret := createCertManagerSecret(t, c, "bao-cert", issueFrom(t, c, nil, true))
	r, err := newReconciler(k8s, k8s, &events.FakeRecorder{})
	if err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	for pass := 0; pass < 2; pass++ {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if cond, err := condition(ctx, c, v1alpha1.ConditionTLSReady); err != nil || cond.Status != metav1.ConditionTrue {
		t.Fatalf("TLSReady %+v (%v), want True before the deletion", cond, err)
	}
	if err := k8s.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	for pass := 0; pass < 3; pass++ {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if err := k8s.Get(ctx, req.NamespacedName, &v1alpha1.OpenBaoCluster{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the cluster is still there after the finalizer ran: %v", err)
	}
	got := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), got); err != nil || got.DeletionTimestamp != nil {
		t.Fatalf("DeleteAll took the user's Secret bao-cert: %v %v", err, got.DeletionTimestamp)
	}
	if got.ResourceVersion != secret.ResourceVersion || len(got.OwnerReferences) > 0 {
		t.Errorf("the operator wrote the user's Secret: owners %v, resourceVersion %s, created %s",
			got.OwnerReferences, got.ResourceVersion, secret.ResourceVersion)
	}
}

// issued is a server certificate for every name the cluster needs, the
// CA that signed it (nil when the Secret is to carry none) and its key.
type issued struct {
	cert, key, ca []byte
	caCert, caKey []byte
}

// issueFrom issues a certificate for c's names from prev's CA, or a new
// CA; with sameCA false, ca.crt holds a CA other than the signer's.
func issueFrom(t *testing.T, c *v1alpha1.OpenBaoCluster, prev *issued, sameCA bool) issued {
	t.Helper()
	spec := pki.Spec{ClusterName: c.Name, Namespace: c.Namespace, HeadlessService: c.HeadlessServiceName(),
		ClientService: c.ClientServiceName(), Replicas: 3}
	now := time.Now()
	var out issued
	var err error
	if prev != nil {
		out.caCert, out.caKey = prev.caCert, prev.caKey
	} else if out.caCert, out.caKey, err = pki.NewCA(spec, now, rand.Reader); err != nil {
		t.Fatal(err)
	}
	out.ca = out.caCert
	signer, signerKey := out.caCert, out.caKey
	if !sameCA {
		if signer, signerKey, err = pki.NewCA(spec, now, rand.Reader); err != nil {
			t.Fatal(err)
		}
	}
	if out.cert, out.key, err = pki.IssueServerCert(signer, signerKey, spec, now, rand.Reader); err != nil {
		t.Fatal(err)
	}
	return out
}

// createCertManagerSecret creates the Secret as cert-manager writes it for
// a Certificate of the cluster's name, with nothing of the operator's.
func createCertManagerSecret(t *testing.T, c *v1alpha1.OpenBaoCluster, name string, i issued) *corev1.Secret {
	t.Helper()
	s := fixtures.CertManagerSecret(c.Namespace, c.Name, "openbao-ca", name, i.cert, i.key, i.ca)
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// podCertHash says whether pod carries the hash of certPEM's certificate.
func podCertHash(ctx context.Context, pod *corev1.Pod, certPEM []byte) error {
	want, err := pki.CertHash(certPEM)
	if err != nil {
		return err
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		return err
	}
	if got := pod.Annotations[pki.CertHashAnnotation]; got != want {
		return fmt.Errorf("annotation %q, want %q", got, want)
	}
	return nil
}

// projectsOnly checks that the servers' TLS volume projects name's
// tls.crt, tls.key and ca.crt and nothing else.
func projectsOnly(sts *appsv1.StatefulSet, name string) error {
	var keys []string
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.Name != "tls" || v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.Secret == nil || src.Secret.Name != name {
				return fmt.Errorf("the TLS volume projects %+v, not only Secret %s", src, name)
			}
			for _, item := range src.Secret.Items {
				keys = append(keys, item.Key)
			}
		}
	}
	slices.Sort(keys)
	if want := []string{"ca.crt", "tls.crt", "tls.key"}; !slices.Equal(keys, want) {
		return fmt.Errorf("the TLS volume projects keys %v of Secret %s, want %v", keys, name, want)
	}
	return nil
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
