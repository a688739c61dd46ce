package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minio/minio-go/v7"
	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/test/miniotest"
)

// TestRestoreFromMinIOBringsBackTheSnapshotThroughEveryServer: a
// three-server cluster backs up to MinIO with the operator's JWT identity;
// more is written; an OpenBaoRestore of the latest snapshot (with its
// digest) runs as a Job, and every key written before the snapshot is
// back, and none written after, read through each server. The second
// restore is created by `kubectl openbao restore --backup`. A cluster
// formed from the backup and the drill copies leave bao's roles bound to
// bao's own ServiceAccounts.
func TestRestoreFromMinIOBringsBackTheSnapshotThroughEveryServer(t *testing.T) {
	installOperator(t)
	t.Parallel()
	cl := backupClient(t)
	ctx := context.Background()
	start := time.Now()
	m := startBridgeMinIO(t)
	plugin := buildPlugin(t) // now, so that it does not delay the restores below
	ns := createNamespace(ctx, t, cl, "e2e-restore")
	if err := cl.Create(ctx, clusterObject(t, ns, "bao", nil)); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, 5*time.Minute, fmt.Sprintf("phase Running with %d ready servers and the operator's identity", replicas), func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "bao")
		return st["phase"] == "Running" && fmt.Sprint(st["readyReplicas"]) == fmt.Sprint(replicas) && st["identityConfigured"] == true, fmt.Sprint(st)
	})
	root := string(secretData(ctx, t, cl, ns, "bao-root-token", "token"))
	active := activeBaoAPI(ctx, t, cl, ns, root)
	active.call(t, http.MethodPost, "sys/mounts/kv", map[string]any{"type": "kv"})
	active.call(t, http.MethodPost, "kv/before", map[string]any{"value": "one"})
	enableOnDemandBackups(ctx, t, cl, ns, m)
	b := waitBackup(ctx, t, cl, ns, takeBackup(ctx, t, cl, ns, "before-restore"), v1alpha1.BackupSucceeded)
	logf("backup %s (%d bytes) %s after the test started", b.Status.Key, b.Status.Size, time.Since(start).Round(100*time.Millisecond))
	// A second cluster forms from this backup while the restores below
	// run. A restore drill verifies the backup first: a drill checks the
	// newest backup, and each restore below takes a pre-restore snapshot
	// (the default), which would be newer.
	moved := createMovedCluster(ctx, t, cl, ns, b)
	// A drill whose outcome a test checks runs with a parallel test's
	// kills held off: an operator killed after the drill recorded its
	// restore Job and before it created it ends the drill OutcomeUnknown,
	// as the at-most-once rule wants (seen in a CI run).
	resumeKills := holdOperatorKills(t)
	setVerify(ctx, t, cl, ns, true)
	active.call(t, http.MethodPost, "kv/after", map[string]any{"value": "two"})
	active.call(t, http.MethodPost, "kv/before", map[string]any{"value": "changed"})
	checkDrillPassed(ctx, t, cl, ns, b)
	resumeKills()

	restoreStart := time.Now()
	rs := &v1alpha1.OpenBaoRestore{ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: ns}, Spec: v1alpha1.OpenBaoRestoreSpec{
		ClusterName: "bao", Source: v1alpha1.RestoreSource{Latest: true}, ExpectedSHA256: b.Status.SHA256}}
	if err := cl.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	waitEvery(ctx, t, time.Second, 10*time.Minute, "restore r1 finished", func() (bool, string) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
			return false, err.Error()
		}
		return rs.Status.Phase.Done(), fmt.Sprintf("%s/%s %s: %s", rs.Status.Phase, rs.Status.Step, rs.Status.Reason, rs.Status.Message)
	})
	if rs.Status.Phase != v1alpha1.RestoreSucceeded || rs.Status.Key != b.Status.Key || rs.Status.SHA256 != b.Status.SHA256 ||
		rs.Status.PreRestoreKey == "" || rs.Status.PreRestoreKey == b.Status.Key {
		t.Fatalf("restore (latest before its own pre-restore snapshot): %+v", rs.Status)
	}
	logf("restore of %s succeeded in %s (restarted: %v): %s", rs.Status.Key, time.Since(restoreStart).Round(100*time.Millisecond),
		rs.Status.RestartedPods, rs.Status.Message)
	checkEveryServerServesTheSnapshot(ctx, t, cl, ns, root)

	// The same restore again, with the operator killed while the Job
	// streams the snapshot: the next operator must finish it.
	activeBaoAPI(ctx, t, cl, ns, root).call(t, http.MethodPost, "kv/after", map[string]any{"value": "three"})
	endKills := reserveKills(t) // before the restore, so that the kill lands while it streams
	restoreStart = time.Now()
	rs2 := pluginRestoreBackup(ctx, t, cl, plugin, ns, b, "r2")
	waitEvery(ctx, t, 100*time.Millisecond, 5*time.Minute, "restore r2 streaming", func() (bool, string) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(rs2), rs2); err != nil {
			return false, err.Error()
		}
		return rs2.Status.Step == v1alpha1.RestoreStepRestoring || rs2.Status.Phase.Done(), fmt.Sprintf("%s/%s", rs2.Status.Phase, rs2.Status.Step)
	})
	killedAt := fmt.Sprintf("%s/%s", rs2.Status.Phase, rs2.Status.Step)
	killReserved(ctx, t, cl)
	endKills()
	waitEvery(ctx, t, time.Second, 10*time.Minute, "restore r2 finished", func() (bool, string) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(rs2), rs2); err != nil {
			return false, err.Error()
		}
		return rs2.Status.Phase.Done(), fmt.Sprintf("%s/%s %s: %s", rs2.Status.Phase, rs2.Status.Step, rs2.Status.Reason, rs2.Status.Message)
	})
	if rs2.Status.Phase != v1alpha1.RestoreSucceeded {
		t.Fatalf("restore r2 with the operator killed at %s: %+v", killedAt, rs2.Status)
	}
	logf("restore r2 with the operator killed at %s succeeded in %s", killedAt, time.Since(restoreStart).Round(100*time.Millisecond))
	checkEveryServerServesTheSnapshot(ctx, t, cl, ns, root)
	checkMovedCluster(ctx, t, cl, ns, moved, b, root)
	checkDrills(ctx, t, cl, ns, m, b)
	checkRolesBindOwnAccounts(ctx, t, cl, ns, root)
	assertNoLeaks(ctx, t, cl, ns, nil)
}

