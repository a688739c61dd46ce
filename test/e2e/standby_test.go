package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/standby"
	"github.com/openbao/operator/test/miniotest"
)

// standbyPoll is the standby's pollInterval: the minimum, so that the test
// waits as little as the feature allows.
const standbyPoll = 30 * time.Second

// TestAStandbyInAnotherNamespaceFollowsItsSourceAndIsPromotedWhenTheSourceIsLost:
// two namespaces stand in for two Kubernetes clusters sharing one MinIO
// bucket. The primary "bao" backs up every minute under site-a; the
// standby "dr", in the other namespace, forms from its newest snapshot
// with the copies of its Secrets a user carries across, and follows each
// newer one; its client Service has no endpoint while it stands by. The
// operator is killed while a restore of the standby runs: the restore
// ends and the standby follows on. The primary is deleted with DeleteAll;
// `kubectl openbao promote --yes`, the operator killed at once, then
// `kubectl openbao promote --yes --wait`; the promoted standby serves
// every key written before the primary's last snapshot, takes a write
// through its client Service, and backs up under its own prefix, site-b,
// never site-a. A watch of site-b counts what posts snapshots (each
// restore Job and its pod): no snapshot was posted twice, none after the
// promotion, and the promotion was announced at most once. It logs RTO
// (the promote call to the first acknowledged write, here with a kill in
// it; make bench-dr measures it without) and RPO (the age of the newest
// data served when the primary was lost).
//
// Both clusters have one server: what a standby follows is the snapshot
// path (a backup Job, the store, a restore Job), which is the same for one
// server as for three; Raft replication inside a cluster is another
// test's, and one server each halves the wall time and the node's load.
func TestAStandbyInAnotherNamespaceFollowsItsSourceAndIsPromotedWhenTheSourceIsLost(t *testing.T) {
	installOperator(t)
	t.Parallel()
	cl := backupClient(t)
	ctx := context.Background()
	start := time.Now()
	d := startDRDrill(ctx, t, cl, startBridgeMinIO(t), buildPlugin(t), "e2e-site", func(siteB string) *postLog { return watchPosts(ctx, t, siteB) })
	d.follow(ctx, t, func() { d.killDuringStandbyRestore(ctx, t) })
	loss := d.lose(ctx, t)
	rto := d.promote(ctx, t, func() {
		at := promotionState(ctx, t, cl, d.siteB)
		killReserved(ctx, t, cl)
		logf("the operator killed right after `kubectl openbao promote dr --yes` returned: %s", at)
	})
	logf("RTO %s with the operator killed in it: `kubectl openbao promote dr --yes` to the first acknowledged write through the client Service",
		rto.Round(100*time.Millisecond))
	logf("RPO %s: %s", loss.rpo().Round(time.Second), loss)
	d.checkPromoted(ctx, t, loss.served)
	checkOwnFirstBackup(ctx, t, cl, d.m, d.siteA, d.siteB)
	if n := eventCount(ctx, t, cl, d.siteB, standby.ReasonPromoted); n > 1 {
		t.Errorf("%d Promoted events: the promotion was announced more than once", n)
	}
	logf("the standby test took %s", time.Since(start).Round(time.Second))
	assertNoLeaks(ctx, t, cl, d.siteA, map[string]string{"the primary's root token": d.root})
	assertNoLeaks(ctx, t, cl, d.siteB, nil)
}

// drDrill is a disaster-recovery drill: a primary "bao" in siteA backing
// up every minute under site-a of the MinIO bucket, and a standby "dr" in
// siteB following it; the test and BenchmarkDR take its steps in turn.
type drDrill struct {
	cl           client.Client
	m            *miniotest.Server
	plugin       string
	siteA, siteB string
	root         string
	primary      *baoAPI
	drService    *baoAPI
	keys         *writtenKeys
	posts        *postLog
	// promotedAt is status.standby.promotedAt once promoted.
	promotedAt time.Time
}

