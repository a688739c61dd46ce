package scale_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/test/testbin"
)

// process is a subprocess whose output goes to a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed once Wait returned
}

// start runs bin with args, its output in dir/<name>.log. The benchmark
// stops it by PID in a cleanup; Pdeathsig also ends it should the test
// binary itself die (a -timeout panic runs no cleanups). The signal follows
// the OS thread that started the child, which Go keeps for the process's
// life unless a goroutine locked it, and none here does.
func start(b *testing.B, dir, name string, env []string, bin string, args ...string) *process {
	b.Helper()
	logPath := filepath.Join(dir, name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		b.Fatalf("start %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	b.Cleanup(func() { p.stop(b, 45*time.Second) })
	return p
}

// stop sends SIGTERM and, after grace, SIGKILL. The operator's graceful
// shutdown may wait for an in-flight sys/init (none here), hence the grace.
func (p *process) stop(b *testing.B, grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		b.Logf("%s (pid %d) ignored SIGTERM for %s; killing it", p.name, p.cmd.Process.Pid, grace)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitForLine waits until the log holds a line containing every string of
// want and returns that line.
func (p *process) waitForLine(ctx context.Context, want ...string) (string, error) {
	for {
		if line, ok := grepFile(p.log, want...); ok {
			return line, nil
		}
		if p.exited() {
			return "", fmt.Errorf("%s exited before logging %q", p.name, want)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s did not log %q: %w", p.name, want, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func grepFile(path string, want ...string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if containsAll(sc.Text(), want) {
			return sc.Text(), true
		}
	}
	return "", false
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// toolPath finds a binary of `make tools` or fails the benchmark loudly.
func toolPath(b *testing.B, name string) string {
	b.Helper()
	p, err := testbin.Path(name)
	if err != nil {
		b.Fatalf("bench-scale needs %s: %v", name, err)
	}
	return p
}

// buildOperator builds the manager binary from this checkout, as shipped.
func buildOperator(b *testing.B, root, dir string) string {
	b.Helper()
	out := filepath.Join(dir, "openbao-operator")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/openbao-operator")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build the operator: %v\n%s", err, msg)
	}
	return out
}

// newEnvtest describes kube-apiserver and etcd from bin/ with the CRDs and
// config/webhook's ValidatingWebhookConfiguration, which envtest points at
// a local port with a certificate of its own: the operator serves the
// webhook there (webhookArgs), so every cluster is admitted as in a real
// install.
func newEnvtest(root string) *envtest.Environment {
	binDir, _ := testbin.Dir()
	return &envtest.Environment{
		BinaryAssetsDirectory: binDir,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(root, "config", "webhook", "manifests.yaml")},
		},
	}
}

// webhookArgs has the operator serve its webhook where envtest's
// configuration points, with envtest's certificate (as under OLM, which
// provides the certificate).
func webhookArgs(env *envtest.Environment) []string {
	wh := env.WebhookInstallOptions
	return []string{"--webhook-port", strconv.Itoa(wh.LocalServingPort), "--webhook-cert-dir", wh.LocalServingCertDir,
		"--webhook-cert-managed=false"}
}

func startEnvtest(b *testing.B, env *envtest.Environment) {
	b.Helper()
	toolPath(b, "kube-apiserver")
	toolPath(b, "etcd")
	if _, err := env.Start(); err != nil {
		b.Fatalf("start envtest from %s: %v", env.BinaryAssetsDirectory, err)
	}
	b.Cleanup(func() {
		if err := env.Stop(); err != nil {
			b.Logf("stop envtest: %v", err)
		}
	})
}

// adminUser adds a user in system:masters, as a cluster admin would run the
// operator and the controller manager.
func adminUser(b *testing.B, env *envtest.Environment, name string) *rest.Config {
	b.Helper()
	u, err := env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		b.Fatalf("add user %s: %v", name, err)
	}
	return u.Config()
}

// writeKubeconfig writes cfg as a kubeconfig file: server, CA and client
// certificate are all an envtest user has.
func writeKubeconfig(b *testing.B, path string, cfg *rest.Config) string {
	b.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["bench"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	kc.CurrentContext = "bench"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		b.Fatalf("write kubeconfig: %v", err)
	}
	return path
}