// checkDrillPassed: the drill of b passed by reading its canary back from
// the copy, and left no copy.
func checkDrillPassed(ctx context.Context, t *testing.T, cl client.Client, ns string, b *v1alpha1.OpenBaoBackup) {
	t.Helper()
	good := waitDrill(ctx, t, cl, ns, b.Name)
	if good.Result != v1alpha1.DrillPassed || good.Reason != backup.ReasonDrillCanaryMatched || !strings.Contains(good.Message, b.Status.Canary) || b.Status.Canary == "" {
		t.Fatalf("the drill of %s (canary %q): %+v", b.Name, b.Status.Canary, good)
	}
	logf("drill of %s passed in %s: %s", b.Name, good.CompletionTime.Sub(good.StartTime.Time), good.Message)
}

// checkDrills: a backup whose object is corrupted in the store fails its
// drill with a status that says so, and leaves no copy.
func checkDrills(ctx context.Context, t *testing.T, cl client.Client, ns string, m *miniotest.Server, b *v1alpha1.OpenBaoBackup) {
	t.Helper()
	setVerify(ctx, t, cl, ns, false)
	bad := waitBackup(ctx, t, cl, ns, takeBackup(ctx, t, cl, ns, "to-corrupt"), v1alpha1.BackupSucceeded)
	data := downloadObject(t, m, bad.Status.Key)
	data[len(data)/2] ^= 0xff
	if _, err := m.Client.PutObject(ctx, m.Bucket, bad.Status.Key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	resumeKills := holdOperatorKills(t) // as for the drill above
	setVerify(ctx, t, cl, ns, true)
	failed := waitDrill(ctx, t, cl, ns, bad.Name)
	resumeKills()
	if failed.Result != v1alpha1.DrillFailed || failed.Reason != backup.ReasonDrillRestoreFailed || !strings.Contains(failed.Message, bad.Name) || !strings.Contains(failed.Message, "CorruptSnapshot") {
		t.Fatalf("the drill of the corrupted %s: %+v", bad.Name, failed)
	}
	st := clusterStatus(ctx, t, cl, ns, "bao")
	if !hasConditionReason(st, backup.ReasonDrillRestoreFailed) {
		t.Fatalf("condition BackupVerified does not tell the failure: %v", st["conditions"])
	}
	logf("drill of the corrupted %s failed as it must: %s", bad.Name, failed.Message)
}

// waitDrill waits for the drill of backup name to end and its copy to go.
func waitDrill(ctx context.Context, t *testing.T, cl client.Client, ns, name string) *v1alpha1.BackupVerification {
	t.Helper()
	return waitDrillOf(ctx, t, cl, ns, "bao", name)
}

// waitDrillOf is waitDrill for the drills of cluster.
func waitDrillOf(ctx context.Context, t *testing.T, cl client.Client, ns, cluster, name string) *v1alpha1.BackupVerification {
	t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	waitEvery(ctx, t, time.Second, 10*time.Minute, "the drill of "+name+" ended and its copy is gone", func() (bool, string) {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, c); err != nil {
			return false, err.Error()
		}
		b := c.Status.Backup
		if b == nil || b.LastVerified == nil || b.LastVerified.Backup != name {
			return false, fmt.Sprintf("%+v", b)
		}
		err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.DrillCopyName()}, &v1alpha1.OpenBaoCluster{})
		return apierrors.IsNotFound(err), fmt.Sprintf("copy: %v", err)
	})
	return c.Status.Backup.LastVerified
}