// startDRDrill forms the primary, writes k0, backs it up every minute,
// and forms the standby from its first scheduled backup; watch, when not
// nil, starts watching siteB before anything is created there.
func startDRDrill(ctx context.Context, t testing.TB, cl client.Client, m *miniotest.Server, plugin, prefix string,
	watch func(siteB string) *postLog) *drDrill {
	t.Helper()
	start := time.Now()
	d := &drDrill{cl: cl, m: m, plugin: plugin, keys: &writtenKeys{}}
	d.siteA, d.siteB = createNamespace(ctx, t, cl, prefix+"-a"), createNamespace(ctx, t, cl, prefix+"-b")
	if watch != nil {
		d.posts = watch(d.siteB)
		// Also when a wait fails: a snapshot posted twice may be why.
		t.Cleanup(func() { d.posts.check(t, d.promotedAt) })
	}
	createOneServerCluster(ctx, t, cl, d.siteA)
	waitFor(ctx, t, 5*time.Minute, "the primary Running with the operator's identity", func() (bool, string) {
		st := clusterStatus(ctx, t, cl, d.siteA, "bao")
		return st["phase"] == "Running" && st["identityConfigured"] == true, fmt.Sprint(st["phase"], st["conditions"])
	})
	d.root = string(secretData(ctx, t, cl, d.siteA, "bao-root-token", "token"))
	d.primary = activeOneServer(ctx, t, cl, d.siteA, "bao", d.root)
	d.primary.call(t, http.MethodPost, "sys/mounts/kv", map[string]any{"type": "kv"})
	d.keys.write(t, d.primary, "k0")
	setBackupToMinIO(ctx, t, cl, d.siteA, m, "site-a", func(b *v1alpha1.BackupSpec) { b.Schedule, b.JWTAuthRole = "* * * * *", "backup" })
	first := waitScheduledSuccess(ctx, t, cl, d.siteA)
	logf("the primary's first scheduled backup %s %s after the drill started", first, time.Since(start).Round(time.Second))

	standbyCreated := createStandby(ctx, t, cl, m, d.siteA, d.siteB)
	waitFor(ctx, t, 8*time.Minute, "the standby formed from the primary's snapshot", func() (bool, string) {
		st := standbyStatus(ctx, t, cl, d.siteB)
		c := clusterTyped(ctx, t, cl, d.siteB, "dr")
		fb := c.Status.FromBackup
		if fb != nil && fb.Failed != "" {
			t.Fatalf("the standby's forming restore failed: %s: %s", fb.Failed, fb.FailedMessage)
		}
		return c.Status.Phase == "Running" && fb != nil && fb.CompletedAt != nil && st.ServedKey != "",
			fmt.Sprintf("%s %+v %+v %v", c.Status.Phase, fb, st, c.Status.Conditions)
	})
	logf("the standby formed from %s %s after it was created", standbyStatus(ctx, t, cl, d.siteB).ServedKey, time.Since(standbyCreated).Round(time.Second))
	d.drService = clientServiceAPI(ctx, t, cl, d.siteB, "dr", d.root, secretData(ctx, t, cl, d.siteB, "dr-tls-ca", "ca.crt"))
	checkClosedWhileStandingBy(ctx, t, cl, d.siteB, d.drService)
	return d
}

// follow writes k1 and waits until the standby serves a snapshot taken
// after it: within one schedule interval plus its poll (and the restore's
// own time); the wait is generous, the figure is logged. during, when not
// nil, runs after the write.
func (d *drDrill) follow(ctx context.Context, t testing.TB, during func()) time.Duration {
	t.Helper()
	k1 := d.keys.write(t, d.primary, "k1")
	if during != nil {
		during()
	}
	// Served: the last snapshot it posted, taken after k1. A kill that
	// lands between the restore recording its Job and creating it ends that
	// restore OutcomeUnknown; the standby posts that snapshot again 30 s
	// later, under a new name, or the next one if the source took it
	// meanwhile: served is what it posted last.
	waitEvery(ctx, t, time.Second, 6*time.Minute, "the standby serves the last snapshot it posted, taken after k1", func() (bool, string) {
		st := standbyStatus(ctx, t, d.cl, d.siteB)
		return st.ServedTakenAt != nil && st.ServedTakenAt.After(k1) && st.ServedKey == st.RestoreKey, fmt.Sprintf("%+v", st)
	})
	took := time.Since(k1)
	logf("the standby served a snapshot taken after k1 %s after k1 was written (schedule 1m + poll %s)", took.Round(time.Second), standbyPoll)
	checkClosedWhileStandingBy(ctx, t, d.cl, d.siteB, d.drService)
	return took
}

