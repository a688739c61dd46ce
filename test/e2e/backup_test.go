package e2e_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/test/miniotest"
)

// MinIO for the e2e tier runs on this host, listening on the pod bridge's
// gateway address: reachable from every pod (the backup Jobs and the
// operator, for retention) as an object store outside the cluster is, with
// no image to build or import, and stopped by the test that started it.

func backupClient(t testing.TB) client.Client {
	t.Helper()
	cfg, s := typedConfig(t)
	cl, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return webhookRetrying{cl}
}

// typedConfig is the node's administrator configuration and a scheme
// that knows Kubernetes' kinds and the operator's, for typed clients.
func typedConfig(t testing.TB) (*rest.Config, *runtime.Scheme) {
	t.Helper()
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	cfg, err := node.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg, s
}

// bridgeGateway is the host's address on the pod bridge (the first of the
// node's pod range).
func bridgeGateway(t testing.TB) string {
	t.Helper()
	_, cidr, err := net.ParseCIDR(node.PodCIDR)
	if err != nil {
		t.Fatal(err)
	}
	ip := cidr.IP.To4()
	ip[3]++
	return ip.String()
}

func startBridgeMinIO(t testing.TB) *miniotest.Server {
	t.Helper()
	m, err := miniotest.StartWith(miniotest.Options{Host: bridgeGateway(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

// TestBackupsOnScheduleAndOnDemandToMinIO: a one-server cluster whose
// backup Jobs log in with the operator's JWT identity (set up here with the
// root token, as the operator will at initialization): an on-demand backup
// lands in MinIO and checks out; with MinIO down a backup fails and the
// cluster counts it; the every-minute schedule then recovers; retention
// keeps two; a token Secret works too; metrics say so; and no log holds a
// credential, a token or a byte of a snapshot.
func TestBackupsOnScheduleAndOnDemandToMinIO(t *testing.T) {
	installOperator(t)
	t.Parallel()
	// The backup counters checked below count since the manager started.
	resumeKills := holdOperatorKills(t)
	cl := backupClient(t)
	ctx := context.Background()
	start := time.Now()
	m := startBridgeMinIO(t)
	ns := createNamespace(ctx, t, cl, "e2e-backup")
	createOneServerCluster(ctx, t, cl, ns)
	waitFor(ctx, t, 3*time.Minute, "phase Running", func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "bao")
		return st["phase"] == "Running", fmt.Sprint(st["phase"])
	})
	root := string(secretData(ctx, t, cl, ns, "bao-root-token", "token"))
	bao := newBaoAPI(ctx, t, cl, ns, root)
	waitFor(ctx, t, time.Minute, "the operator's OpenBao identity", func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "bao")
		return st["identityConfigured"] == true, fmt.Sprint(st["identityConfigured"])
	})
	enableBackups(ctx, t, cl, ns, m)
	logf("backups enabled %s after the test started", time.Since(start).Round(100*time.Millisecond))

	first := waitBackup(ctx, t, cl, ns, takeBackup(ctx, t, cl, ns, "on-demand-1"), v1alpha1.BackupSucceeded)
	entries := checkStoredSnapshot(t, m, first)
	logf("on-demand backup %s: %d bytes in %s", first.Status.Key, first.Status.Size, first.Status.Duration.Duration)
	// The backup pod wrote its canary, and the status records it.
	canary, _ := bao.call(t, http.MethodGet, identity.CanaryPath, nil)["data"].(map[string]any)
	if err := backup.CanaryMatches(canary, first.Name, first.Status.Canary); err != nil {
		t.Errorf("the canary of %s: %v", first.Name, err)
	}

	m.Kill()
	failed := waitBackup(ctx, t, cl, ns, takeBackup(ctx, t, cl, ns, "store-down"), v1alpha1.BackupFailed)
	if failed.Status.Reason != "StoreFailed" {
		t.Errorf("with the store down: %s: %s", failed.Status.Reason, failed.Status.Message)
	}
	waitFor(ctx, t, time.Minute, "consecutiveFailures 1", func() (bool, string) {
		st := backupStatus(ctx, t, cl, ns)
		return st.ConsecutiveFailures == 1 && strings.Contains(st.LastFailureReason, "StoreFailed"), fmt.Sprintf("%+v", st)
	})
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	logf("store down and back %s after the test started", time.Since(start).Round(100*time.Millisecond))

	scheduled := waitScheduledSuccess(ctx, t, cl, ns)
	logf("scheduled backup %s recovered %s after the test started", scheduled, time.Since(start).Round(100*time.Millisecond))
	tokenBackupAndRetention(ctx, t, cl, ns, m, bao)
	snapshotBeforeRollout(ctx, t, cl, ns, m)
	checkBackupMetrics(ctx, t, cl, ns)
	resumeKills()
	assertNothingSecretInLogs(ctx, t, cl, ns, entries)
	logf("backup tests took %s", time.Since(start).Round(100*time.Millisecond))
}