// setVerify turns spec.backup.verify on or off.
func setVerify(ctx context.Context, t *testing.T, cl client.Client, ns string, on bool) {
	t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Backup.Verify = &v1alpha1.BackupVerify{Enabled: on, Timeout: &metav1.Duration{Duration: 5 * time.Minute}}
	if err := cl.Patch(ctx, c, patch); err != nil {
		t.Fatal(err)
	}
}

// createMovedCluster creates cluster "moved" from backup b of "bao": the
// same store, bao's seal key, and bao's root token to bind the operator's
// identity in the restored data to "moved". The key and the token are
// copied into Secrets of the user's own first, as a user who may read them
// does: a spec may not name the operator's Secrets (admission's rule
// "operator-managed Secrets are never credentials").
func createMovedCluster(ctx context.Context, t *testing.T, cl client.Client, ns string, b *v1alpha1.OpenBaoBackup) time.Time {
	t.Helper()
	source := &v1alpha1.OpenBaoCluster{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, source); err != nil {
		t.Fatal(err)
	}
	target, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&source.Spec.Backup.Target)
	if err != nil {
		t.Fatal(err)
	}
	u := clusterObject(t, ns, "moved", nil)
	u.Object["spec"].(map[string]any)["bootstrap"] = map[string]any{"fromBackup": map[string]any{
		"target": target, "sourceCluster": "bao", "key": b.Status.Key, "expectedSHA256": b.Status.SHA256,
		"unsealKeySecretRef": map[string]any{"name": copySecret(ctx, t, cl, ns, "bao-unseal-key", "bao-seal-key-copy")},
		"tokenSecretRef":     map[string]any{"name": copySecret(ctx, t, cl, ns, "bao-root-token", "bao-token-copy")},
	}}
	if err := cl.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// copySecret copies Secret from into a new Secret to, and returns its name.
func copySecret(ctx context.Context, t *testing.T, cl client.Client, ns, from, to string) string {
	t.Helper()
	src := &corev1.Secret{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: from}, src); err != nil {
		t.Fatal(err)
	}
	dst := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: to}, Data: src.Data}
	if err := cl.Create(ctx, dst); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return to
}

// checkMovedCluster waits for "moved" to hold bao's snapshot: every server
// serves what was written before the snapshot (read with bao's root
// token, the restored data's), the operator logs in to it with its own
// identity bound to "moved", and the void root token of its own empty
// initialization is gone.
func checkMovedCluster(ctx context.Context, t *testing.T, cl client.Client, ns string, created time.Time, b *v1alpha1.OpenBaoBackup, root string) {
	t.Helper()
	waitEvery(ctx, t, time.Second, 10*time.Minute, "moved formed from the backup", func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "moved")
		fb, _ := st["fromBackup"].(map[string]any)
		if fb["failed"] != nil {
			t.Fatalf("moved's restore failed: %v %v", fb, st["conditions"])
		}
		return fb["completedAt"] != nil && fb["identityBound"] == true && st["phase"] == "Running", fmt.Sprintf("%v %v", fb, st["conditions"])
	})
	st := clusterStatus(ctx, t, cl, ns, "moved")
	fb := st["fromBackup"].(map[string]any)
	if fb["key"] != b.Status.Key || fb["sha256"] != b.Status.SHA256 || !hasConditionReason(st, "RestoredFromBackup") {
		t.Fatalf("moved: %v", st)
	}
	logf("moved formed from %s %s after it was created", b.Status.Key, time.Since(created).Round(100*time.Millisecond))
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "moved-root-token"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the root token of moved's empty initialization is still stored (%v)", err)
	}
	checkServersServeTheSnapshot(ctx, t, cl, ns, "moved", root)
	// The operator's own identity works in the restored data: a step-down
	// request is carried out with it.
	requestStepDown(ctx, t, cl, ns, "moved")
}