// drLoss is what the standby served when its primary was lost, and what
// it serves once it took the primary's last snapshot.
type drLoss struct {
	lost                 time.Time
	servedAtLoss, served v1alpha1.StandbyStatus
	last                 string
	caughtUp             time.Duration
}

// rpo is the age, at the loss, of the newest data the standby serves
// once it took the primary's last snapshot: what a promotion then keeps.
func (l drLoss) rpo() time.Duration { return l.lost.Sub(l.served.ServedTakenAt.Time) }

// rpoAtLoss is the age, at the loss, of the data the standby served at
// that moment: what a promotion at once would have kept.
func (l drLoss) rpoAtLoss() time.Duration { return l.lost.Sub(l.servedAtLoss.ServedTakenAt.Time) }

func (l drLoss) String() string {
	return fmt.Sprintf("the primary was lost at %s; the standby serves %s, taken %s (schedule 1m, poll %s), %s after the loss; "+
		"at the loss it served data taken %s (%s old)", l.lost.UTC().Format(time.RFC3339), l.served.ServedKey,
		l.served.ServedTakenAt.UTC().Format(time.RFC3339), standbyPoll, l.caughtUp.Round(time.Second),
		l.servedAtLoss.ServedTakenAt.UTC().Format(time.RFC3339), l.rpoAtLoss().Round(time.Second))
}

// lose writes k2, deletes the primary with DeleteAll and waits until the
// standby serves the primary's last snapshot.
func (d *drDrill) lose(ctx context.Context, t testing.TB) drLoss {
	t.Helper()
	d.keys.write(t, d.primary, "k2")
	var l drLoss
	l.servedAtLoss = standbyStatus(ctx, t, d.cl, d.siteB)
	l.lost = losePrimary(ctx, t, d.cl, d.siteA)
	l.last = newestObject(ctx, t, d.m, backup.ObjectPrefix("site-a", d.siteA, "bao"))
	// Served and proven: the canary read from the standby's data after
	// the restore names that snapshot.
	waitEvery(ctx, t, time.Second, 5*time.Minute, "the standby serves the primary's last snapshot "+l.last+", its canary read", func() (bool, string) {
		st := standbyStatus(ctx, t, d.cl, d.siteB)
		return st.ServedKey == l.last && st.Proven(), fmt.Sprintf("%+v canary %+v", st, st.Canary)
	})
	l.caughtUp = time.Since(l.lost)
	if n := countBackups(ctx, t, d.cl, d.siteB); n != 0 {
		t.Errorf("the standby took %d backups of its own while standing by", n)
	}
	l.served = standbyStatus(ctx, t, d.cl, d.siteB)
	return l
}

// promote runs `kubectl openbao promote dr --yes --wait` and writes
// through the client Service until a write is acknowledged; it returns
// the time from the promote call to that acknowledgement (the RTO).
// between, when not nil, runs between a first `promote --yes` without
// --wait and the one that waits.
func (d *drDrill) promote(ctx context.Context, t testing.TB, between func()) time.Duration {
	t.Helper()
	promoted := time.Now()
	if between != nil {
		end := reserveKills(t)
		runPlugin(t, d.plugin, "promote", "dr", "-n", d.siteB, "--yes")
		between()
		end()
	}
	out := runPlugin(t, d.plugin, "promote", "dr", "-n", d.siteB, "--yes", "--wait")
	if !strings.Contains(out, "promoted: it takes writes") && (between == nil || !strings.Contains(out, "is already promoted")) {
		t.Fatalf("kubectl openbao promote --yes --wait:\n%s", out)
	}
	if at := standbyStatus(ctx, t, d.cl, d.siteB).PromotedAt; at != nil {
		d.promotedAt = at.Time
	}
	return writeUntilAcknowledged(ctx, t, d.drService, "kv/after-promotion").Sub(promoted)
}

