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

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/test/miniotest"
)

// BenchmarkRestore (make bench-restore) fills a one-server cluster with at
// least RESTORE_BENCH_BYTES (default 1 GiB) of random data through the API,
// backs it up once to MinIO on the node, then takes RESTORE_BENCH_RUNS
// (default 3) rounds of two restores of that object, each after a write
// that the restore must undo: the operator's (an OpenBaoRestore, timed from
// its creation to phase Succeeded) and the floor, a pod that streams the
// same object through the same S3 client into POST
// sys/storage/raft/snapshot and does nothing else (timed from its creation
// to its end). It reports both, the executor's own duration split at the
// start of its post, its peak memory, and writes them into BENCHMARKS.md.
func BenchmarkRestore(b *testing.B) {
	installOperator(b)
	cl := backupClient(b)
	ctx := context.Background()
	m := startBridgeMinIO(b)
	ns := createNamespace(ctx, b, cl, "bench-restore")
	createOneServerCluster(ctx, b, cl, ns)
	waitFor(ctx, b, 3*time.Minute, "phase Running and the operator's identity", func() (bool, string) {
		st := clusterStatus(ctx, b, cl, ns, "bao")
		return st["phase"] == "Running" && st["identityConfigured"] == true, fmt.Sprint(st["phase"], " ", st["identityConfigured"])
	})
	root := string(secretData(ctx, b, cl, ns, "bao-root-token", "token"))
	load := loadData(b, newBaoAPI(ctx, b, cl, ns, root), benchBytes(b, "RESTORE_BENCH_BYTES"))
	// Created before the backup, so that the snapshot holds it and the
	// first restore does not revoke it.
	createTokenSecret(ctx, b, cl, ns, "restore-token", newBaoAPI(ctx, b, cl, ns, root).createPolicyToken(b, identity.RestorePolicy))
	setBackupToMinIO(ctx, b, cl, ns, m, "bench", func(s *v1alpha1.BackupSpec) { s.JWTAuthRole = "backup" })
	snap := waitBackup(ctx, b, cl, ns, takeBackup(ctx, b, cl, ns, "bench"), v1alpha1.BackupSucceeded)
	b.Logf("backup %s: %d MiB", snap.Status.Key, snap.Status.Size>>20)
	bench := restoreBench{cl: cl, cs: clientset(b), ns: ns, root: root, m: m, image: bareCopyImage(b), snap: snap}
	var runs []restoreRound
	for i := 1; i <= envInt(b, "RESTORE_BENCH_RUNS", 3); i++ {
		r := restoreRound{operator: bench.operator(ctx, b, i), floor: bench.floor(ctx, b, i)}
		b.Logf("round %d: OpenBaoRestore %s, floor %s", i, r.operator, r.floor)
		runs = append(runs, r)
	}
	writeRestoreBenchmarks(b, load, snap, runs)
}

// restoreBench is what every round of BenchmarkRestore uses.
type restoreBench struct {
	cl          client.Client
	cs          kubernetes.Interface
	ns, root    string
	m           *miniotest.Server
	image       string
	snap        *v1alpha1.OpenBaoBackup
	caPEM       []byte
	lastWritten string
}

// restoreRun is one restore. wall is from the creation of the
// OpenBaoRestore (or the floor's pod) to its end seen, polled every
// 100 ms; run is what the program in the pod reported about itself.
type restoreRun struct {
	wall time.Duration
	run  copyRun
	// The operator's only: from the creation to the step Verifying (the
	// snapshot installed), the Job's own span from its status (whole
	// seconds), and the executor's time before its post began (resolve,
	// login, leader look-up), from its log.
	installed, job, beforePost time.Duration
	// settle is from the end seen to the server answering with the
	// snapshot's data.
	settle time.Duration
}

func (r restoreRun) String() string {
	s := fmt.Sprintf("%.1f s (in its pod %.1f s", r.wall.Seconds(), r.run.Seconds)
	if r.beforePost > 0 {
		s += fmt.Sprintf(", %.1f s before the post; installed at %.1f s; Job %s", r.beforePost.Seconds(), r.installed.Seconds(), r.job)
	}
	return s + fmt.Sprintf("; peak RSS %d MiB; serving %.1f s later)", r.run.PeakRSSBytes>>20, r.settle.Seconds())
}

type restoreRound struct{ operator, floor restoreRun }

