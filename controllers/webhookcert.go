package controllers

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/webhookcert"
)

// WebhookCert keeps the webhook's serving certificate: the Secret in the
// operator's namespace (shared by every replica), the files the webhook
// server serves (it reloads them when they change), and the CA bundle of
// the ValidatingWebhookConfiguration. Skipped when OLM provides the
// certificate (--webhook-cert-managed=false).
type WebhookCert struct {
	Reader client.Reader // uncached: the Secret carries no label of the cache
	Writer client.Client
	Clock  clock.Clock
	// Settings name the Service; SecretName, ConfigurationName and CertDir
	// where the material goes.
	Settings                      webhookcert.Settings
	SecretName, ConfigurationName string
	CertDir                       string
}

// webhookCertRecheck bounds the sleep between checks, so that a Secret or
// a bundle changed by hand is repaired within the hour.
const webhookCertRecheck = time.Hour

// NeedLeaderElection is false: every replica serves the webhook and needs
// the files.
func (w *WebhookCert) NeedLeaderElection() bool { return false }

// Start re-checks the material until ctx ends.
func (w *WebhookCert) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("webhook-cert")
	for {
		wait := webhookCertRecheck
		next, err := w.Ensure(ctx)
		switch {
		case err != nil:
			log.Error(err, "keeping the webhook certificate failed; retrying in a minute", "secret", w.SecretName)
			wait = time.Minute
		case next.Sub(w.Clock.Now()) < wait:
			wait = max(next.Sub(w.Clock.Now()), time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.Clock.After(wait):
		}
	}
}

// Ensure brings the Secret, the files and the bundle up to date and says
// when to look again. The manager calls it once before the webhook server
// starts, which needs the files.
func (w *WebhookCert) Ensure(ctx context.Context) (time.Time, error) {
	var res webhookcert.Result
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if res, err = w.storeSecret(ctx); !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			break // another replica wrote first: read its material
		}
	}
	if err != nil {
		return time.Time{}, err
	}
	if err := w.writeFiles(res.Data); err != nil {
		return time.Time{}, err
	}
	if err := w.patchBundle(ctx, res.Data[webhookcert.BundleKey]); err != nil {
		return time.Time{}, err
	}
	return res.NextCheck, nil
}

func (w *WebhookCert) storeSecret(ctx context.Context) (webhookcert.Result, error) {
	s := &corev1.Secret{}
	key := types.NamespacedName{Namespace: w.Settings.Namespace, Name: w.SecretName}
	err := w.Reader.Get(ctx, key, s)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return webhookcert.Result{}, fmt.Errorf("read Secret %s: %w", w.SecretName, err)
	}
	res, err := webhookcert.Refresh(s.Data, w.Settings, w.Clock.Now(), rand.Reader)
	if err != nil || !res.Changed {
		return res, err
	}
	s.Data, s.Type = res.Data, corev1.SecretTypeOpaque
	if !exists {
		s.ObjectMeta = metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}}
		err = w.Writer.Create(ctx, s)
	} else {
		err = w.Writer.Update(ctx, s) // its resourceVersion guards against another replica
	}
	if err != nil {
		return res, fmt.Errorf("store Secret %s: %w", w.SecretName, err)
	}
	ctrl.LoggerFrom(ctx).Info("webhook certificate stored", "secret", w.SecretName, "reason", res.Reason)
	return res, nil
}

// writeFiles replaces tls.crt and tls.key when they differ, each by a
// rename, so the server never reads half a file.
func (w *WebhookCert) writeFiles(data map[string][]byte) error {
	if err := os.MkdirAll(w.CertDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", w.CertDir, err)
	}
	for _, name := range []string{webhookcert.KeyKey, webhookcert.CertKey} {
		path := filepath.Join(w.CertDir, name)
		if current, err := os.ReadFile(path); err == nil && bytes.Equal(current, data[name]) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data[name], 0o600); err != nil {
			return fmt.Errorf("write %s: %w", tmp, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("replace %s: %w", path, err)
		}
	}
	return nil
}

func (w *WebhookCert) patchBundle(ctx context.Context, bundle []byte) error {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := w.Reader.Get(ctx, types.NamespacedName{Name: w.ConfigurationName}, cfg); err != nil {
		return fmt.Errorf("read ValidatingWebhookConfiguration %s (install config/webhook, or run with --webhook-cert-managed=false when OLM provides the certificate): %w",
			w.ConfigurationName, err)
	}
	changed := false
	for i := range cfg.Webhooks {
		if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, bundle) {
			cfg.Webhooks[i].ClientConfig.CABundle, changed = bundle, true
		}
	}
	if !changed {
		return nil
	}
	if err := w.Writer.Update(ctx, cfg); err != nil {
		return fmt.Errorf("set the CA bundle of ValidatingWebhookConfiguration %s: %w", w.ConfigurationName, err)
	}
	ctrl.LoggerFrom(ctx).Info("webhook CA bundle updated", "configuration", w.ConfigurationName)
	return nil
}