func createOneServerCluster(ctx context.Context, t testing.TB, cl client.Client, ns string) {
	t.Helper()
	obj := clusterObject(t, ns, "bao", nil)
	obj.Object["spec"].(map[string]any)["replicas"] = int64(1)
	if err := cl.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

// enableBackups stores MinIO's credentials in a Secret and sets
// spec.backup: every minute, the JWT identity, retention of two.
func enableBackups(ctx context.Context, t *testing.T, cl client.Client, ns string, m *miniotest.Server) {
	t.Helper()
	maxCount := int32(2)
	setBackupToMinIO(ctx, t, cl, ns, m, "e2e", func(b *v1alpha1.BackupSpec) {
		b.Schedule, b.JWTAuthRole = "* * * * *", "backup"
		b.Retention = &v1alpha1.BackupRetention{MaxCount: &maxCount}
	})
}

// setBackupToMinIO stores MinIO's credentials in Secret store-credentials
// and points the cluster's spec.backup at MinIO under prefix; set adds the
// rest (identity, schedule, retention).
func setBackupToMinIO(ctx context.Context, t testing.TB, cl client.Client, ns string, m *miniotest.Server, prefix string,
	set func(*v1alpha1.BackupSpec)) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "store-credentials", Namespace: ns}, StringData: map[string]string{
		backup.AccessKeyIDKey: m.AccessKey, backup.SecretAccessKeyKey: m.SecretKey}}
	if err := cl.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// The operator writes the cluster too (finalizer, annotations): read
	// it again on a conflict, as a user's tooling would.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c := &v1alpha1.OpenBaoCluster{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, c); err != nil {
			return err
		}
		c.Spec.Backup = &v1alpha1.BackupSpec{
			Target: v1alpha1.BackupTarget{Endpoint: m.Endpoint, Bucket: m.Bucket, PathPrefix: prefix, UsePathStyle: true,
				CredentialsSecretRef: &corev1.LocalObjectReference{Name: "store-credentials"}},
		}
		set(c.Spec.Backup)
		return cl.Update(ctx, c)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func takeBackup(ctx context.Context, t testing.TB, cl client.Client, ns, name string) string {
	t.Helper()
	b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: "bao"}}
	if err := cl.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	return name
}

func waitBackup(ctx context.Context, t testing.TB, cl client.Client, ns, name string, want v1alpha1.BackupPhase) *v1alpha1.OpenBaoBackup {
	t.Helper()
	b := &v1alpha1.OpenBaoBackup{}
	waitEvery(ctx, t, 500*time.Millisecond, 2*time.Minute, "backup "+name+" "+string(want), func() (bool, string) {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
			return false, err.Error()
		}
		return b.Status.Phase.Done(), fmt.Sprintf("%+v", b.Status)
	})
	if b.Status.Phase != want {
		t.Fatalf("backup %s: %s %s: %s", name, b.Status.Phase, b.Status.Reason, b.Status.Message)
	}
	return b
}

