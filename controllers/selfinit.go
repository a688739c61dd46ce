package controllers

import (
	"bytes"
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/values"
)

// reconcileSelfInitSecret keeps the self-init requests in Secret
// <cluster>-self-init while the cluster is not initialized and deletes it
// once it is. The requests may carry credentials, which belong in a Secret
// rather than in the ConfigMap every namespace viewer reads. It runs before
// the StatefulSet is applied, because OpenBao reads the file only as it
// starts.
func (r *OpenBaoClusterReconciler) reconcileSelfInitSecret(ctx context.Context, c *v1alpha1.OpenBaoCluster) error {
	selfInit, err := values.SelfInitFor(c)
	if err != nil {
		return nil // reconcileChildren reports the invalid field
	}
	// Exact while the cluster forms: a Secret created a moment ago may be
	// missing from the cache. Afterwards the cache only confirms it is gone.
	var reader client.Reader = r.Client
	if !c.Status.Initialized {
		reader = r.APIReader
	}
	existing, err := r.readSecret(ctx, reader, c.Namespace, c.SelfInitSecretName())
	if err != nil {
		return err
	}
	if selfInit == "" {
		if existing == nil {
			return nil
		}
		if err := r.Client.Delete(ctx, existing); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete Secret %s: %s", existing.Name, bootstrap.DescribeAPIError(err))
		}
		return nil
	}
	data := map[string][]byte{values.SelfInitFile: []byte(selfInit)}
	if existing != nil && maps.EqualFunc(existing.Data, data, bytes.Equal) {
		return nil
	}
	return r.writeSecret(ctx, c, existing, c.SelfInitSecretName(), corev1.SecretTypeOpaque, data)
}