// startControllerManager runs the real kube-controller-manager with only the
// controllers the operator's children need: StatefulSets get their pods
// (which stay Pending: there is no scheduler or kubelet), and owner
// references are honoured.
func startControllerManager(b *testing.B, dir string, cfg *rest.Config) *process {
	b.Helper()
	bin := toolPath(b, "kube-controller-manager")
	kc := writeKubeconfig(b, filepath.Join(dir, "kcm.kubeconfig"), cfg)
	return start(b, dir, "kube-controller-manager", nil, bin,
		"--kubeconfig", kc, "--controllers=statefulset,garbagecollector",
		"--leader-elect=false", "--use-service-account-credentials=false", "--secure-port=0")
}

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// benchWatches copies the repository's watches.yaml with reconcilePeriod
// set to 1m, the smallest the operator accepts: the worst case of the
// periodic resync, so that an idle window of minutes holds resync passes.
// workers > 0 overrides maxConcurrentReconciles. It returns the file and
// the worker count the operator will run.
func benchWatches(b *testing.B, root, dir string, workers int) (string, int) {
	b.Helper()
	data, err := os.ReadFile(filepath.Join(root, "watches.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	var entries []map[string]any
	if err := yaml.Unmarshal(data, &entries); err != nil {
		b.Fatalf("watches.yaml: %v", err)
	}
	used := 1 // the operator's default when the entry leaves it out
	for _, e := range entries {
		e["reconcilePeriod"] = resyncPeriod.String()
		if workers > 0 {
			e["maxConcurrentReconciles"] = workers
		}
		if n, ok := e["maxConcurrentReconciles"].(float64); ok {
			used = int(n)
		} else if n, ok := e["maxConcurrentReconciles"].(int); ok {
			used = n
		}
	}
	out, err := yaml.Marshal(entries)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "watches.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		b.Fatal(err)
	}
	return path, used
}

// resyncPeriod is the reconcilePeriod the benchmark gives the operator.
const resyncPeriod = time.Minute

// operator is the running manager and where to reach its endpoints.
type operator struct {
	*process
	metricsURL   string
	metricsToken string // a metrics reader's
	pprofURL     string
	workers      int
}

// startOperator runs the built manager against kubeconfig, with extra
// flags after the benchmark's, and waits until its controller has started
// its workers.
func startOperator(b *testing.B, bin, dir, kubeconfig, watches, metricsToken string, extra ...string) *operator {
	b.Helper()
	metrics, probe, pprof := freeAddr(b), freeAddr(b), freeAddr(b)
	args := append([]string{"--metrics-bind-address", metrics, "--health-probe-bind-address", probe, "--pprof-bind-address", pprof,
		"--operator-namespace", operatorNamespace,
		"--operator-image", "example.invalid/openbao-operator:bench", "--wrapper-image", "example.invalid/bao-wrapper:bench",
		"--watches-file", watches}, extra...)
	p := start(b, dir, "operator", []string{"KUBECONFIG=" + kubeconfig}, bin, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Every controller logs it; the cluster controller's names its count.
	line, err := p.waitForLine(ctx, "Starting workers", `"controller":"`+reconcileControllerID+`"`)
	if err != nil {
		b.Fatalf("%v\noperator log tail:\n%s", err, p.tail(40))
	}
	op := &operator{process: p, metricsURL: "https://" + metrics + "/metrics", metricsToken: metricsToken,
		pprofURL: "http://" + pprof + "/debug/pprof/"}
	op.workers = workerCount(line)
	if err := waitHTTP(ctx, op.metricsURL, metricsToken); err != nil {
		b.Fatalf("operator metrics: %v\noperator log tail:\n%s", err, p.tail(40))
	}
	return op
}

// logHeap logs the largest holders of the operator's heap (after a
// collection): where its memory goes, for the reader of a run's log.
func (op *operator) logHeap(b *testing.B, dir string) {
	b.Helper()
	file := filepath.Join(dir, "operator-heap.pprof")
	if err := download(op.pprofURL+"heap?gc=1", file); err != nil {
		b.Logf("no heap profile of the operator: %v", err)
		return
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=inuse_space", "-nodecount=25", file).CombinedOutput()
	if err != nil {
		b.Logf("go tool pprof: %v: %s", err, out)
		return
	}
	b.Logf("the operator's heap at the end (%s):\n%s", file, out)
}

func download(url, file string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o600)
}

// workerCount reads controller-runtime's "Starting workers" log line.
func workerCount(line string) int {
	var entry struct {
		Count int `json:"worker count"`
	}
	if err := yaml.Unmarshal([]byte(line), &entry); err != nil {
		return 0
	}
	return entry.Count
}

func waitHTTP(ctx context.Context, url, token string) error {
	for {
		resp, err := getMetrics(ctx, url, token)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", url, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// procStatus reads the kernel's resident-set figures of pid, in bytes:
// VmHWM is the peak since the process started, VmRSS the current size.
func procStatus(pid int) (hwm, rss float64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		var kb float64
		if n, _ := fmt.Sscanf(string(line), "VmHWM: %f kB", &kb); n == 1 {
			hwm = kb * 1024
		}
		if n, _ := fmt.Sscanf(string(line), "VmRSS: %f kB", &kb); n == 1 {
			rss = kb * 1024
		}
	}
	if hwm == 0 || rss == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status has no VmHWM or VmRSS", pid)
	}
	return hwm, rss, nil
}
