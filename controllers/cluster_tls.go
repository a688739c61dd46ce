package controllers

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/pki"
	"github.com/openbao/operator/internal/secrets"
	"github.com/openbao/operator/internal/values"
)

// externalSecretsRetry is how often a cluster waiting for user-provided TLS
// Secrets looks again: they carry no label of ours, so no watch reports them.
const externalSecretsRetry = 15 * time.Second

// servedTLS is what the TLS step hands the later steps: the certificate the
// pods should serve (for the cert-hash annotation) and the CA bundle the
// operator trusts when it talks to them. Both are nil until TLS is ready.
// With ACME they are those of the internal listener.
type servedTLS struct {
	certPEM, caPEM []byte
	ready          bool
}

// reconcileTLS makes the TLS Secrets match the spec, owns TLSReady, and
// hands the later steps what the servers serve.
func (r *OpenBaoClusterReconciler) reconcileTLS(ctx context.Context, p *pass) error {
	switch p.cluster.Spec.TLS.Mode {
	case v1alpha1.TLSModeACME:
		// No ACME CA issues the .svc names the operator and the joining
		// servers dial: they use an internal listener whose certificate
		// the operator issues, as in OperatorManaged mode.
		if err := r.reconcileOperatorTLS(ctx, p); err != nil || !p.tls.ready {
			return err
		}
		c := p.cluster
		p.setCondition(v1alpha1.ConditionTLSReady, true, v1alpha1.ReasonACMEByOpenBao, fmt.Sprintf(
			"OpenBao obtains and renews the API certificate (port %d) from the ACME directory itself; "+
				"the internal listener (port %d) serves the certificate in Secret %s, signed by the CA in Secret %s",
			v1alpha1.APIPort, v1alpha1.InternalListenerPort, c.TLSServerSecretName(), c.TLSCASecretName()))
		return nil
	case v1alpha1.TLSModeExternal:
		return r.observeExternalTLS(ctx, p)
	default:
		return r.reconcileOperatorTLS(ctx, p)
	}
}

// observeExternalTLS reads the user's Secret exactly: it carries no label
// of ours, so the cache does not hold it and no watch reports it. The
// operator only reads it (no label, owner or deletion): when cert-manager
// renews it, the kubelet updates the servers' projected files, their
// bao-wrapper reloads them (SIGHUP), and the next look here moves the
// cert-hash annotation and the CA the operator trusts.
func (r *OpenBaoClusterReconciler) observeExternalTLS(ctx context.Context, p *pass) error {
	c := p.cluster
	p.requeueAfter(externalSecretsRetry)
	name := c.ServingSecretName()
	s, err := r.readSecret(ctx, r.APIReader, c.Namespace, name)
	if err != nil {
		return err
	}
	if s == nil {
		p.setCondition(v1alpha1.ConditionTLSReady, false, v1alpha1.ReasonWaitingForExternalSecrets,
			fmt.Sprintf("waiting for Secret %s (spec.tls.external.serverSecretRef; type kubernetes.io/tls, keys tls.crt, tls.key, ca.crt) in namespace %s",
				name, c.Namespace))
		return nil
	}
	if problem := pki.CheckServerSecret(string(s.Type), s.Data, values.PKISpec(c), p.now); problem != nil {
		reason := v1alpha1.ReasonInvalidExternalSecrets
		if problem.NoCA {
			reason = v1alpha1.ReasonExternalSecretWithoutCA
		}
		msg := fmt.Sprintf("Secret %s (spec.tls.external.serverSecretRef): %s; the operator does not talk to servers it cannot verify until it is fixed",
			name, problem.Message)
		p.setCondition(v1alpha1.ConditionTLSReady, false, reason, msg)
		p.degrade(reason, msg)
		return nil
	}
	certPEM := s.Data[pki.CertKey]
	recordExpiry(p, "ca", s.Data[pki.CAKey], 0)
	recordExpiry(p, "server", certPEM, 0)
	p.setCondition(v1alpha1.ConditionTLSReady, true, v1alpha1.ReasonExternalSecretsReady,
		fmt.Sprintf("serving the certificate from Secret %s, trusted through its ca.crt", name))
	p.tls = servedTLS{certPEM: certPEM, caPEM: s.Data[pki.CAKey], ready: true}
	return nil
}

func (r *OpenBaoClusterReconciler) reconcileOperatorTLS(ctx context.Context, p *pass) error {
	c := p.cluster
	caSecret, err := r.readSecret(ctx, r.Client, c.Namespace, c.TLSCASecretName())
	if err != nil {
		return err
	}
	serverSecret, err := r.readSecret(ctx, r.Client, c.Namespace, c.TLSServerSecretName())
	if err != nil {
		return err
	}
	spec := values.PKISpec(c)
	obs := pki.ObservedFromSecrets(dataOf(caSecret), dataOf(serverSecret))
	plan := pki.Decide(obs, spec, p.now)
	request := pendingRotateRequest(c, p.status)
	if request != "" {
		plan = plan.Requested(request)
	}
	if !plan.NothingToDo() {
		if obs, err = r.carryOutTLSPlan(ctx, c, plan, obs, spec, caSecret, serverSecret); err != nil {
			p.setCondition(v1alpha1.ConditionTLSReady, false, v1alpha1.ReasonTLSIssueFailed,
				"writing the TLS Secrets failed; the operator retries: "+apiReason(err))
			return err
		}
		e := tlsEvent(plan)
		p.record(e.kind, e.reason, e.action, e.note)
		if plan.IssueServer {
			tlsRotations.WithLabelValues(c.Namespace, c.Name).Inc()
		}
		if request != "" {
			handledRotateRequest(ctx, p, request)
		}
		plan = pki.Decide(obs, spec, p.now) // for NextCheck
	}
	recordExpiry(p, "ca", obs.CA.CertPEM, spec.CARenewBefore())
	recordExpiry(p, "server", obs.Server.CertPEM, spec.RenewBefore())
	p.setCondition(v1alpha1.ConditionTLSReady, true, v1alpha1.ReasonCertificatesReady,
		fmt.Sprintf("server certificate in Secret %s is valid and signed by the CA in Secret %s",
			c.TLSServerSecretName(), c.TLSCASecretName()))
	if !plan.NextCheck.IsZero() {
		p.requeueAfter(max(plan.NextCheck.Sub(p.now), time.Second))
	}
	p.tls = servedTLS{certPEM: obs.Server.CertPEM, caPEM: obs.CA.BundlePEM, ready: true}
	return nil
}

