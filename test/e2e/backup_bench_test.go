package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/images"
	"github.com/openbao/operator/test/localnode"
	"github.com/openbao/operator/test/miniotest"
)

// BenchmarkBackup (make bench-backup) fills a one-server cluster with at
// least BACKUP_BENCH_BYTES (default 1 GiB) of random data through the API,
// then takes BACKUP_BENCH_RUNS (default 3) rounds of two backups to MinIO
// on the same node: the executor as the operator runs it (an OpenBaoBackup,
// its Job and pod), and the floor, a pod that copies the snapshot stream
// straight into the same S3 client with the same part size and concurrency
// and does nothing else. It reports the executor's throughput next to the
// floor's and its peak memory, and writes them into BENCHMARKS.md.
func BenchmarkBackup(b *testing.B) {
	installOperator(b)
	cl := backupClient(b)
	ctx := context.Background()
	m := startBridgeMinIO(b)
	ns := createNamespace(ctx, b, cl, "bench-backup")
	createOneServerCluster(ctx, b, cl, ns)
	waitFor(ctx, b, 3*time.Minute, "phase Running", func() (bool, string) {
		st := clusterStatus(ctx, b, cl, ns, "bao")
		return st["phase"] == "Running", fmt.Sprint(st["phase"])
	})
	bao := newBaoAPI(ctx, b, cl, ns, string(secretData(ctx, b, cl, ns, "bao-root-token", "token")))
	token := bao.createBackupToken(b)
	load := loadData(b, bao, benchBytes(b, "BACKUP_BENCH_BYTES"))
	enableBenchBackups(ctx, b, cl, ns, m, token)
	bare := bareCopyImage(b)
	var runs []benchRound
	for i := 1; i <= envInt(b, "BACKUP_BENCH_RUNS", 3); i++ {
		r := benchRound{executor: executorRun(ctx, b, cl, ns, i), floor: floorRun(ctx, b, cl, ns, m, bare, i)}
		b.Logf("round %d: executor %s, floor %s", i, r.executor, r.floor)
		runs = append(runs, r)
	}
	writeBackupBenchmarks(b, load, runs)
}

// copyRun is one copy: what the program reported about itself.
type copyRun struct {
	Size          int64   `json:"size"`
	Seconds       float64 `json:"seconds"`
	PeakRSSBytes  int64   `json:"peakRSSBytes"`
	PeakAnonBytes int64   `json:"peakAnonBytes"`
}

func (r copyRun) mibps() float64 { return float64(r.Size) / (1 << 20) / r.Seconds }

func (r copyRun) String() string {
	return fmt.Sprintf("%.0f MiB in %.1f s (%.0f MiB/s), peak RSS %d MiB (anonymous %d MiB)",
		float64(r.Size)/(1<<20), r.Seconds, r.mibps(), r.PeakRSSBytes>>20, r.PeakAnonBytes>>20)
}

type benchRound struct{ executor, floor copyRun }

type loadResult struct {
	bytes   int64
	elapsed time.Duration
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

// benchBytes reads how much to load from the environment variable name;
// 1 GiB unless set.
func benchBytes(b *testing.B, name string) int64 {
	if s := os.Getenv(name); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive number of bytes", name, s)
		}
		return n
	}
	return 1 << 30
}

