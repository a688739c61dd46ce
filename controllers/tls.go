package controllers

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/pki"
	"github.com/openbao/operator/internal/values"
)

// externalSecretsRetry is how often a cluster waiting for user-provided TLS
// Secrets looks again: they carry no label of ours, so no watch reports them.
const externalSecretsRetry = 15 * time.Second

// servedTLS is what the TLS step hands the later steps: the certificate the
// pods should serve (for the cert-hash annotation) and the CA bundle the
// operator trusts when it talks to them. Both are nil until TLS is ready;
// with ACME the bundle stays nil and the system roots apply.
type servedTLS struct {
	certPEM, caPEM []byte
	ready          bool
}

// reconcileTLS makes the TLS Secrets match the spec and owns TLSReady.
func (r *OpenBaoClusterReconciler) reconcileTLS(ctx context.Context, c *v1alpha1.OpenBaoCluster,
	status *v1alpha1.OpenBaoClusterStatus, events *[]event) (servedTLS, ctrl.Result, error) {
	now := r.Clock.Now()
	switch c.Spec.TLS.Mode {
	case v1alpha1.TLSModeACME:
		setCondition(status, c, now, v1alpha1.ConditionTLSReady, true, v1alpha1.ReasonACMEByOpenBao,
			"OpenBao obtains and renews its certificate from the ACME directory itself")
		return servedTLS{ready: true}, ctrl.Result{}, nil
	case v1alpha1.TLSModeExternal:
		return r.observeExternalTLS(ctx, c, status)
	default:
		return r.reconcileOperatorTLS(ctx, c, status, events)
	}
}

func (r *OpenBaoClusterReconciler) observeExternalTLS(ctx context.Context, c *v1alpha1.OpenBaoCluster,
	status *v1alpha1.OpenBaoClusterStatus) (servedTLS, ctrl.Result, error) {
	now := r.Clock.Now()
	caSecret, err := r.readSecret(ctx, r.APIReader, c.Namespace, c.TLSCASecretName())
	if err != nil {
		return servedTLS{}, ctrl.Result{}, err
	}
	serverSecret, err := r.readSecret(ctx, r.APIReader, c.Namespace, c.TLSServerSecretName())
	if err != nil {
		return servedTLS{}, ctrl.Result{}, err
	}
	if caSecret == nil || serverSecret == nil {
		setCondition(status, c, now, v1alpha1.ConditionTLSReady, false, v1alpha1.ReasonWaitingForExternalSecrets,
			fmt.Sprintf("waiting for Secret %s (key ca.crt) and Secret %s (keys tls.crt, tls.key) in namespace %s",
				c.TLSCASecretName(), c.TLSServerSecretName(), c.Namespace))
		return servedTLS{}, ctrl.Result{RequeueAfter: externalSecretsRetry}, nil
	}
	certPEM := serverSecret.Data[pki.CertKey]
	if msg := externalProblem(caSecret, serverSecret); msg != "" {
		setCondition(status, c, now, v1alpha1.ConditionTLSReady, false, v1alpha1.ReasonInvalidExternalSecrets, msg)
		return servedTLS{}, ctrl.Result{RequeueAfter: externalSecretsRetry}, nil
	}
	recordExpiry(c, "server", certPEM)
	setCondition(status, c, now, v1alpha1.ConditionTLSReady, true, v1alpha1.ReasonExternalSecretsReady,
		fmt.Sprintf("serving the certificate from Secret %s", c.TLSServerSecretName()))
	return servedTLS{certPEM: certPEM, caPEM: caSecret.Data[pki.CAKey], ready: true}, ctrl.Result{RequeueAfter: externalSecretsRetry}, nil
}

// externalProblem says what is wrong with user-provided Secrets, naming
// Secrets and keys only.
func externalProblem(caSecret, serverSecret *corev1.Secret) string {
	if len(caSecret.Data[pki.CAKey]) == 0 {
		return fmt.Sprintf("Secret %s has no key ca.crt", caSecret.Name)
	}
	if _, err := tls.X509KeyPair(serverSecret.Data[pki.CertKey], serverSecret.Data[pki.KeyKey]); err != nil {
		return fmt.Sprintf("Secret %s: keys tls.crt and tls.key are not a certificate and its private key", serverSecret.Name)
	}
	return ""
}