// operator restores the snapshot with an OpenBaoRestore, as a user does.
func (rb *restoreBench) operator(ctx context.Context, b *testing.B, i int) restoreRun {
	rb.settle(ctx, b)
	rb.diverge(ctx, b, fmt.Sprintf("operator-%d", i))
	// No pre-restore snapshot: the floor takes none, and that snapshot is
	// a backup, which bench-backup measures.
	rs := &v1alpha1.OpenBaoRestore{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i), Namespace: rb.ns},
		Spec: v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao", Source: v1alpha1.RestoreSource{Key: rb.snap.Status.Key},
			ExpectedSHA256: rb.snap.Status.SHA256, PreRestoreSnapshot: ptr.To(false)}}
	start := time.Now()
	if err := rb.cl.Create(ctx, rs); err != nil {
		b.Fatal(err)
	}
	var out restoreRun
	var reasons []string
	waitEvery(ctx, b, 100*time.Millisecond, 30*time.Minute, "restore "+rs.Name, func() (bool, string) {
		if err := rb.cl.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
			return false, err.Error()
		}
		if out.installed == 0 && rs.Status.Step == v1alpha1.RestoreStepVerifying {
			out.installed = time.Since(start)
		}
		// Each reason, and while verifying each message (what it waits for).
		r := rs.Status.Reason
		if rs.Status.Step == v1alpha1.RestoreStepVerifying {
			r += " (" + rs.Status.Message + ")"
		}
		if r != "" && (len(reasons) == 0 || !strings.HasSuffix(reasons[len(reasons)-1], " "+r)) {
			reasons = append(reasons, fmt.Sprintf("%.1f s %s", time.Since(start).Seconds(), r))
		}
		return rs.Status.Phase.Done(), fmt.Sprintf("%s/%s %s", rs.Status.Phase, rs.Status.Step, rs.Status.Reason)
	})
	out.wall = time.Since(start)
	b.Logf("%s: %s", rs.Name, strings.Join(reasons, ", "))
	if rs.Status.Phase != v1alpha1.RestoreSucceeded {
		b.Fatalf("restore %s: %s %s: %s", rs.Name, rs.Status.Phase, rs.Status.Reason, rs.Status.Message)
	}
	if out.installed == 0 { // Verifying passed between two polls
		out.installed = rs.Status.RestoredAt.Sub(start)
	}
	out.settle = rb.checkRestored(ctx, b, rs.Name)
	pod, report := executorReport(ctx, b, rb.cl, rb.ns, rs.Status.JobName)
	out.run, out.beforePost = reportRun(report), rb.postStart(ctx, b, pod)
	job := &batchv1.Job{}
	if err := rb.cl.Get(ctx, client.ObjectKey{Namespace: rb.ns, Name: rs.Status.JobName}, job); err != nil {
		b.Fatal(err)
	}
	if job.Status.StartTime != nil && job.Status.CompletionTime != nil {
		out.job = job.Status.CompletionTime.Sub(job.Status.StartTime.Time)
	}
	return out
}

// floor restores the snapshot with barecopy --restore in a pod. It posts
// to the server pod's address, as the executor does once it found the
// leader: right after a restore the pod may still be out of the client
// Service (its readiness probe has not passed again), which refuses
// connections.
func (rb *restoreBench) floor(ctx context.Context, b *testing.B, i int) restoreRun {
	rb.settle(ctx, b)
	rb.diverge(ctx, b, fmt.Sprintf("floor-%d", i))
	bao := rb.server(ctx, b)
	var out restoreRun
	out.run, out.wall = runFloorPod(ctx, b, rb.cl, rb.ns, fmt.Sprintf("floor-restore-%d", i), rb.image, bao.addr, "bao-0.bao-internal."+rb.ns+".svc",
		"restore-token", rb.m, "--restore", "--key="+rb.snap.Status.Key)
	out.settle = rb.checkRestored(ctx, b, "floor "+fmt.Sprint(i))
	return out
}

// diverge writes a key the snapshot does not hold, for the restore to
// undo.
func (rb *restoreBench) diverge(ctx context.Context, b *testing.B, value string) {
	bao := rb.server(ctx, b)
	if bao == nil {
		b.Fatal("the server has no address")
	}
	bao.call(b, http.MethodPost, "bench/after-snapshot", map[string]any{"v": value})
	rb.lastWritten = value
}

// checkRestored waits for the server to answer as the snapshot does: the
// key written since is gone, the data is there. It returns how long that
// took, and logs what the server answered meanwhile.
func (rb *restoreBench) checkRestored(ctx context.Context, b *testing.B, what string) time.Duration {
	start := time.Now()
	var seen []string
	var served time.Duration
	waitEvery(ctx, b, 100*time.Millisecond, 2*time.Minute, what+": the server serves the snapshot", func() (bool, string) {
		at, state := time.Since(start), "no pod address"
		if bao := rb.server(ctx, b); bao != nil {
			// OpenBao holds requests while it installs a snapshot: a
			// short timeout keeps each poll's end near the answer.
			bao.client.Timeout = 2 * time.Second
			_, after := bao.read(b, "bench/after-snapshot")
			_, data := bao.read(b, "bench/k-1")
			if after == http.StatusNotFound && data == http.StatusOK {
				served = time.Since(start)
			}
			_, health := bao.read(b, "sys/health")
			state = fmt.Sprintf("bench/after-snapshot (%s) %d, bench/k-1 %d, sys/health %d", rb.lastWritten, after, data, health)
		}
		if len(seen) == 0 || !strings.HasSuffix(seen[len(seen)-1], ": "+state) {
			seen = append(seen, fmt.Sprintf("%.1f s: %s", at.Seconds(), state))
		}
		return served > 0, state
	})
	b.Logf("%s: the server answered %s", what, strings.Join(seen, "; "))
	return served
}

