package controllers

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/upgrade"
)

// Metric labels hold names only, never certificate or key material.
var (
	tlsCertExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_tls_cert_expiry_timestamp",
		Help: "Expiry of a cluster's TLS certificate, in seconds since the epoch; type is ca or server.",
	}, []string{"namespace", "name", "type"})
	// The alert compares a certificate's age against this, not against a
	// fixed number of days: a 24h rotation period would always be "within
	// 7 days of expiry".
	tlsCertRenewalDue = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_tls_cert_renewal_due_timestamp",
		Help: "When a cluster's TLS certificate is due for renewal (the operator's own schedule; a third of its lifetime before expiry for external certificates), in seconds since the epoch; type is ca or server.",
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
	drillsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "openbao_backup_verify_total",
		Help: "Restore drills of a cluster's backups that ended, by result (Passed or Failed).",
	}, []string{"namespace", "name", "result"})
	drillLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_backup_last_verified_timestamp",
		Help: "When a restore drill of a cluster's backups last passed, in seconds since the epoch.",
	}, []string{"namespace", "name"})
	drillLastDuration = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_backup_verify_last_duration_seconds",
		Help: "How long the newest restore drill of a cluster took, from the copy's creation to its end.",
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
	// The cluster's own state, per cluster; phase has one series per phase
	// (1 for the current one, 0 for the others), as kube-state-metrics
	// exports enums, so a query never joins on a changing label value.
	clusterReadyReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_cluster_ready_replicas",
		Help: "Servers of a cluster whose pods are ready.",
	}, []string{"namespace", "name"})
	clusterDesiredReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_cluster_desired_replicas",
		Help: "Servers a cluster's spec asks for.",
	}, []string{"namespace", "name"})
	clusterSealedReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_cluster_sealed_replicas",
		Help: "Servers of a cluster whose pod label says they are sealed.",
	}, []string{"namespace", "name"})
	clusterPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_cluster_phase",
		Help: "Phase of a cluster: 1 for the current phase, 0 for the others.",
	}, []string{"namespace", "name", "phase"})
	raftFailureTolerance = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_cluster_raft_failure_tolerance",
		Help: "Voters a cluster can lose and keep its quorum, as autopilot last reported it (status.raft).",
	}, []string{"namespace", "name"})
	raftHealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_cluster_raft_healthy",
		Help: "Autopilot's verdict on a cluster as last read (status.raft): 1 healthy, 0 not.",
	}, []string{"namespace", "name"})
	// Autopilot's verdict turns unhealthy for a sick read replica too,
	// which costs the voters' quorum nothing: split by voter, an alert
	// can tell the two apart.
	raftUnhealthyServers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "openbao_cluster_raft_unhealthy_servers",
		Help: "Servers autopilot last reported unhealthy (status.raft), by voter (true) or non-voter, a read replica (false).",
	}, []string{"namespace", "name", "voter"})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "openbao_reconcile_errors_total",
		Help: "Reconcile passes of a cluster that ended in an error (and were retried with backoff).",
	}, []string{"namespace", "name"})
	renderDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "openbao_render_duration_seconds",
		Help:    "Duration of computing a cluster's chart values and rendering the chart, render cache hits included.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 8), // 0.1 ms to 1.6 s
	})
)

// The authenticated endpoint asks the API server who the scraper is and
// whether it may GET /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// MetricsServerOptions is how the manager serves its metrics: HTTPS, where
// each scrape must carry a bearer token of a subject allowed to GET the
// non-resource URL /metrics (the ClusterRole openbao-operator-metrics-reader),
// checked through TokenReview and SubjectAccessReview. The certificate is
// self-signed unless /tmp/k8s-metrics-server/serving-certs (controller-
// runtime's CertDir) holds tls.crt and tls.key. plainHTTP (--metrics-secure=false) drops both, for a manager
// run by hand.
func MetricsServerOptions(addr string, plainHTTP bool) metricsserver.Options {
	if plainHTTP {
		return metricsserver.Options{BindAddress: addr}
	}
	return metricsserver.Options{BindAddress: addr, SecureServing: true,
		FilterProvider: filters.WithAuthenticationAndAuthorization}
}