func (r *OpenBaoClusterReconciler) reconcileOperatorTLS(ctx context.Context, c *v1alpha1.OpenBaoCluster,
	status *v1alpha1.OpenBaoClusterStatus, events *[]event) (servedTLS, ctrl.Result, error) {
	now := r.Clock.Now()
	caSecret, err := r.readSecret(ctx, r.Client, c.Namespace, c.TLSCASecretName())
	if err != nil {
		return servedTLS{}, ctrl.Result{}, err
	}
	serverSecret, err := r.readSecret(ctx, r.Client, c.Namespace, c.TLSServerSecretName())
	if err != nil {
		return servedTLS{}, ctrl.Result{}, err
	}
	spec := values.PKISpec(c)
	obs := pki.ObservedFromSecrets(dataOf(caSecret), dataOf(serverSecret))
	plan := pki.Decide(obs, spec, now)
	if !plan.NothingToDo() {
		if obs, err = r.carryOutTLSPlan(ctx, c, plan, obs, spec, caSecret, serverSecret); err != nil {
			setCondition(status, c, now, v1alpha1.ConditionTLSReady, false, v1alpha1.ReasonTLSIssueFailed,
				"writing the TLS Secrets failed; the operator retries: "+apiReason(err))
			return servedTLS{}, ctrl.Result{}, err
		}
		*events = append(*events, tlsEvent(plan))
		if plan.IssueServer {
			tlsRotations.WithLabelValues(c.Namespace, c.Name).Inc()
		}
		plan = pki.Decide(obs, spec, now) // for NextCheck
	}
	recordExpiry(c, "ca", obs.CA.CertPEM)
	recordExpiry(c, "server", obs.Server.CertPEM)
	setCondition(status, c, now, v1alpha1.ConditionTLSReady, true, v1alpha1.ReasonCertificatesReady,
		fmt.Sprintf("server certificate in Secret %s is valid and signed by the CA in Secret %s",
			c.TLSServerSecretName(), c.TLSCASecretName()))
	var result ctrl.Result
	if !plan.NextCheck.IsZero() {
		result.RequeueAfter = max(plan.NextCheck.Sub(now), time.Second)
	}
	return servedTLS{certPEM: obs.Server.CertPEM, caPEM: obs.CA.BundlePEM, ready: true}, result, nil
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
	if err := r.writeSecret(ctx, c, caSecret, c.TLSCASecretName(), corev1.SecretTypeTLS, pki.CASecretData(next.CA)); err != nil {
		return obs, err
	}
	if err := r.writeSecret(ctx, c, serverSecret, c.TLSServerSecretName(), corev1.SecretTypeTLS, pki.ServerSecretData(next.Server)); err != nil {
		return obs, err
	}
	return next, nil
}

func tlsEvent(plan pki.Plan) event {
	kind := "Normal"
	if plan.Reason == pki.ReasonInvalidPEM || plan.Reason == pki.ReasonKeyMismatch || plan.Reason == pki.ReasonExpired {
		kind = "Warning"
	}
	return event{kind, "TLS" + string(plan.Reason), "IssueCertificates", plan.Message}
}

func (r *OpenBaoClusterReconciler) readSecret(ctx context.Context, reader client.Reader, namespace, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s: %w", name, err)
	}
	return s, nil
}

// writeSecret creates the Secret, or replaces its data in one update guarded
// by its resourceVersion, so readers see the old or the new pair, never a mix.
func (r *OpenBaoClusterReconciler) writeSecret(ctx context.Context, c *v1alpha1.OpenBaoCluster,
	existing *corev1.Secret, name string, typ corev1.SecretType, data map[string][]byte) error {
	if existing != nil {
		existing.Data = data
		if err := r.Client.Update(ctx, existing); err != nil {
			return fmt.Errorf("update Secret %s: %s", name, bootstrap.DescribeAPIError(err))
		}
		return nil
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: map[string]string{
			v1alpha1.LabelCluster: c.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		}},
		Type: typ,
		Data: data,
	}
	if err := controllerutil.SetControllerReference(c, s, r.Client.Scheme()); err != nil {
		return fmt.Errorf("own Secret %s: %w", name, err)
	}
	if err := r.Client.Create(ctx, s); err != nil {
		return fmt.Errorf("create Secret %s: %s", name, bootstrap.DescribeAPIError(err))
	}
	return nil
}

func dataOf(s *corev1.Secret) map[string][]byte {
	if s == nil {
		return nil
	}
	return s.Data
}

func recordExpiry(c *v1alpha1.OpenBaoCluster, kind string, certPEM []byte) {
	if notAfter, err := pki.NotAfter(certPEM); err == nil {
		tlsCertExpiry.WithLabelValues(c.Namespace, c.Name, kind).Set(float64(notAfter.Unix()))
	}
}

func (r *OpenBaoClusterReconciler) random() io.Reader {
	if r.Random != nil {
		return r.Random
	}
	return rand.Reader
}