// loadData writes random values of 512 KiB (683 KiB in base64, under
// Raft's 1 MiB entry limit) into a kv mount from eight writers until the
// values add up to total. OpenBao encrypts each, so the snapshot cannot
// compress them: it is at least as large as the data.
func loadData(b *testing.B, bao *baoAPI, total int64) loadResult {
	bao.call(b, http.MethodPost, "sys/mounts/bench", map[string]any{"type": "kv"})
	client := bao.keepAliveClient()
	var written, next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			raw := make([]byte, 512<<10)
			for written.Load() < total {
				rand.Read(raw)
				body, _ := json.Marshal(map[string]string{"v": base64.StdEncoding.EncodeToString(raw)})
				if err := bao.put(client, fmt.Sprintf("bench/k-%d", next.Add(1)), body); err != nil {
					errs <- err
					return
				}
				written.Add(int64(len(body)))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	l := loadResult{bytes: written.Load(), elapsed: time.Since(start)}
	b.Logf("loaded %d MiB in %s (%.0f MiB/s)", l.bytes>>20, l.elapsed.Round(time.Second), float64(l.bytes)/(1<<20)/l.elapsed.Seconds())
	return l
}

// keepAliveClient reuses connections, for the load.
func (b *baoAPI) keepAliveClient() *http.Client {
	tr := b.client.Transport.(*http.Transport).Clone()
	tr.DisableKeepAlives = false
	tr.MaxIdleConnsPerHost = 8
	return &http.Client{Timeout: time.Minute, Transport: tr}
}

func (b *baoAPI) put(c *http.Client, path string, body []byte) error {
	req, err := http.NewRequest(http.MethodPost, b.addr+"/v1/"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-Vault-Token", b.root)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("write %s: HTTP %d", path, resp.StatusCode)
	}
	return nil
}

func enableBenchBackups(ctx context.Context, b *testing.B, cl client.Client, ns string, m *miniotest.Server, token string) {
	createTokenSecret(ctx, b, cl, ns, "backup-token", token)
	setBackupToMinIO(ctx, b, cl, ns, m, "bench", func(s *v1alpha1.BackupSpec) {
		s.TokenSecretRef = &v1alpha1.SecretKeyRef{Name: "backup-token"}
	})
}

// createTokenSecret stores a token under the key "token".
func createTokenSecret(ctx context.Context, b *testing.B, cl client.Client, ns, name, token string) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: map[string]string{"token": token}}
	if err := cl.Create(ctx, s); err != nil {
		b.Fatal(err)
	}
}

// executorRun takes a backup as the operator does and reads the
// executor's report from its pod.
func executorRun(ctx context.Context, b *testing.B, cl client.Client, ns string, i int) copyRun {
	done := waitBackup(ctx, b, cl, ns, takeBackup(ctx, b, cl, ns, fmt.Sprintf("bench-%d", i)), v1alpha1.BackupSucceeded)
	_, r := executorReport(ctx, b, cl, ns, done.Status.JobName)
	return reportRun(r)
}

func reportRun(r backup.Report) copyRun {
	return copyRun{Size: r.Size, Seconds: r.DurationValue().Seconds(), PeakRSSBytes: r.PeakRSSBytes, PeakAnonBytes: r.PeakAnonBytes}
}

// executorReport finds the pod of an executor Job that succeeded and
// reads the report it left.
func executorReport(ctx context.Context, b *testing.B, cl client.Client, ns, job string) (*corev1.Pod, backup.Report) {
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"batch.kubernetes.io/job-name": job}); err != nil {
		b.Fatal(err)
	}
	for i, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Terminated != nil && s.State.Terminated.ExitCode == 0 {
				r, err := backup.ParseReport(s.State.Terminated.Message)
				if err != nil {
					b.Fatal(err)
				}
				return &pods.Items[i], r
			}
		}
	}
	b.Fatalf("no report from the pods of Job %s", job)
	return nil, backup.Report{}
}

// bareCopyImage builds the floor's image and imports it into the node.
func bareCopyImage(b *testing.B) string {
	bin := filepath.Join(node.ImageCache, "bin", "barecopy")
	if err := images.GoBuild(node.RepoRoot, "./test/bench/barecopy", bin); err != nil {
		b.Fatal(err)
	}
	user := fmt.Sprintf("%d:%d", images.NonRootUID, images.NonRootUID)
	built, err := images.Build(images.Spec{Repository: "localhost/openbao-barecopy",
		Files: []images.File{{Path: "/barecopy", Source: bin, Mode: 0o755}}, User: user, Entrypoint: []string{"/barecopy"}}, node.ImageCache)
	if err != nil {
		b.Fatal(err)
	}
	if err := localnode.ImportImages(node, map[string]images.Built{"barecopy": built}, logf); err != nil {
		b.Fatal(err)
	}
	return built.Ref
}