// settle waits, untimed, for the cluster to be Running with its server
// Ready, so that each restore starts from the same state: a restore that
// finds the cluster otherwise is held (restore.HoldRetry), and a pod out of
// the client Service refuses the floor.
func (rb *restoreBench) settle(ctx context.Context, b *testing.B) {
	waitFor(ctx, b, 3*time.Minute, "the cluster Running with its server Ready", func() (bool, string) {
		st := clusterStatus(ctx, b, rb.cl, rb.ns, "bao")
		pod := &corev1.Pod{}
		if err := rb.cl.Get(ctx, client.ObjectKey{Namespace: rb.ns, Name: "bao-0"}, pod); err != nil {
			return false, err.Error()
		}
		return st["phase"] == "Running" && fmt.Sprint(st["readyReplicas"]) == "1" && podReady(pod),
			fmt.Sprintf("phase %v, readyReplicas %v, pod ready %v", st["phase"], st["readyReplicas"], podReady(pod))
	})
}

// server reaches bao-0 by its pod's address, read again each time: the
// pod may have been replaced. Nil while it has none.
func (rb *restoreBench) server(ctx context.Context, b *testing.B) *baoAPI {
	if rb.caPEM == nil {
		rb.caPEM = secretData(ctx, b, rb.cl, rb.ns, "bao-tls-ca", "ca.crt")
	}
	pod := &corev1.Pod{}
	if err := rb.cl.Get(ctx, client.ObjectKey{Namespace: rb.ns, Name: "bao-0"}, pod); err != nil || pod.Status.PodIP == "" {
		return nil
	}
	return &baoAPI{client: tlsClient(rb.caPEM, dnsName(*pod, rb.ns), nil),
		addr: "https://" + net.JoinHostPort(pod.Status.PodIP, "8200"), root: rb.root}
}

