package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/test/fixtures"
	"github.com/openbao/operator/test/localnode"
	"github.com/openbao/operator/test/miniotest"
)

// The alerts of both charts, proven on a real Prometheus (prometheus_test.go)
// against real faults: each fires within its hold (shortened, see
// forScale) plus one evaluation and one scrape after the fault is in place
// in the operator's metrics, and resolves once the fault is gone.

// scraperTokenSecret is the token Secret the install chart renders for
// its ServiceMonitor's scraper (metrics.secure).
const scraperTokenSecret = "openbao-operator-metrics-scraper-token"

// TestOperatorDownAlertFiresAndResolves scales the manager Deployment to
// zero: OpenBaoOperatorDown (the install chart's PrometheusRule, on the
// target of its ServiceMonitor) fires, and resolves when the manager is
// back. It stops the only manager, so it is serial (see the package
// comment) and brings the manager back, Ready, before it ends.
func TestOperatorDownAlertFiresAndResolves(t *testing.T) {
	cl := installOperator(t)
	ctx := context.Background()
	start := time.Now()
	prom := startPrometheus(ctx, t, cl, localnode.OperatorNamespace)
	self := map[string]string{"namespace": localnode.OperatorNamespace}
	prom.expectQuiet(ctx, t, "OpenBaoOperatorDown", "critical", self,
		fmt.Sprintf(`up{job="openbao-operator-metrics",namespace=%q} == 1`, localnode.OperatorNamespace))

	restore := scaleManager(ctx, t, cl, 0)
	t.Cleanup(restore)
	inPlace := waitNoMetricsEndpoint(ctx, t, cl)
	// The target leaves Prometheus through service discovery, which may
	// hold a change for promSDDelay, and Prometheus marks the series of a
	// target that is gone stale only after two of its scrape intervals and
	// a tenth (in case the target comes back): until then up == 1 holds.
	stale := 2*prom.scrape + prom.scrape/10
	prom.expectFiring(ctx, t, "OpenBaoOperatorDown", "critical", self, inPlace, promSDDelay+stale)

	restore()
	prom.expectResolved(ctx, t, "OpenBaoOperatorDown", "critical", self, time.Minute)
	logf("operator-down alert test took %s", time.Since(start).Round(100*time.Millisecond))
}

// scaleManager sets the manager Deployment's replicas and returns what
// puts them back and waits for the manager to be Ready (once).
func scaleManager(ctx context.Context, t *testing.T, cl client.Client, n int32) (restore func()) {
	t.Helper()
	d := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: localnode.OperatorNamespace, Name: localnode.OperatorDeployment}
	if err := cl.Get(ctx, key, d); err != nil {
		t.Fatal(err)
	}
	was := *d.Spec.Replicas
	setReplicas := func(n int32) error {
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = &n
		return cl.Patch(ctx, d, patch)
	}
	if err := setReplicas(n); err != nil {
		t.Fatal(err)
	}
	done := false
	return func() {
		if done {
			return
		}
		done = true
		if err := setReplicas(was); err != nil {
			t.Errorf("scale the manager back to %d: %v", was, err)
			return
		}
		if err := localnode.WaitOperatorReady(ctx, cl); err != nil {
			t.Errorf("the manager after scaling back: %v", err)
		}
	}
}

// waitNoMetricsEndpoint waits until the Service the install chart's
// ServiceMonitor selects has no endpoint address left, and returns when.
func waitNoMetricsEndpoint(ctx context.Context, t *testing.T, cl client.Client) time.Time {
	t.Helper()
	waitFor(ctx, t, time.Minute, "no manager behind Service openbao-operator-metrics", func() (bool, string) {
		ep := &corev1.Endpoints{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: localnode.OperatorNamespace, Name: "openbao-operator-metrics"}, ep); err != nil {
			return false, err.Error()
		}
		for _, s := range ep.Subsets {
			if len(s.Addresses)+len(s.NotReadyAddresses) > 0 {
				return false, fmt.Sprintf("%+v", s)
			}
		}
		return true, ""
	})
	return time.Now()
}