func backupStatus(ctx context.Context, t testing.TB, cl client.Client, ns string) v1alpha1.BackupStatus {
	t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, c); err != nil {
		t.Fatal(err)
	}
	if c.Status.Backup == nil {
		return v1alpha1.BackupStatus{}
	}
	return *c.Status.Backup
}

// waitScheduledSuccess waits for a backup of the schedule to succeed and
// the cluster's status to show it: failures back to zero, the next slot
// ahead.
func waitScheduledSuccess(ctx context.Context, t testing.TB, cl client.Client, ns string) string {
	t.Helper()
	var name string
	waitEvery(ctx, t, time.Second, 3*time.Minute, "a scheduled backup to succeed", func() (bool, string) {
		list := &v1alpha1.OpenBaoBackupList{}
		if err := cl.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelBackupTrigger: "schedule"}); err != nil {
			return false, err.Error()
		}
		for _, b := range list.Items {
			if b.Status.Phase == v1alpha1.BackupSucceeded {
				name = b.Name
			}
		}
		st := backupStatus(ctx, t, cl, ns)
		return name != "" && st.ConsecutiveFailures == 0 && st.LastBackupName == name, fmt.Sprintf("%d scheduled, status %+v", len(list.Items), st)
	})
	st := backupStatus(ctx, t, cl, ns)
	if st.NextScheduledBackup == nil || !st.NextScheduledBackup.After(time.Now().Add(-5*time.Second)) || st.LastBackupSize == 0 {
		t.Errorf("status after the scheduled backup: %+v", st)
	}
	return name
}

// checkStoredSnapshot downloads the object and checks it is what the
// backup says and a snapshot holding all its entries, which it returns.
func checkStoredSnapshot(t *testing.T, m *miniotest.Server, b *v1alpha1.OpenBaoBackup) map[string][]byte {
	t.Helper()
	data := downloadObject(t, m, b.Status.Key)
	sum := sha256.Sum256(data)
	if int64(len(data)) != b.Status.Size || hex.EncodeToString(sum[:]) != b.Status.SHA256 {
		t.Fatalf("object %s: %d bytes, sha256 %x; the backup says %d, %s", b.Status.Key, len(data), sum, b.Status.Size, b.Status.SHA256)
	}
	entries := snapshotEntries(t, data)
	if len(entries) != 4 {
		t.Errorf("snapshot entries %v", entries)
	}
	if !strings.HasPrefix(b.Status.Key, "e2e/"+b.Namespace+"/bao/") {
		t.Errorf("key %s is not under the cluster's prefix", b.Status.Key)
	}
	return entries
}

func downloadObject(t *testing.T, m *miniotest.Server, key string) []byte {
	t.Helper()
	obj, err := m.Client.GetObject(context.Background(), m.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// snapshotEntries lists a snapshot's entries with their content, which no
// log may hold.
func snapshotEntries(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name], _ = io.ReadAll(tr)
	}
}

// tokenBackupAndRetention switches the cluster to a token Secret (a token
// of the backup policy, made with the root token), takes one more backup
// and checks retention kept the two newest of the cluster's snapshots.
func tokenBackupAndRetention(ctx context.Context, t *testing.T, cl client.Client, ns string, m *miniotest.Server, bao *baoAPI) {
	t.Helper()
	token := bao.createBackupToken(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "backup-token", Namespace: ns}, StringData: map[string]string{"token": token}}
	if err := cl.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	c := &v1alpha1.OpenBaoCluster{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, c); err != nil {
		t.Fatal(err)
	}
	c.Spec.Backup.JWTAuthRole, c.Spec.Backup.TokenSecretRef, c.Spec.Backup.Schedule = "", &v1alpha1.SecretKeyRef{Name: "backup-token"}, ""
	if err := cl.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	b := waitBackup(ctx, t, cl, ns, takeBackup(ctx, t, cl, ns, "with-token"), v1alpha1.BackupSucceeded)
	prefix := backup.ObjectPrefix("e2e", ns, "bao")
	var keys []string
	for o := range m.Client.ListObjects(ctx, m.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		keys = append(keys, o.Key)
	}
	if len(keys) != 2 || keys[1] != b.Status.Key {
		t.Errorf("after retention (maxCount 2) the store holds %v, the newest should be %s", keys, b.Status.Key)
	}
}

