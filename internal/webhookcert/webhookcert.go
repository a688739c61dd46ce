// Package webhookcert decides the serving certificate of the operator's
// admission webhook: a private CA and a certificate for the webhook's
// Service, kept in one Secret of the operator's namespace. It reuses the
// rotation policy of internal/pki (the server certificate is reissued when
// a third of its validity is left; a successor CA is published in the
// bundle before it signs, and the outgoing CA stays trusted until it
// expires), so the API server, which trusts the bundle patched into the
// ValidatingWebhookConfiguration, never sees a certificate it cannot
// verify. It is pure: the caller reads and writes the Secret.
package webhookcert

import (
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/openbao/operator/internal/pki"
)

// Keys of the Secret. tls.crt and tls.key are the serving pair, ca.crt the
// bundle the API server trusts.
const (
	CertKey    = pki.CertKey
	KeyKey     = pki.KeyKey
	BundleKey  = pki.CAKey
	caCertKey  = "ca-signing.crt"
	caKeyKey   = "ca-signing.key"
	nextKey    = "ca-next.crt"
	nextKeyKey = "ca-next.key"
)

// DefaultRotationPeriod is the serving certificate's validity; the CA
// lives ten times as long (pki's ratios).
const DefaultRotationPeriod = 90 * 24 * time.Hour

// Settings name the webhook's Service, whose DNS names the certificate
// carries.
type Settings struct {
	Namespace, Service string
	RotationPeriod     time.Duration // default DefaultRotationPeriod
}

// spec maps the Service onto pki's spec; the names pki derives for pods
// of a StatefulSet (<service>-0.<service>...) are harmless extras.
func (s Settings) spec() pki.Spec {
	period := s.RotationPeriod
	if period <= 0 {
		period = DefaultRotationPeriod
	}
	return pki.Spec{ClusterName: s.Service, Namespace: s.Namespace, HeadlessService: s.Service, Replicas: 1, RotationPeriod: period}
}

// Result is what Refresh decided.
type Result struct {
	Data    map[string][]byte // the Secret's data to store
	Changed bool              // Data differs from what was read
	Reason  string            // pki's reason, such as Missing or WithinRotationWindow
	// NextCheck is when Refresh would answer differently for Data.
	NextCheck time.Time
}

// Refresh returns the Secret data the webhook should serve at now, given
// the data read (nil when the Secret does not exist).
func Refresh(data map[string][]byte, s Settings, now time.Time, random io.Reader) (Result, error) {
	spec := s.spec()
	obs := observed(data)
	plan := pki.Decide(obs, spec, now)
	if plan.NothingToDo() {
		return Result{Data: data, Reason: string(plan.Reason), NextCheck: plan.NextCheck}, nil
	}
	out, err := pki.Execute(plan, obs, spec, now, random)
	if err != nil {
		return Result{}, fmt.Errorf("issue the webhook certificate: %w", err)
	}
	next := secretData(out)
	// Execute leaves a fresh state, whose next check pki computes.
	after := pki.Decide(out, spec, now)
	return Result{Data: next, Changed: !maps.EqualFunc(data, next, bytesEqual), Reason: string(plan.Reason), NextCheck: after.NextCheck}, nil
}

func observed(data map[string][]byte) pki.Observed {
	return pki.Observed{
		CA: pki.CAMaterial{CertPEM: data[caCertKey], KeyPEM: data[caKeyKey], BundlePEM: data[BundleKey],
			NextCertPEM: data[nextKey], NextKeyPEM: data[nextKeyKey]},
		Server: pki.ServerMaterial{CertPEM: data[CertKey], KeyPEM: data[KeyKey], BundlePEM: data[BundleKey]},
	}
}

func secretData(o pki.Observed) map[string][]byte {
	data := map[string][]byte{
		CertKey: o.Server.CertPEM, KeyKey: o.Server.KeyPEM, BundleKey: o.CA.BundlePEM,
		caCertKey: o.CA.CertPEM, caKeyKey: o.CA.KeyPEM,
	}
	if len(o.CA.NextCertPEM) > 0 {
		data[nextKey], data[nextKeyKey] = o.CA.NextCertPEM, o.CA.NextKeyPEM
	}
	return data
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }
