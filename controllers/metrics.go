package controllers

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/upgrade"
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
	upgradeStatus = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_upgrade_status",
		Help: "Rollout of a cluster's pod template: 0 none under way, 1 rolling, 2 halted and waiting for a person.",
	}, []string{"namespace", "name"})
	upgradeDuration = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_upgrade_duration_seconds",
		Help: "Duration of a cluster's last completed rollout.",
	}, []string{"namespace", "name"})
	upgradeStepDowns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "openbao_upgrade_stepdown_total",
		Help: "Step-downs of the active server the operator asked for (rollouts and scale-downs).",
	}, []string{"namespace", "name"})
	// The durations are operator-wide: a label per cluster would make their
	// buckets the largest series set the operator exports.
	reconcileDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "openbao_reconcile_duration_seconds",
		Help:    "Duration of one reconcile pass of an OpenBaoCluster.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 9), // 1 ms to 65 s
	})
	// Backups, per cluster: name is the OpenBaoCluster's.
	backupSuccesses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "openbao_backup_success_total",
		Help: "Backups of a cluster that stored a verified snapshot.",
	}, []string{"namespace", "name"})
	backupFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "openbao_backup_failure_total",
		Help: "Backups of a cluster that failed.",
	}, []string{"namespace", "name"})
	backupLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_backup_last_success_timestamp",
		Help: "When the newest successful backup of a cluster completed, in seconds since the epoch.",
	}, []string{"namespace", "name"})
	backupLastSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_backup_last_size_bytes",
		Help: "Size of the newest successful backup of a cluster.",
	}, []string{"namespace", "name"})
	backupLastDuration = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_backup_last_duration_seconds",
		Help: "How long the newest finished backup of a cluster took.",
	}, []string{"namespace", "name"})
	backupConsecutiveFailures = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_backup_consecutive_failures",
		Help: "Backups of a cluster that failed since its last success.",
	}, []string{"namespace", "name"})
	restorePhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_restore_phase",
		Help: "Phase of the newest restore of a cluster: 0 pending, 1 running, 2 succeeded, 3 failed.",
	}, []string{"namespace", "name"})
	restoreDuration = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_restore_last_duration_seconds",
		Help: "How long the newest finished restore of a cluster took, from its Job to every server serving the data.",
	}, []string{"namespace", "name"})
	restoresTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "openbao_restores_total",
		Help: "Finished restores of a cluster, by outcome (Succeeded or Failed).",
	}, []string{"namespace", "name", "phase"})
	renderDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "openbao_render_duration_seconds",
		Help:    "Duration of computing a cluster's chart values and rendering the chart, render cache hits included.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 8), // 0.1 ms to 1.6 s
	})
)

func init() {
	metrics.Registry.MustRegister(tlsCertExpiry, tlsRotations, reconcileDuration, renderDuration,
		upgradeStatus, upgradeDuration, upgradeStepDowns,
		backupSuccesses, backupFailures, backupLastSuccess, backupLastSize, backupLastDuration, backupConsecutiveFailures,
		restorePhase, restoreDuration, restoresTotal)
}

// recordRollout exports the rollout's state after a pass.
func recordRollout(c *v1alpha1.OpenBaoCluster, o upgrade.Observed, d upgrade.Decision, now time.Time) {
	state := 0.0
	switch {
	case d.Upgrade != nil && d.Upgrade.Halted != "":
		state = 2
	case d.Upgrade != nil:
		state = 1
	}
	upgradeStatus.WithLabelValues(c.Namespace, c.Name).Set(state)
	if d.Completed && o.Upgrade != nil {
		upgradeDuration.WithLabelValues(c.Namespace, c.Name).Set(now.Sub(o.Upgrade.StartedAt.Time).Seconds())
	}
}

// forgetClusterMetrics drops the series of a deleted cluster.
func forgetClusterMetrics(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "name": name}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		tlsCertExpiry, tlsRotations, upgradeStatus, upgradeDuration, upgradeStepDowns,
		backupSuccesses, backupFailures, backupLastSuccess, backupLastSize, backupLastDuration, backupConsecutiveFailures,
		restorePhase, restoreDuration, restoresTotal,
	} {
		v.DeletePartialMatch(labels)
	}
}
