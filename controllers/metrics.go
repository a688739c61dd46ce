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
	// The durations are operator-wide: a label per cluster would make their
	// buckets the largest series set the operator exports.
	reconcileDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "openbao_reconcile_duration_seconds",
		Help:    "Duration of one reconcile pass of an OpenBaoCluster.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 9), // 1 ms to 65 s
	})
	renderDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "openbao_render_duration_seconds",
		Help:    "Duration of computing a cluster's chart values and rendering the chart, render cache hits included.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 8), // 0.1 ms to 1.6 s
	})
)

func init() {
	metrics.Registry.MustRegister(tlsCertExpiry, tlsRotations, reconcileDuration, renderDuration)
}

// forgetClusterMetrics drops the series of a deleted cluster.
func forgetClusterMetrics(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "name": name}
	tlsCertExpiry.DeletePartialMatch(labels)
	tlsRotations.DeletePartialMatch(labels)
}