// postStart reads from the executor's log how long its run took until the
// post began.
func (rb *restoreBench) postStart(ctx context.Context, b *testing.B, pod *corev1.Pod) time.Duration {
	out, err := rb.cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: backup.ExecutorName}).DoRaw(ctx)
	if err != nil {
		b.Fatalf("read the log of %s: %v", pod.Name, err)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		var entry struct {
			Msg     string `json:"msg"`
			Elapsed string `json:"elapsed"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && strings.HasPrefix(entry.Msg, "posting the snapshot") {
			d, err := time.ParseDuration(entry.Elapsed)
			if err != nil {
				b.Fatalf("the log of %s: elapsed %q: %v", pod.Name, entry.Elapsed, err)
			}
			return d
		}
	}
	b.Fatalf("the log of %s has no line \"posting the snapshot\"", pod.Name)
	return 0
}

const (
	restoreBenchBegin = "<!-- bench-restore:begin -->"
	restoreBenchEnd   = "<!-- bench-restore:end -->"
)

// restoreMedians are the medians over the rounds, in seconds (ratios and
// MiB as named).
type restoreMedians struct {
	total, installed, floor, floorServing, exec, beforePost, floorIn float64
	ratio, servingRatio, inPodRatio, rssMiB, anonMiB                 float64
}

func mediansOf(runs []restoreRound) restoreMedians {
	med := func(f func(restoreRound) time.Duration) float64 {
		return medianOf(runs, func(r restoreRound) float64 { return f(r).Seconds() })
	}
	return restoreMedians{
		total:        med(func(r restoreRound) time.Duration { return r.operator.wall }),
		installed:    med(func(r restoreRound) time.Duration { return r.operator.installed }),
		floor:        med(func(r restoreRound) time.Duration { return r.floor.wall }),
		floorServing: med(func(r restoreRound) time.Duration { return r.floor.wall + r.floor.settle }),
		exec:         medianOf(runs, func(r restoreRound) float64 { return r.operator.run.Seconds }),
		beforePost:   med(func(r restoreRound) time.Duration { return r.operator.beforePost }),
		floorIn:      medianOf(runs, func(r restoreRound) float64 { return r.floor.run.Seconds }),
		ratio:        medianOf(runs, func(r restoreRound) float64 { return r.operator.wall.Seconds() / r.floor.wall.Seconds() }),
		servingRatio: medianOf(runs, func(r restoreRound) float64 {
			return r.operator.wall.Seconds() / (r.floor.wall + r.floor.settle).Seconds()
		}),
		inPodRatio: medianOf(runs, func(r restoreRound) float64 { return r.operator.run.Seconds / r.floor.run.Seconds }),
		rssMiB:     medianOf(runs, func(r restoreRound) float64 { return float64(r.operator.run.PeakRSSBytes) / (1 << 20) }),
		anonMiB:    medianOf(runs, func(r restoreRound) float64 { return float64(r.operator.run.PeakAnonBytes) / (1 << 20) }),
	}
}

// writeRestoreBenchmarks reports the medians and puts them in
// BENCHMARKS.md between the markers.
func writeRestoreBenchmarks(b *testing.B, load loadResult, snap *v1alpha1.OpenBaoBackup, runs []restoreRound) {
	m := mediansOf(runs)
	b.ReportMetric(m.total, "restore-s")
	b.ReportMetric(m.floor, "floor-s")
	b.ReportMetric(m.floorServing, "floor-until-serving-s")
	b.ReportMetric(m.ratio, "restore/floor")
	b.ReportMetric(m.exec, "executor-s")
	b.ReportMetric(m.beforePost, "executor-before-post-s")
	b.ReportMetric(m.floorIn, "floor-in-pod-s")
	b.ReportMetric(m.rssMiB, "executor-peak-RSS-MiB")
	b.ReportMetric(m.anonMiB, "executor-peak-anon-MiB")
	section := fmt.Sprintf(`%s
## Restores (make bench-restore)

%s, on the 2-core local node: a one-server cluster holding %d MiB of
random values written through the API (in %s), backed up once to MinIO on
the node's bridge address (a %d MiB snapshot), then restored from that
object %d times by the operator and by the floor, each restore after a
write that it must undo. The operator: an OpenBaoRestore naming the key
and its SHA-256, without a pre-restore snapshot (the default takes one
first: a backup of the cluster, as bench-backup measures); its Job's pod logs in, finds the active server and reads
the object once into POST sys/storage/raft/snapshot through the snapshot
check and a SHA-256, keeping its last MiB back until both passed; the
operator then checks that every server is healthy and caught up. The floor: a pod streaming the same
object through the same S3 client into the same POST, nothing else.

Medians: an OpenBaoRestore takes **%.1f s** from its creation to phase
Succeeded (the snapshot installed at %.1f s), the floor's pod %.1f s from
its creation to its end: **%.2f×** the floor. The server answers with the
snapshot's data only some seconds after the floor's POST returns (%.1f s
after the pod's creation, median), a wait that Succeeded includes: against
that, **%.2f×**. Inside their pods the executor takes %.1f s, of which
%.1f s before its post begins (login, leader look-up), the floor
%.1f s (%.2f×). The executor's peak RSS (VmHWM) is **%.0f MiB**, of which
%.0f MiB anonymous (sampled every 50 ms); the rest are pages of the
operator's own binary.

| run | snapshot | OpenBaoRestore created → Succeeded | → installed (Verifying) | Job (status, whole s) | executor in its pod: before post + post | floor pod created → ended | → serving | floor in its pod | restore/floor | executor peak RSS | floor peak RSS |
|---|---|---|---|---|---|---|---|---|---|---|---|
%s%s
`, restoreBenchBegin, time.Now().UTC().Format("2006-01-02"), load.bytes>>20, load.elapsed.Round(time.Second),
		snap.Status.Size>>20, len(runs), m.total, m.installed, m.floor, m.ratio, m.floorServing, m.servingRatio,
		m.exec, m.beforePost, m.floorIn, m.inPodRatio, m.rssMiB, m.anonMiB, restoreRows(runs), restoreBenchEnd)
	writeBenchSection(b, restoreBenchBegin, restoreBenchEnd, section)
}

func restoreRows(runs []restoreRound) string {
	var rows strings.Builder
	for i, r := range runs {
		op, fl := r.operator, r.floor
		fmt.Fprintf(&rows, "| %d | %.0f MiB | %.1f s | %.1f s | %s | %.1f s + %.1f s | %.1f s | %.1f s | %.1f s | %.2f× | %d MiB (%d MiB anonymous) | %d MiB (%d MiB anonymous) |\n",
			i+1, float64(op.run.Size)/(1<<20), op.wall.Seconds(), op.installed.Seconds(), op.job, op.beforePost.Seconds(),
			op.run.Seconds-op.beforePost.Seconds(), fl.wall.Seconds(), (fl.wall + fl.settle).Seconds(), fl.run.Seconds,
			op.wall.Seconds()/fl.wall.Seconds(), op.run.PeakRSSBytes>>20, op.run.PeakAnonBytes>>20,
			fl.run.PeakRSSBytes>>20, fl.run.PeakAnonBytes>>20)
	}
	return rows.String()
}
