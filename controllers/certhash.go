package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/pki"
)

// annotateCertHash records on every ready OpenBao pod the SHA-256 of the
// certificate it should serve, without restarting it: the pod's bao-wrapper
// reloads the certificate itself; the annotation lets users and tests see
// which certificate each pod was handed. Pods already annotated are not
// written.
func (r *OpenBaoClusterReconciler) annotateCertHash(ctx context.Context, c *v1alpha1.OpenBaoCluster, certPEM []byte) error {
	if len(certPEM) == 0 {
		return nil
	}
	hash, err := pki.CertHash(certPEM)
	if err != nil {
		return nil // an unreadable certificate is reported by the TLS step
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels{
		"app.kubernetes.io/name": "openbao", "app.kubernetes.io/instance": c.Name,
	}); err != nil {
		return fmt.Errorf("list pods of %s: %w", c.Name, err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !podReady(pod) || pod.Annotations[pki.CertHashAnnotation] == hash {
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

func podReady(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