// floorRun runs the floor as a pod beside the cluster and reads its report.
func floorRun(ctx context.Context, b *testing.B, cl client.Client, ns string, m *miniotest.Server, image string, i int) copyRun {
	svc := "bao." + ns + ".svc"
	out, _ := runFloorPod(ctx, b, cl, ns, fmt.Sprintf("floor-%d", i), image, "https://"+svc+":8200", svc, "backup-token", m,
		fmt.Sprintf("--key=floor/%s/run-%d.snap", ns, i),
		fmt.Sprintf("--part-size=%d", backup.DefaultPartSize), fmt.Sprintf("--concurrency=%d", backup.DefaultConcurrency))
	return out
}

// runFloorPod runs barecopy in a pod against a server at addr (whose
// certificate names serverName) and MinIO, with the token of Secret
// tokenSecret, and waits for its report. It returns the report and the
// time from the pod's creation to its end seen (polled every 100 ms).
func runFloorPod(ctx context.Context, b *testing.B, cl client.Client, ns, name, image, addr, serverName, tokenSecret string,
	m *miniotest.Server, args ...string) (copyRun, time.Duration) {
	pod := restrictedPod(ns, name, image, append([]string{
		"/barecopy", "--addr=" + addr, "--server-name=" + serverName, "--ca-file=/ca/ca.crt", "--token-file=/token/token",
		"--endpoint=" + m.Endpoint, "--bucket=" + m.Bucket,
		"--access-key-file=/creds/" + backup.AccessKeyIDKey, "--secret-key-file=/creds/" + backup.SecretAccessKeyKey}, args...)...)
	pod.Spec.AutomountServiceAccountToken = ptr.To(false)
	// A failure leaves no report; its stderr then says why.
	pod.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	for vol, secret := range map[string]string{"ca": "bao-tls-ca", "token": tokenSecret, "creds": "store-credentials"} {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: "/" + vol, ReadOnly: true})
	}
	start := time.Now()
	if err := cl.Create(ctx, pod); err != nil {
		b.Fatal(err)
	}
	var out copyRun
	waitEvery(ctx, b, 100*time.Millisecond, 10*time.Minute, "the floor pod "+pod.Name, func() (bool, string) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error()
		}
		for _, s := range pod.Status.ContainerStatuses {
			if t := s.State.Terminated; t != nil {
				if t.ExitCode != 0 {
					b.Fatalf("floor %s failed: %s", pod.Name, t.Message)
				}
				return json.Unmarshal([]byte(t.Message), &out) == nil, t.Message
			}
		}
		return false, string(pod.Status.Phase)
	})
	return out, time.Since(start)
}

// medianOf returns the middle value of what f reads from each round.
func medianOf[R any](runs []R, f func(R) float64) float64 {
	var v []float64
	for _, r := range runs {
		v = append(v, f(r))
	}
	slices.Sort(v)
	return v[len(v)/2]
}

const (
	benchBegin = "<!-- bench-backup:begin -->"
	benchEnd   = "<!-- bench-backup:end -->"
)