// checkRolesBindOwnAccounts: the roles of bao's identity still bind bao's
// own ServiceAccounts after moved and the drill copies formed from its
// snapshots. Their servers share bao's keyring, and for seconds after a
// restore their standbys name bao's active server as theirs (seen on the
// node): a write of their own identity that reached such a standby would
// be forwarded into bao and bind bao's roles to their accounts.
func checkRolesBindOwnAccounts(ctx context.Context, t *testing.T, cl client.Client, ns, root string) {
	t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, c); err != nil {
		t.Fatal(err)
	}
	bao := activeBaoAPI(ctx, t, cl, ns, root)
	for role, account := range map[string]string{
		identity.UpgradeRole: c.UpgradeServiceAccountName(), identity.BackupRole: c.BackupServiceAccountName(),
		identity.RestoreRole: c.RestoreServiceAccountName(), identity.DrillRole: c.DrillServiceAccountName(),
	} {
		data, _ := bao.call(t, http.MethodGet, "auth/"+identity.Mount+"/role/"+role, nil)["data"].(map[string]any)
		if got, want := fmt.Sprint(data["bound_subject"]), identity.Subject(ns, account); got != want {
			t.Errorf("bao's %s role binds %s, want its own %s: another cluster's identity was written into bao", role, got, want)
		}
	}
}

// checkEveryServerServesTheSnapshot reads through each server: kv/before
// is the snapshot's value and kv/after does not exist.
func checkEveryServerServesTheSnapshot(ctx context.Context, t *testing.T, cl client.Client, ns, root string) {
	t.Helper()
	checkServersServeTheSnapshot(ctx, t, cl, ns, "bao", root)
}

func checkServersServeTheSnapshot(ctx context.Context, t *testing.T, cl client.Client, ns, cluster, root string) {
	t.Helper()
	caPEM := secretData(ctx, t, cl, ns, cluster+"-tls-ca", "ca.crt")
	for _, pod := range clusterServerPods(ctx, t, cl, ns, cluster, replicas) {
		bao := &baoAPI{client: tlsClient(caPEM, dnsName(pod, ns), nil), addr: "https://" + net.JoinHostPort(pod.Status.PodIP, "8200"), root: root}
		waitFor(ctx, t, time.Minute, pod.Name+" serves the snapshot's data", func() (bool, string) {
			before, beforeCode := bao.read(t, "kv/before")
			_, afterCode := bao.read(t, "kv/after")
			return beforeCode == http.StatusOK && strings.Contains(before, `"one"`) && afterCode == http.StatusNotFound,
				fmt.Sprintf("kv/before %d %s, kv/after %d", beforeCode, before, afterCode)
		})
	}
}

// read returns the answer's body and status code.
func (b *baoAPI) read(t testing.TB, path string) (string, int) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.addr+"/v1/"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Vault-Token", b.root)
	resp, err := b.client.Do(req)
	if err != nil {
		return err.Error(), 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return string(body), resp.StatusCode
}

// activeBaoAPI reaches the server whose pod OpenBao labeled active.
func activeBaoAPI(ctx context.Context, t testing.TB, cl client.Client, ns, root string) *baoAPI {
	t.Helper()
	caPEM := secretData(ctx, t, cl, ns, "bao-tls-ca", "ca.crt")
	for _, pod := range serverPods(ctx, t, cl, ns, replicas) {
		if pod.Labels[podstate.LabelActive] == "true" {
			return &baoAPI{client: tlsClient(caPEM, dnsName(pod, ns), nil), addr: "https://" + net.JoinHostPort(pod.Status.PodIP, "8200"), root: root}
		}
	}
	t.Fatal("no pod is labeled active")
	return nil
}

// enableOnDemandBackups sets spec.backup without a schedule, so that no
// scheduled backup waits beside the restore.
func enableOnDemandBackups(ctx context.Context, t *testing.T, cl client.Client, ns string, m *miniotest.Server) {
	t.Helper()
	setBackupToMinIO(ctx, t, cl, ns, m, "e2e-restore", func(b *v1alpha1.BackupSpec) { b.JWTAuthRole = "backup" })
}

// requestStepDown sets spec.stepDownRequest and waits until the operator
// carried it out, which it does with its own OpenBao identity.
func requestStepDown(ctx context.Context, t *testing.T, cl client.Client, ns, cluster string) {
	t.Helper()
	value := time.Now().UTC().Format(time.RFC3339Nano)
	c := &v1alpha1.OpenBaoCluster{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.StepDownRequest = value
	if err := cl.Patch(ctx, c, patch); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, 2*time.Minute, cluster+" stepped down with the operator's identity", func() (bool, string) {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, c); err != nil {
			return false, err.Error()
		}
		sd := c.Status.StepDown
		return sd != nil && sd.Request == value && sd.Result == v1alpha1.StepDownRequested, fmt.Sprintf("%+v", sd)
	})
}