// exported are every collector the operator registers.
var exported = []prometheus.Collector{tlsCertExpiry, tlsCertRenewalDue, tlsRotations, reconcileDuration, renderDuration,
	upgradeStatus, upgradeDuration, upgradeStepDowns,
	backupSuccesses, backupFailures, backupLastSuccess, backupLastSize, backupLastDuration, backupConsecutiveFailures,
	clusterReadyReplicas, clusterDesiredReplicas, clusterSealedReplicas, clusterPhase,
	raftFailureTolerance, raftHealthy, raftUnhealthyServers, reconcileErrors,
	restorePhase, restoreDuration, restoresTotal, drillsTotal, drillLastSuccess, drillLastDuration,
}

func init() {
	metrics.Registry.MustRegister(exported...)
}

// ExportedMetrics describes every metric family the operator exports, for
// the tests that keep the alerts and the dashboard on real series.
func ExportedMetrics() []*prometheus.Desc {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range exported {
			c.Describe(ch)
		}
		close(ch)
	}()
	var out []*prometheus.Desc
	for d := range ch {
		out = append(out, d)
	}
	return out
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

// allPhases are the values of the phase label, one series each.
var allPhases = []v1alpha1.ClusterPhase{v1alpha1.PhasePending, v1alpha1.PhaseInitializing,
	v1alpha1.PhaseRunning, v1alpha1.PhaseUpgrading, v1alpha1.PhaseRestoring, v1alpha1.PhaseDegraded, v1alpha1.PhasePaused}

// recordCluster exports the state a pass wrote into the status.
func recordCluster(c *v1alpha1.OpenBaoCluster, status *v1alpha1.OpenBaoClusterStatus, sealed int) {
	ns, name := c.Namespace, c.Name
	clusterReadyReplicas.WithLabelValues(ns, name).Set(float64(status.ReadyReplicas))
	clusterDesiredReplicas.WithLabelValues(ns, name).Set(float64(c.Spec.Replicas))
	clusterSealedReplicas.WithLabelValues(ns, name).Set(float64(sealed))
	for _, ph := range allPhases {
		v := 0.0
		if ph == status.Phase {
			v = 1
		}
		clusterPhase.WithLabelValues(ns, name, string(ph)).Set(v)
	}
	if status.Raft == nil {
		raftFailureTolerance.DeleteLabelValues(ns, name)
		raftHealthy.DeleteLabelValues(ns, name)
		raftUnhealthyServers.DeletePartialMatch(prometheus.Labels{"namespace": ns, "name": name})
		return
	}
	raftFailureTolerance.WithLabelValues(ns, name).Set(float64(status.Raft.FailureTolerance))
	healthy := 0.0
	if status.Raft.Healthy {
		healthy = 1
	}
	raftHealthy.WithLabelValues(ns, name).Set(healthy)
	unhealthy := map[bool]float64{true: 0, false: 0}
	for _, s := range status.Raft.Servers {
		if !s.Healthy {
			unhealthy[s.Voter]++
		}
	}
	for voter, n := range unhealthy {
		raftUnhealthyServers.WithLabelValues(ns, name, strconv.FormatBool(voter)).Set(n)
	}
}

// recordReconcileError counts a pass that failed; the pass of a cluster
// that is gone never gets here, so no series outlives its cluster.
func recordReconcileError(namespace, name string) {
	reconcileErrors.WithLabelValues(namespace, name).Inc()
}

// forgetClusterMetrics drops the series of a deleted cluster.
func forgetClusterMetrics(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "name": name}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		tlsCertExpiry, tlsCertRenewalDue, tlsRotations, upgradeStatus, upgradeDuration, upgradeStepDowns,
		backupSuccesses, backupFailures, backupLastSuccess, backupLastSize, backupLastDuration, backupConsecutiveFailures,
		restorePhase, restoreDuration, restoresTotal, drillsTotal, drillLastSuccess, drillLastDuration,
		clusterReadyReplicas, clusterDesiredReplicas, clusterSealedReplicas, clusterPhase,
		raftFailureTolerance, raftHealthy, raftUnhealthyServers, reconcileErrors,
	} {
		v.DeletePartialMatch(labels)
	}
}