// checkPromoted: the promoted standby serves every key written before
// its snapshot was taken, and the write taken after the promotion.
func (d *drDrill) checkPromoted(_ context.Context, t testing.TB, served v1alpha1.StandbyStatus) {
	t.Helper()
	d.keys.checkServed(t, d.drService, served.ServedTakenAt.Time)
	if body, code := d.drService.read(t, "kv/after-promotion"); code != http.StatusOK || !strings.Contains(body, `"promoted"`) {
		t.Errorf("kv/after-promotion read back through the client Service: HTTP %d %s", code, body)
	}
}

// createStandby makes, in siteB, what a user carries across from the
// primary's Kubernetes cluster (copies of its seal key, its root token and
// its provenance key with its labels, and the store's credentials), then
// the standby "dr" following the primary's snapshots under site-a, with
// its own backups under site-b.
func createStandby(ctx context.Context, t testing.TB, cl client.Client, m *miniotest.Server, siteA, siteB string) time.Time {
	t.Helper()
	copyAcross(ctx, t, cl, siteA, "bao-unseal-key", siteB, "bao-seal-key-copy", false)
	copyAcross(ctx, t, cl, siteA, "bao-root-token", siteB, "bao-token-copy", false)
	copyAcross(ctx, t, cl, siteA, "bao-backup-provenance", siteB, "bao-backup-provenance", true)
	copyAcross(ctx, t, cl, siteA, "store-credentials", siteB, "store-credentials", false)
	target := func(prefix string) map[string]any {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.BackupTarget{Endpoint: m.Endpoint, Bucket: m.Bucket,
			PathPrefix: prefix, UsePathStyle: true, CredentialsSecretRef: &corev1.LocalObjectReference{Name: "store-credentials"}})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	u := clusterObject(t, siteB, "dr", nil)
	spec := u.Object["spec"].(map[string]any)
	spec["replicas"] = int64(1)
	spec["bootstrap"] = map[string]any{"fromBackup": map[string]any{
		"target": target("site-a"), "sourceCluster": "bao", "sourceNamespace": siteA, "latest": true,
		"unsealKeySecretRef": map[string]any{"name": "bao-seal-key-copy"},
		"tokenSecretRef":     map[string]any{"name": "bao-token-copy"},
	}}
	spec["standby"] = map[string]any{"pollInterval": standbyPoll.String()}
	spec["backup"] = map[string]any{"target": target("site-b"), "schedule": "* * * * *", "jwtAuthRole": "backup"}
	if err := cl.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// copyAcross copies a Secret from one namespace to another as a user who
// may read it does; withLabels keeps its labels (the provenance key's
// prove that the operator wrote it) and creates it as break-glass.
func copyAcross(ctx context.Context, t testing.TB, cl client.Client, fromNS, from, toNS, to string, withLabels bool) {
	t.Helper()
	src := &corev1.Secret{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: fromNS, Name: from}, src); err != nil {
		t.Fatal(err)
	}
	dst := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: toNS, Name: to}, Data: src.Data}
	creator := cl
	if withLabels {
		// What carries the operator's labels is locked to it: a user
		// creates the copy as a member of the break-glass group.
		dst.Labels, creator = src.Labels, breakGlassClient(t)
	}
	if err := creator.Create(ctx, dst); err != nil {
		t.Fatal(err)
	}
}

// checkClosedWhileStandingBy: the standby's client Service has no ready
// endpoint, and a read through it gets no answer.
func checkClosedWhileStandingBy(ctx context.Context, t testing.TB, cl client.Client, ns string, svc *baoAPI) {
	t.Helper()
	epSlices := &discoveryv1.EndpointSliceList{}
	if err := cl.List(ctx, epSlices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: "dr"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range epSlices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				t.Errorf("the standby's client Service has endpoint %v (slice %s) while it stands by", e.Addresses, s.Name)
			}
		}
	}
	eps := &corev1.Endpoints{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dr"}, eps); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	for _, s := range eps.Subsets {
		if len(s.Addresses) > 0 {
			t.Errorf("the standby's Endpoints list %v while it stands by", s.Addresses)
		}
	}
	if body, code := svc.read(t, "sys/health"); code != 0 {
		t.Errorf("the standby's client Service answered while it stands by: HTTP %d %s", code, body)
	}
	if !t.Failed() {
		logf("the standby's client Service: %d EndpointSlices, no ready endpoint; no answer through it", len(epSlices.Items))
	}
}