// snapshotBeforeRollout turns on spec.upgrade.preUpgradeSnapshot and
// changes the config: the rollout must store a verified snapshot in MinIO
// before it replaces the server's pod, and then complete.
func snapshotBeforeRollout(ctx context.Context, t *testing.T, cl client.Client, ns string, m *miniotest.Server) {
	t.Helper()
	start := time.Now()
	old := serverPods(ctx, t, cl, ns, 1)[0]
	patchSpec(ctx, t, cl, ns, map[string]any{"upgrade": map[string]any{"preUpgradeSnapshot": true},
		"config": map[string]any{"default_lease_ttl": "768h"}})
	var snap *v1alpha1.OpenBaoBackup
	waitEvery(ctx, t, 250*time.Millisecond, 3*time.Minute, "the rollout after its pre-upgrade snapshot", func() (bool, string) {
		// The snapshot is read before the pod: a pod replaced while the
		// snapshot had not yet succeeded was rolled without it.
		snap = preUpgradeSnapshot(ctx, t, cl, ns)
		pod := &corev1.Pod{}
		err := cl.Get(ctx, client.ObjectKeyFromObject(&old), pod)
		replaced := err != nil || pod.UID != old.UID || pod.DeletionTimestamp != nil
		taken := snap != nil && snap.Status.Phase == v1alpha1.BackupSucceeded
		if replaced && !taken {
			if snap == nil {
				t.Fatalf("%s was replaced with no pre-upgrade snapshot requested", old.Name)
			}
			t.Fatalf("%s was replaced while the pre-upgrade snapshot %s was %s", old.Name, snap.Name, snap.Status.Phase)
		}
		st := clusterStatus(ctx, t, cl, ns, "bao")
		done := replaced && err == nil && podReady(pod) && st["upgrade"] == nil && hasConditionReason(st, "UpgradeComplete") && st["phase"] == "Running"
		return done, fmt.Sprintf("snapshot %v, pod replaced %v, phase %v, upgrade %v", snap != nil, replaced, st["phase"], st["upgrade"])
	})
	checkStoredSnapshot(t, m, snap)
	logf("pre-upgrade snapshot %s (%d bytes) stored before the rollout, which took %s", snap.Status.Key, snap.Status.Size,
		time.Since(start).Round(100*time.Millisecond))
}

// preUpgradeSnapshot is the cluster's one pre-upgrade OpenBaoBackup, or nil.
func preUpgradeSnapshot(ctx context.Context, t *testing.T, cl client.Client, ns string) *v1alpha1.OpenBaoBackup {
	t.Helper()
	list := &v1alpha1.OpenBaoBackupList{}
	if err := cl.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelBackupTrigger: v1alpha1.BackupTriggerPreUpgrade}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) > 1 {
		t.Fatalf("%d pre-upgrade snapshots for one rollout", len(list.Items))
	}
	if len(list.Items) == 0 {
		return nil
	}
	return &list.Items[0]
}

