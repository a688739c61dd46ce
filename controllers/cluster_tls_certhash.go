package controllers

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/internal/pki"
	"github.com/openbao/operator/internal/podstate"
)

// annotateCertHash records on every ready OpenBao pod the SHA-256 of the
// certificate it should serve, without restarting it: the pod's bao-wrapper
// reloads the certificate itself; the annotation lets users and tests see
// which certificate each pod was handed. Pods already annotated are not
// written.
func (r *OpenBaoClusterReconciler) annotateCertHash(ctx context.Context, p *pass) error {
	if len(p.tls.certPEM) == 0 {
		return nil
	}
	hash, err := pki.CertHash(p.tls.certPEM)
	if err != nil {
		return nil // an unreadable certificate is reported by the TLS step
	}
	for i := range p.pods {
		pod := &p.pods[i]
		if !podstate.FromKube(pod).Ready || pod.Annotations[pki.CertHashAnnotation] == hash {
			continue
		}
		patch := client.MergeFrom(pod.DeepCopy())
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[pki.CertHashAnnotation] = hash
		if err := r.Client.Patch(ctx, pod, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("annotate pod %s with the certificate hash: %w", pod.Name, err)
		}
	}
	return nil
}