// pendingRotateRequest is spec.tls.rotateRequest when it asks for a
// reissue not done yet (status.tls.rotateRequest differs), else "".
func pendingRotateRequest(c *v1alpha1.OpenBaoCluster, status *v1alpha1.OpenBaoClusterStatus) string {
	request := c.Spec.TLS.RotateRequest
	if request == "" || (status.TLS != nil && status.TLS.RotateRequest == request) {
		return ""
	}
	return request
}

// handledRotateRequest records, once the new server certificate is
// written, that spec.tls.rotateRequest was carried out. The status is
// written at the end of the pass: a pass that dies in between reissues
// once more on the next, which is harmless (the servers reload either).
func handledRotateRequest(ctx context.Context, p *pass, request string) {
	if p.status.TLS == nil {
		p.status.TLS = &v1alpha1.TLSStatus{}
	}
	at := metav1.NewTime(p.now)
	p.status.TLS.RotateRequest, p.status.TLS.RotatedAt = request, &at
	ctrl.LoggerFrom(ctx).Info("reissued the server certificate as spec.tls.rotateRequest asked", "audit", true,
		"event_type", "openbao.tls.rotate_requested", "request", request, "secret", p.cluster.TLSServerSecretName())
}

// carryOutTLSPlan builds the new material and writes the CA Secret before
// the server Secret, so that a server certificate is never published before
// the CA that signed it.
func (r *OpenBaoClusterReconciler) carryOutTLSPlan(ctx context.Context, c *v1alpha1.OpenBaoCluster, plan pki.Plan,
	obs pki.Observed, spec pki.Spec, caSecret, serverSecret *corev1.Secret) (pki.Observed, error) {
	next, err := pki.Execute(plan, obs, spec, r.Clock.Now(), r.random())
	if err != nil {
		return obs, fmt.Errorf("issue TLS material: %w", err)
	}
	// The CA goes with the data its clients reach, and a retained cluster
	// keeps it; the server certificate can always be issued again.
	if err := r.writeTLSSecret(ctx, c, caSecret, c.TLSCASecretName(), pki.CASecretData(next.CA), secrets.WithData); err != nil {
		return obs, err
	}
	if err := r.writeTLSSecret(ctx, c, serverSecret, c.TLSServerSecretName(), pki.ServerSecretData(next.Server), secrets.WithCluster); err != nil {
		return obs, err
	}
	return next, nil
}

// writeTLSSecret creates a TLS Secret or replaces its data.
func (r *OpenBaoClusterReconciler) writeTLSSecret(ctx context.Context, c *v1alpha1.OpenBaoCluster,
	existing *corev1.Secret, name string, data map[string][]byte, life secrets.Lifetime) error {
	if existing != nil {
		return r.replaceSecretData(ctx, existing, data)
	}
	return r.createSecret(ctx, secrets.New(c, secrets.Spec{Name: name, Type: corev1.SecretTypeTLS, Data: data, Lifetime: life}))
}

func tlsEvent(plan pki.Plan) event {
	kind := "Normal"
	if plan.Reason == pki.ReasonInvalidPEM || plan.Reason == pki.ReasonKeyMismatch || plan.Reason == pki.ReasonExpired {
		kind = "Warning"
	}
	return event{kind, "TLS" + string(plan.Reason), "IssueCertificates", plan.Message}
}

// recordExpiry puts a certificate's expiry into the metric and into
// status.tls, where kubectl openbao status reads it: the Secrets also hold
// the private keys, which a reader of expiry dates must not need. Its
// renewal is due renewBefore ahead of expiry; 0 (a certificate renewed
// outside the operator) stands for a third of its lifetime, cert-manager's
// default and the operator's own ratio for server certificates.
func recordExpiry(p *pass, kind string, certPEM []byte, renewBefore time.Duration) {
	notBefore, notAfter, err := pki.Validity(certPEM)
	if err != nil {
		return
	}
	if renewBefore == 0 {
		renewBefore = notAfter.Sub(notBefore) / 3
	}
	c := p.cluster
	tlsCertExpiry.WithLabelValues(c.Namespace, c.Name, kind).Set(float64(notAfter.Unix()))
	tlsCertRenewalDue.WithLabelValues(c.Namespace, c.Name, kind).Set(float64(notAfter.Add(-renewBefore).Unix()))
	if p.status.TLS == nil {
		p.status.TLS = &v1alpha1.TLSStatus{}
	}
	at := metav1.NewTime(notAfter)
	switch kind {
	case "server":
		p.status.TLS.ServerNotAfter = &at
	case "ca":
		p.status.TLS.CANotAfter = &at
	}
}

func (r *OpenBaoClusterReconciler) random() io.Reader {
	if r.Random != nil {
		return r.Random
	}
	return rand.Reader
}