// losePrimary deletes the primary with DeleteAll and waits until it and
// every pod of its namespace (its servers, its backup Jobs) has ended, so
// that its last snapshot is in the store; it returns when it was lost.
func losePrimary(ctx context.Context, t testing.TB, cl client.Client, ns string) time.Time {
	t.Helper()
	patchDeletionPolicy(ctx, t, cl, ns, string(v1alpha1.DeletionPolicyDeleteAll))
	kept := keepLogsOf(ctx, t, &serverPods(ctx, t, cl, ns, 1)[0])
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bao"}}
	if err := cl.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	waitFor(ctx, t, 3*time.Minute, "the primary gone and its pods ended", func() (bool, string) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(c), c)
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				running++
			}
		}
		return apierrors.IsNotFound(err) && running == 0, fmt.Sprintf("%v, %d pods not ended", err, running)
	})
	kept()
	logf("the primary deleted with DeleteAll, gone %s later", time.Since(lost).Round(time.Second))
	return lost
}

// newestObject is the newest snapshot's key under prefix (names sort by
// the time in them).
func newestObject(ctx context.Context, t testing.TB, m *miniotest.Server, prefix string) string {
	t.Helper()
	keys := objectKeys(ctx, t, m, prefix)
	if len(keys) == 0 {
		t.Fatalf("no snapshot under %s", prefix)
	}
	return slices.Max(keys)
}