// writeBackupBenchmarks reports the medians and puts them in BENCHMARKS.md
// between the markers, leaving the rest of the file alone.
func writeBackupBenchmarks(b *testing.B, load loadResult, runs []benchRound) {
	exec := func(r benchRound) copyRun { return r.executor }
	floor := func(r benchRound) copyRun { return r.floor }
	med := func(pick func(benchRound) copyRun, f func(copyRun) float64) float64 {
		return medianOf(runs, func(r benchRound) float64 { return f(pick(r)) })
	}
	mibps := func(r copyRun) float64 { return r.mibps() }
	rss := func(r copyRun) float64 { return float64(r.PeakRSSBytes) / (1 << 20) }
	anon := func(r copyRun) float64 { return float64(r.PeakAnonBytes) / (1 << 20) }
	ratio := medianOf(runs, func(r benchRound) float64 { return r.executor.mibps() / r.floor.mibps() })
	b.ReportMetric(med(exec, mibps), "executor-MiB/s")
	b.ReportMetric(med(floor, mibps), "floor-MiB/s")
	b.ReportMetric(ratio*100, "executor/floor-%")
	b.ReportMetric(med(exec, rss), "executor-peak-RSS-MiB")
	b.ReportMetric(med(exec, anon), "executor-peak-anon-MiB")
	var rows strings.Builder
	for i, r := range runs {
		fmt.Fprintf(&rows, "| %d | %.0f MiB | %.1f s, %.0f MiB/s | %.1f s, %.0f MiB/s | %.0f%% | %d MiB (%d MiB anonymous) | %d MiB (%d MiB anonymous) |\n",
			i+1, float64(r.executor.Size)/(1<<20), r.executor.Seconds, r.executor.mibps(), r.floor.Seconds, r.floor.mibps(),
			100*r.executor.mibps()/r.floor.mibps(), r.executor.PeakRSSBytes>>20, r.executor.PeakAnonBytes>>20,
			r.floor.PeakRSSBytes>>20, r.floor.PeakAnonBytes>>20)
	}
	section := fmt.Sprintf(`%s
## Backups (make bench-backup)

%s, on the 2-core local node: a one-server cluster holding %d MiB of
random values written through the API (in %s), backed up to MinIO on the
node's bridge address %d times by the executor (an OpenBaoBackup, its Job
and pod: login, leader look-up, the snapshot checked in stream, a
%d MiB × %d multipart upload with per-part SHA-256, the object verified)
and by the floor (a pod streaming the same snapshot into the same client
with the same parts, nothing else). Medians: the executor copies %.0f MiB/s,
the floor %.0f MiB/s: **%.0f%%** of the floor (goal >= 80%%). The
executor's peak RSS (VmHWM) is **%.0f MiB**, of which %.0f MiB anonymous
(heap, stacks, part buffers; sampled every 50 ms); the rest are pages of
the operator's own binary (87 MB), which every subcommand of it maps (goal
<= 64 MiB).

| run | snapshot | executor | floor | executor/floor | executor peak RSS | floor peak RSS |
|---|---|---|---|---|---|---|
%s%s
`, benchBegin, time.Now().UTC().Format("2006-01-02"), load.bytes>>20, load.elapsed.Round(time.Second), len(runs),
		backup.DefaultPartSize>>20, backup.DefaultConcurrency, med(exec, mibps), med(floor, mibps), ratio*100,
		med(exec, rss), med(exec, anon), rows.String(), benchEnd)
	writeBenchSection(b, benchBegin, benchEnd, section)
}

// writeBenchSection prints section and puts it into BENCHMARKS.md.
func writeBenchSection(b *testing.B, begin, end, section string) {
	fmt.Println(section)
	path := filepath.Join(node.RepoRoot, "BENCHMARKS.md")
	old, _ := os.ReadFile(path)
	if err := os.WriteFile(path, replaceSection(old, begin, end, section), 0o644); err != nil {
		b.Fatal(err)
	}
}

// replaceSection puts section (which starts with begin and ends with end)
// in place of the one between those markers, or appends it.
func replaceSection(doc []byte, begin, end, section string) []byte {
	s := string(doc)
	from, to := strings.Index(s, begin), strings.Index(s, end)
	if from >= 0 && to > from {
		return []byte(s[:from] + strings.TrimSuffix(section, "\n") + s[to+len(end):])
	}
	if s == "" {
		s = "# Benchmarks\n"
	}
	return []byte(strings.TrimRight(s, "\n") + "\n\n" + section)
}