// TestClusterAlertsFireOnRealFaultsAndResolve carries one three-server
// cluster (External TLS, monitoring on, backups to MinIO) through real
// faults, one after the other, each with its alert from the PrometheusRule
// the operator rendered: a renewal that did not happen
// (OpenBaoCertificateExpiresSoon, quiet before for a healthy 3-hour
// certificate), the active server sealed (OpenBaoServerSealed and
// OpenBaoNoFailureTolerance), backups failing with the store down
// (OpenBaoBackupFailing) and a rollout whose pod never becomes Ready
// (OpenBaoUpgradeHalted). Each resolves once the fault is undone.
func TestClusterAlertsFireOnRealFaultsAndResolve(t *testing.T) {
	installOperator(t)
	prometheusBinary(t)
	t.Parallel()
	ctx := context.Background()
	cl := backupClient(t)
	start := time.Now()
	m := startBridgeMinIO(t)
	ns := createNamespace(ctx, t, cl, "e2e-alerts")
	ca, names := newExternalCA(t), externalNames(ns)
	now := time.Now()
	certPEM, keyPEM := ca.issueValid(t, names, now.Add(-time.Minute), now.Add(3*time.Hour))
	secret := fixtures.CertManagerSecret(ns, "bao", "openbao-ca", externalSecret, certPEM, keyPEM, ca.caPEM)
	if err := cl.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	createAlertsCluster(ctx, t, cl, ns)
	waitFor(ctx, t, 5*time.Minute, "phase Running with 3 ready servers and the operator's identity", func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "bao")
		return st["phase"] == "Running" && fmt.Sprint(st["readyReplicas"]) == fmt.Sprint(replicas) && st["identityConfigured"] == true, fmt.Sprint(st)
	})
	setBackupToMinIO(ctx, t, cl, ns, m, "alerts", func(b *v1alpha1.BackupSpec) { b.JWTAuthRole = "backup" })
	// The backup alerts are rendered once spec.backup is set.
	waitFor(ctx, t, time.Minute, "the cluster's PrometheusRule with the backup alerts", func() (bool, string) {
		for _, pr := range listMonitoring(ctx, t, cl, ns, "PrometheusRule") {
			if raw, _ := json.Marshal(pr.Object); strings.Contains(string(raw), "OpenBaoBackupFailing") {
				return true, ""
			}
		}
		return false, "not yet"
	})
	prom := startPrometheus(ctx, t, cl, localnode.OperatorNamespace, ns)
	waitFor(ctx, t, time.Minute, "the operator's and the three servers' targets up", func() (bool, string) {
		servers := prom.query(t, fmt.Sprintf(`up{namespace=%q} == 1`, ns))
		operator := prom.query(t, `up{job="openbao-operator-metrics"} == 1`)
		return len(servers) == replicas && len(operator) == 1, fmt.Sprintf("servers %v operator %v", servers, operator)
	})
	logf("alerts: cluster Running and scraped %s after the test started", time.Since(start).Round(100*time.Millisecond))
	f := &faults{ctx: ctx, t: t, cl: cl, prom: prom, ns: ns, token: string(secretData(ctx, t, cl, localnode.OperatorNamespace, scraperTokenSecret, "token"))}

	f.withoutOperatorKills(func() { f.certificateNotRenewed(secret, ca, names) })
	f.withoutOperatorKills(f.activeServerSealed)
	f.withoutOperatorKills(func() { f.backupsFailing(m) })
	f.withoutOperatorKills(f.rolloutHalted)
	logf("cluster alerts test took %s", time.Since(start).Round(100*time.Millisecond))
}

func externalNames(ns string) []string {
	var names []string
	for i := range replicas {
		names = append(names, fmt.Sprintf("bao-%d.bao-internal.%s.svc", i, ns))
	}
	return append(names, "bao."+ns+".svc")
}

// createAlertsCluster creates the three-server cluster with External TLS
// (Secret externalSecret), the ServiceMonitor and PrometheusRule.
func createAlertsCluster(ctx context.Context, t *testing.T, cl client.Client, ns string) {
	t.Helper()
	obj := clusterObject(t, ns, "bao", nil)
	spec := obj.Object["spec"].(map[string]any)
	spec["tls"] = map[string]any{"mode": "External", "external": map[string]any{"serverSecretRef": map[string]any{"name": externalSecret}}}
	spec["monitoring"] = map[string]any{"serviceMonitor": map[string]any{"enabled": true, "interval": localnode.MonitoringScrapeInterval}}
	if err := cl.Create(ctx, obj); err != nil {
		t.Fatalf("create OpenBaoCluster: %v", err)
	}
}

// faults are the faults of the alerts test, on cluster bao of ns.
type faults struct {
	ctx   context.Context
	t     *testing.T
	cl    client.Client
	prom  *promServer
	ns    string
	token string // the install chart's scraper's
}

