package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metric labels hold names only, never certificate or key material.
var (
	tlsCertExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_tls_cert_expiry_timestamp",
		Help: "Expiry of a cluster's TLS certificate, in seconds since the epoch; type is ca or server.",
	}, []string{"namespace", "name", "type"})
	tlsRotations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "openbao_tls_rotation_total",
		Help: "Server certificates the operator issued for a cluster.",
	}, []string{"namespace", "name"})
)

func init() {
	metrics.Registry.MustRegister(tlsCertExpiry, tlsRotations)
}

// forgetClusterMetrics drops the series of a deleted cluster.
func forgetClusterMetrics(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "name": name}
	tlsCertExpiry.DeletePartialMatch(labels)
	tlsRotations.DeletePartialMatch(labels)
}
