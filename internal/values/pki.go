package values

import (
	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/pki"
)

// PKISpec is what the operator-managed certificates of the cluster must
// satisfy.
func PKISpec(c *v1alpha1.OpenBaoCluster) pki.Spec {
	spec := pki.Spec{
		ClusterName: c.Name, Namespace: c.Namespace,
		HeadlessService: c.HeadlessServiceName(), ClientService: c.ClientServiceName(),
		Replicas: c.Spec.Replicas, ExtraSANs: c.Spec.TLS.ExtraSANs,
	}
	if c.Spec.TLS.RotationPeriod != nil {
		spec.RotationPeriod = c.Spec.TLS.RotationPeriod.Duration
	}
	return spec
}
