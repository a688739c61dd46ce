package values

import (
	"slices"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/pki"
)

// PKISpec is what the operator-managed certificates of the cluster must
// satisfy. The hosts of an enabled Ingress and Gateway route join the
// names: a Gateway passes TLS through, so its clients see OpenBao's own
// certificate, and an Ingress controller that verifies its backend checks
// the host.
func PKISpec(c *v1alpha1.OpenBaoCluster) pki.Spec {
	spec := pki.Spec{
		ClusterName: c.Name, Namespace: c.Namespace,
		HeadlessService: c.HeadlessServiceName(), ClientService: c.ClientServiceName(),
		Replicas: c.Spec.Replicas, ExtraSANs: slices.Concat(c.Spec.TLS.ExtraSANs, routeHosts(c)),
	}
	if r := c.Spec.ReadReplicas; r != nil {
		spec.Read = pki.ReadReplicas{StatefulSet: c.ReadStatefulSetName(), HeadlessService: c.ReadHeadlessServiceName(),
			Service: c.ReadServiceName(), Replicas: r.Replicas}
	}
	if c.Spec.TLS.RotationPeriod != nil {
		spec.RotationPeriod = c.Spec.TLS.RotationPeriod.Duration
	}
	return spec
}

// routeHosts are the external names the cluster is reached by.
func routeHosts(c *v1alpha1.OpenBaoCluster) []string {
	var hosts []string
	if in := c.Spec.Ingress; in != nil && in.Enabled && in.Host != "" {
		hosts = append(hosts, in.Host)
	}
	if gw := c.Spec.Gateway; gw != nil && gw.Enabled {
		hosts = append(hosts, gw.Hostnames...)
	}
	return hosts
}