// checkBackupMetrics scrapes the manager's metrics from its pod, as a
// metrics reader.
func checkBackupMetrics(ctx context.Context, t *testing.T, cl client.Client, ns string) {
	t.Helper()
	code, body := scrapeManager(ctx, t, cl, scraperToken(ctx, t, cl, "prometheus", true))
	if code != http.StatusOK {
		t.Fatalf("scrape the manager as a metrics reader: %d", code)
	}
	labels := fmt.Sprintf(`{name="bao",namespace=%q}`, ns)
	for _, series := range []string{"openbao_backup_success_total", "openbao_backup_failure_total",
		"openbao_backup_last_success_timestamp", "openbao_backup_last_size_bytes", "openbao_backup_last_duration_seconds"} {
		value, ok := metricValue(body, series+labels)
		if !ok || value <= 0 {
			t.Errorf("%s%s = %v (found %v)", series, labels, value, ok)
		}
	}
}

func metricValue(exposition, series string) (float64, bool) {
	for _, line := range strings.Split(exposition, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			_, err := fmt.Sscan(rest, &v)
			return v, err == nil
		}
	}
	return 0, false
}

// assertNothingSecretInLogs runs the run-wide leak scan with what only a
// backup has besides the Secrets of the namespace (the store's keys, the
// backup token and the root token are among those): the content of a
// snapshot (the digests in its SHA256SUMS, its metadata). No log holds
// gzip data either, and retention's deletions are audit lines.
func assertNothingSecretInLogs(ctx context.Context, t *testing.T, cl client.Client, ns string, entries map[string][]byte) {
	t.Helper()
	assertNoLeaks(ctx, t, cl, ns, map[string]string{
		"the snapshot's metadata": strings.TrimSpace(string(entries["meta.json"])), "the snapshot's sums": firstLine(entries["SHA256SUMS"])})
	cs := clientset(t)
	operator := operatorLogs(ctx, t, cl)
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelComponent: v1alpha1.ComponentBackup}); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if strings.Contains(podLogs(ctx, t, cs, &pods.Items[i]), "\x1f\x8b") {
			t.Errorf("gzip data is in the log of %s", pods.Items[i].Name)
		}
	}
	if !strings.Contains(operator, `"audit":true`) || !strings.Contains(operator, `"event_type":"backup.retention.delete"`) {
		t.Error("the operator's log has no audit line for retention's deletions")
	}
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}

// baoAPI calls the cluster's active server from this host with the root
// token, as an administrator would.
type baoAPI struct {
	client      *http.Client
	addr, root  string
	backupToken string
}

func newBaoAPI(ctx context.Context, t testing.TB, cl client.Client, ns, root string) *baoAPI {
	t.Helper()
	pod := serverPods(ctx, t, cl, ns, 1)[0]
	caPEM := secretData(ctx, t, cl, ns, "bao-tls-ca", "ca.crt")
	return &baoAPI{client: tlsClient(caPEM, dnsName(pod, ns), nil), addr: "https://" + net.JoinHostPort(pod.Status.PodIP, "8200"), root: root}
}

func (b *baoAPI) call(t testing.TB, method, path string, body any) map[string]any {
	t.Helper()
	data, _ := json.Marshal(body)
	req, err := http.NewRequest(method, b.addr+"/v1/"+path, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Vault-Token", b.root)
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: HTTP %d %v", method, path, resp.StatusCode, out["errors"])
	}
	return out
}

// createBackupToken makes a token of the backup policy for tokenSecretRef.
func (b *baoAPI) createBackupToken(t testing.TB) string {
	t.Helper()
	b.call(t, http.MethodPut, "sys/policies/acl/openbao-operator-backup",
		map[string]any{"policy": `path "sys/storage/raft/snapshot" { capabilities = ["read"] }`})
	b.backupToken = b.createPolicyToken(t, "openbao-operator-backup")
	return b.backupToken
}

// createPolicyToken makes a token of one policy, valid for four hours.
func (b *baoAPI) createPolicyToken(t testing.TB, policy string) string {
	t.Helper()
	out := b.call(t, http.MethodPost, "auth/token/create", map[string]any{"policies": []string{policy}, "ttl": "4h"})
	auth, _ := out["auth"].(map[string]any)
	token, _ := auth["client_token"].(string)
	if token == "" {
		t.Fatal("no token created")
	}
	return token
}