func (f *faults) self(extra ...string) map[string]string {
	m := map[string]string{"namespace": f.ns, "name": "bao"}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

// withoutOperatorKills runs one fault with kills of the manager (by the
// parallel rollout and restore tests) held off: most alerts read the
// operator's metrics, and each must fire within its bound. It first waits
// until Prometheus scrapes the running manager, which a kill before it
// replaced.
func (f *faults) withoutOperatorKills(fault func()) {
	f.t.Helper()
	resume := holdOperatorKills(f.t)
	defer resume()
	pod := managerPod(f.ctx, f.t, f.cl).Name
	waitFor(f.ctx, f.t, time.Minute, "Prometheus scraping the running manager "+pod, func() (bool, string) {
		up := f.prom.query(f.t, fmt.Sprintf(`up{job="openbao-operator-metrics",pod=%q} == 1`, pod))
		return len(up) == 1, fmt.Sprint(up)
	})
	fault()
}

// inPlace waits until the operator's own metrics show the fault (series
// of this cluster, its labels after name and namespace, with a value ok
// accepts) and returns when: from then on Prometheus can see it at its
// next scrape.
func (f *faults) inPlace(metric, moreLabels string, ok func(float64) bool) time.Time {
	f.t.Helper()
	series := fmt.Sprintf(`%s{name="bao",namespace=%q%s}`, metric, f.ns, moreLabels)
	waitEvery(f.ctx, f.t, 250*time.Millisecond, 3*time.Minute, series+" showing the fault", func() (bool, string) {
		code, body := scrapeManager(f.ctx, f.t, f.cl, f.token)
		v, found := metricValue(body, series)
		return code == http.StatusOK && found && ok(v), fmt.Sprintf("HTTP %d, %v (found %t)", code, v, found)
	})
	return time.Now()
}

// requireQuiet fails when the alert is already pending or firing before
// its fault: firing afterwards would then prove nothing.
func (f *faults) requireQuiet(alert, severity string, match map[string]string) {
	f.t.Helper()
	if as := f.prom.alerts(f.t, alert, withSeverity(match, severity)); len(as) > 0 {
		f.t.Fatalf("%s (%s) is %s before its fault", alert, severity, as[0].State)
	}
}

// certificateNotRenewed: a healthy server certificate of 3 hours leaves
// OpenBaoCertificateExpiresSoon quiet (the former rule, "expires within 7
// days", fired for it). Then the Secret holds a certificate past its
// renewal date, as when cert-manager stopped renewing it: the warning
// fires, and resolves when a renewed certificate arrives.
func (f *faults) certificateNotRenewed(secret *corev1.Secret, ca *externalCA, names []string) {
	t, self := f.t, f.self("type", "server")
	due := fmt.Sprintf(`openbao_tls_cert_renewal_due_timestamp{namespace=%q,name="bao",type="server"}`, f.ns)
	f.prom.expectQuiet(f.ctx, t, "OpenBaoCertificateExpiresSoon", "warning", self, due)
	f.prom.expectQuiet(f.ctx, t, "OpenBaoCertificateExpiresSoon", "critical", self, due)

	// Issued 2h20m ago for 3h: renewal was due 20 minutes ago, a third of
	// its window (the hold's quarter of 1h is 15 minutes) overdue.
	now := time.Now()
	stale := now.Add(-140 * time.Minute)
	f.putCertificate(secret, ca, names, stale, now.Add(40*time.Minute))
	at := f.inPlace("openbao_tls_cert_renewal_due_timestamp", `,type="server"`, func(v float64) bool { return v < float64(now.Unix()) })
	f.prom.expectFiring(f.ctx, t, "OpenBaoCertificateExpiresSoon", "warning", self, at, 0)

	now = time.Now()
	f.putCertificate(secret, ca, names, now.Add(-time.Minute), now.Add(3*time.Hour))
	f.prom.expectResolved(f.ctx, t, "OpenBaoCertificateExpiresSoon", "warning", self, time.Minute)
}

func (f *faults) putCertificate(secret *corev1.Secret, ca *externalCA, names []string, notBefore, notAfter time.Time) {
	f.t.Helper()
	certPEM, keyPEM := ca.issueValid(f.t, names, notBefore, notAfter)
	next := fixtures.CertManagerSecret(f.ns, "bao", "openbao-ca", externalSecret, certPEM, keyPEM, ca.caPEM)
	if err := f.cl.Get(f.ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		f.t.Fatal(err)
	}
	secret.Data = next.Data
	if err := f.cl.Update(f.ctx, secret); err != nil {
		f.t.Fatalf("update Secret %s: %v", secret.Name, err)
	}
}

// activeServerSealed seals the active server through sys/seal (a standby
// refuses it) with the root token: OpenBaoServerSealed fires, and with one
// of three voters gone OpenBaoNoFailureTolerance too. Deleting the pod
// brings the server back unsealed (auto-unseal) and both resolve.
func (f *faults) activeServerSealed() {
	t, self := f.t, f.self()
	f.requireQuiet("OpenBaoServerSealed", "critical", self)
	f.requireQuiet("OpenBaoNoFailureTolerance", "warning", self)
	pod := f.activeServer()
	f.baoCall(pod, http.MethodPut, "sys/seal")
	at := f.inPlace("openbao_cluster_sealed_replicas", "", func(v float64) bool { return v > 0 })
	f.prom.expectFiring(f.ctx, t, "OpenBaoServerSealed", "critical", self, at, 0)
	at = f.inPlace("openbao_cluster_raft_failure_tolerance", "", func(v float64) bool { return v == 0 })
	f.prom.expectFiring(f.ctx, t, "OpenBaoNoFailureTolerance", "warning", self, at, 0)

	if err := f.cl.Delete(f.ctx, &pod); err != nil {
		t.Fatal(err)
	}
	f.prom.expectResolved(f.ctx, t, "OpenBaoServerSealed", "critical", self, 3*time.Minute)
	f.prom.expectResolved(f.ctx, t, "OpenBaoNoFailureTolerance", "warning", self, 3*time.Minute)
}

// activeServer is the pod whose server answers sys/health as active.
func (f *faults) activeServer() corev1.Pod {
	f.t.Helper()
	caPEM := secretData(f.ctx, f.t, f.cl, f.ns, externalSecret, "ca.crt")
	var active corev1.Pod
	waitFor(f.ctx, f.t, time.Minute, "an active server", func() (bool, string) {
		for _, p := range serverPods(f.ctx, f.t, f.cl, f.ns, replicas) {
			resp, err := tlsClient(caPEM, dnsName(p, f.ns), nil).Get("https://" + net.JoinHostPort(p.Status.PodIP, "8200") + "/v1/sys/health")
			if err != nil {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				active = p
				return true, ""
			}
		}
		return false, "no server answers 200"
	})
	return active
}

// baoCall calls path on pod's server with the root token.
func (f *faults) baoCall(pod corev1.Pod, method, path string) {
	f.t.Helper()
	caPEM := secretData(f.ctx, f.t, f.cl, f.ns, externalSecret, "ca.crt")
	root := string(secretData(f.ctx, f.t, f.cl, f.ns, "bao-root-token", "token"))
	req, err := http.NewRequest(method, "https://"+net.JoinHostPort(pod.Status.PodIP, "8200")+"/v1/"+path, strings.NewReader("{}"))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("X-Vault-Token", root)
	resp, err := tlsClient(caPEM, dnsName(pod, f.ns), nil).Do(req)
	if err != nil {
		f.t.Fatalf("%s %s on %s: %v", method, path, pod.Name, err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		f.t.Fatalf("%s %s on %s: HTTP %d", method, path, pod.Name, resp.StatusCode)
	}
}

// backupsFailing kills MinIO: two on-demand backups fail (StoreFailed)
// and OpenBaoBackupFailing fires; with MinIO back one succeeds and it
// resolves.
func (f *faults) backupsFailing(m *miniotest.Server) {
	t, self := f.t, f.self()
	f.requireQuiet("OpenBaoBackupFailing", "warning", self)
	m.Kill()
	for _, name := range []string{"store-down-1", "store-down-2"} {
		waitBackup(f.ctx, t, f.cl, f.ns, takeBackup(f.ctx, t, f.cl, f.ns, name), v1alpha1.BackupFailed)
	}
	at := f.inPlace("openbao_backup_consecutive_failures", "", func(v float64) bool { return v >= 2 })
	f.prom.expectFiring(f.ctx, t, "OpenBaoBackupFailing", "warning", self, at, 0)

	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	waitBackup(f.ctx, t, f.cl, f.ns, takeBackup(f.ctx, t, f.cl, f.ns, "store-back"), v1alpha1.BackupSucceeded)
	f.prom.expectResolved(f.ctx, t, "OpenBaoBackupFailing", "warning", self, time.Minute)
}

// rolloutHalted asks for more CPU than the node has, with a short
// PodReadyTimeout (15s): the first rolled pod stays Pending, the rollout
// halts and
// OpenBaoUpgradeHalted fires. Taking the request back and resuming
// (spec.upgrade.resumeRequest, what kubectl openbao resume-upgrade sets)
// resolves it.
func (f *faults) rolloutHalted() {
	t, self := f.t, f.self()
	f.requireQuiet("OpenBaoUpgradeHalted", "critical", self)
	patchSpec(f.ctx, t, f.cl, f.ns, map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "64"}},
		"upgrade": map[string]any{"podReadyTimeout": "15s"}})
	at := f.inPlace("openbao_upgrade_status", "", func(v float64) bool { return v == 2 })
	f.prom.expectFiring(f.ctx, t, "OpenBaoUpgradeHalted", "critical", self, at, 0)

	patchSpec(f.ctx, t, f.cl, f.ns, map[string]any{"resources": nil, "upgrade": map[string]any{"resumeRequest": "alerts-test"}})
	f.prom.expectResolved(f.ctx, t, "OpenBaoUpgradeHalted", "critical", self, 2*time.Minute)
}