func objectKeys(ctx context.Context, t testing.TB, m *miniotest.Server, prefix string) []string {
	t.Helper()
	var keys []string
	for o := range m.Client.ListObjects(ctx, m.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// checkOwnFirstBackup: the promoted standby's first backup lands under
// site-b, and nothing under site-a is but the primary's.
func checkOwnFirstBackup(ctx context.Context, t *testing.T, cl client.Client, m *miniotest.Server, siteA, siteB string) {
	t.Helper()
	var b v1alpha1.OpenBaoBackup
	waitEvery(ctx, t, time.Second, 4*time.Minute, "the promoted standby's first backup", func() (bool, string) {
		list := &v1alpha1.OpenBaoBackupList{}
		if err := cl.List(ctx, list, client.InNamespace(siteB)); err != nil {
			return false, err.Error()
		}
		for _, item := range list.Items {
			if item.Status.Phase == v1alpha1.BackupFailed {
				t.Fatalf("the promoted standby's backup %s failed: %s: %s", item.Name, item.Status.Reason, item.Status.Message)
			}
			if item.Status.Phase == v1alpha1.BackupSucceeded {
				b = item
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d backups", len(list.Items))
	})
	own := backup.ObjectPrefix("site-b", siteB, "dr")
	if !strings.HasPrefix(b.Status.Key, own) || !slices.Contains(objectKeys(ctx, t, m, own), b.Status.Key) {
		t.Errorf("the promoted standby's first backup %s is %q, not in the store under %s", b.Name, b.Status.Key, own)
	}
	for _, key := range objectKeys(ctx, t, m, "site-a/") {
		if !strings.HasPrefix(key, backup.ObjectPrefix("site-a", siteA, "bao")) {
			t.Errorf("%s is under site-a, and not the primary's", key)
		}
	}
	logf("the promoted standby's first backup: %s", b.Status.Key)
}

func countBackups(ctx context.Context, t testing.TB, cl client.Client, ns string) int {
	t.Helper()
	list := &v1alpha1.OpenBaoBackupList{}
	if err := cl.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func clusterTyped(ctx context.Context, t testing.TB, cl client.Client, ns, name string) *v1alpha1.OpenBaoCluster {
	t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
		t.Fatal(err)
	}
	return c
}

func standbyStatus(ctx context.Context, t testing.TB, cl client.Client, ns string) v1alpha1.StandbyStatus {
	t.Helper()
	if st := clusterTyped(ctx, t, cl, ns, "dr").Status.Standby; st != nil {
		return *st
	}
	return v1alpha1.StandbyStatus{}
}

// standbyConditions tells the standby's Standby, Degraded and Ready
// conditions and when status was observed, for a wait's last word.
func standbyConditions(ctx context.Context, t testing.TB, cl client.Client, ns string) string {
	t.Helper()
	c := clusterTyped(ctx, t, cl, ns, "dr")
	var out []string
	for _, cond := range c.Status.Conditions {
		switch cond.Type {
		case v1alpha1.ConditionStandby, v1alpha1.ConditionDegraded, v1alpha1.ConditionReady:
			out = append(out, fmt.Sprintf("%s=%s (%s, since %s): %s", cond.Type, cond.Status, cond.Reason, cond.LastTransitionTime.UTC().Format(time.TimeOnly), cond.Message))
		}
	}
	return strings.Join(out, "; ")
}

// activeOneServer reaches server 0 of a one-server cluster.
func activeOneServer(ctx context.Context, t testing.TB, cl client.Client, ns, cluster, root string) *baoAPI {
	t.Helper()
	pod := clusterServerPods(ctx, t, cl, ns, cluster, 1)[0]
	caPEM := secretData(ctx, t, cl, ns, cluster+"-tls-ca", "ca.crt")
	return &baoAPI{client: tlsClient(caPEM, dnsName(pod, ns), nil), addr: "https://" + net.JoinHostPort(pod.Status.PodIP, "8200"), root: root}
}

// clientServiceAPI reaches a cluster through its client Service, as its
// clients do.
func clientServiceAPI(ctx context.Context, t testing.TB, cl client.Client, ns, cluster, root string, caPEM []byte) *baoAPI {
	t.Helper()
	svc := &corev1.Service{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, svc); err != nil {
		t.Fatal(err)
	}
	c := tlsClient(caPEM, cluster+"."+ns+".svc", nil)
	c.Timeout = 3 * time.Second
	return &baoAPI{client: c, addr: "https://" + net.JoinHostPort(svc.Spec.ClusterIP, "8200"), root: root}
}

// writeUntilAcknowledged writes path until OpenBao acknowledges it, and
// returns when it did.
func writeUntilAcknowledged(ctx context.Context, t testing.TB, b *baoAPI, path string) time.Time {
	t.Helper()
	var at time.Time
	waitEvery(ctx, t, 100*time.Millisecond, 3*time.Minute, "a write through the promoted standby's client Service", func() (bool, string) {
		req, err := http.NewRequest(http.MethodPost, b.addr+"/v1/"+path, bytes.NewBufferString(`{"value":"promoted"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Vault-Token", b.root)
		resp, err := b.client.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		at = time.Now()
		return resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusOK, fmt.Sprintf("HTTP %d %s", resp.StatusCode, body)
	})
	return at
}

// writtenKeys are the keys written to the primary and when each write was
// acknowledged.
type writtenKeys struct {
	names []string
	acked []time.Time
}

func (w *writtenKeys) write(t testing.TB, b *baoAPI, name string) time.Time {
	t.Helper()
	b.call(t, http.MethodPost, "kv/"+name, map[string]any{"value": "value-of-" + name})
	at := time.Now()
	w.names, w.acked = append(w.names, name), append(w.acked, at)
	return at
}

// checkServed reads, through b, every key acknowledged before the served
// snapshot was taken; later ones may or may not be there (the RPO).
func (w *writtenKeys) checkServed(t testing.TB, b *baoAPI, takenAt time.Time) {
	t.Helper()
	var served, after []string
	for i, name := range w.names {
		body, code := b.read(t, "kv/"+name)
		present := code == http.StatusOK && strings.Contains(body, `"value-of-`+name+`"`)
		switch {
		case w.acked[i].Before(takenAt) && !present:
			t.Errorf("kv/%s, written %s before the served snapshot, is not served: HTTP %d %s", name, takenAt.Sub(w.acked[i]).Round(time.Second), code, body)
		case w.acked[i].Before(takenAt):
			served = append(served, name)
		default:
			after = append(after, fmt.Sprintf("%s (present %v)", name, present))
		}
	}
	logf("the promoted standby serves %v, written before its snapshot; written after it: %v", served, after)
}
