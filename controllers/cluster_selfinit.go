package controllers

import (
	"bytes"
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/secrets"
	"github.com/openbao/operator/internal/values"
)

// reconcileSelfInitSecret keeps the self-init requests in Secret
// <cluster>-self-init while the cluster is not initialized and deletes it
// once it is. The requests may carry credentials, which belong in a Secret
// rather than in the ConfigMap every namespace viewer reads. It runs before
// the StatefulSet is applied, because OpenBao reads the file only as it
// starts.
func (r *OpenBaoClusterReconciler) reconcileSelfInitSecret(ctx context.Context, p *pass) error {
	c := p.cluster
	if err := r.loadIssuer(ctx, p); err != nil {
		return err
	}
	selfInit, err := values.SelfInitFor(p.input())
	if err != nil {
		return nil // reconcileChildren reports the invalid field
	}
	// The cache holds the Secret: it carries our label.
	existing, err := r.readSecret(ctx, r.Client, c.Namespace, c.SelfInitSecretName())
	if err != nil {
		return err
	}
	if selfInit == "" {
		if existing == nil {
			return nil
		}
		return r.deleteSecret(ctx, existing)
	}
	data := map[string][]byte{values.SelfInitFile: []byte(selfInit)}
	if existing == nil {
		err = r.createSecret(ctx, secrets.New(c, secrets.Spec{Name: c.SelfInitSecretName(), Type: corev1.SecretTypeOpaque, Data: data}))
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		// Created a moment ago and not in the cache yet, or made by hand.
		if existing, err = r.readSecret(ctx, r.APIReader, c.Namespace, c.SelfInitSecretName()); err != nil || existing == nil {
			return err
		}
		if !writtenByOperator(existing, c) {
			msg := fmt.Sprintf("Secret %s exists but was not written by the operator: OpenBao would read its requests at "+
				"its first start, so the operator neither overwrites it nor starts the servers. Delete it", existing.Name)
			return p.hold(v1alpha1.ReasonSelfInitSecretNotOwned, "WriteSelfInit", msg)
		}
	}
	if maps.EqualFunc(existing.Data, data, bytes.Equal) {
		return nil
	}
	return r.replaceSecretData(ctx, existing, data)
}

// loadIssuer reads the service-account issuer for the identity requests of
// a self-init cluster that has not started yet: OpenBao runs them once, so
// the StatefulSet waits until the issuer can be read.
func (r *OpenBaoClusterReconciler) loadIssuer(ctx context.Context, p *pass) error {
	c := p.cluster
	if r.Issuer == nil || p.status.Initialized || c.Spec.SelfInit == nil || !c.Spec.SelfInit.Enabled {
		return nil
	}
	iss, err := r.Issuer.Issuer(ctx)
	if err != nil {
		return fmt.Errorf("self-init needs the service-account issuer for the operator's identity: %w", err)
	}
	p.issuer = &iss
	return nil
}
