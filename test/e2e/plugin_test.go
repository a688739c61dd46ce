package e2e_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/images"
)

// pluginStatusAndReport runs the kubectl-openbao binary as a user would,
// with the node's kubeconfig, against a formed 3-server cluster: status
// must name the active server and three Raft voters with the
// certificate's expiry; the support bundle report writes must carry the
// operator's logs and no value of any Secret of the namespace. It
// returns the binary, for the commands that follow.
func pluginStatusAndReport(ctx context.Context, t *testing.T, cl client.Client, ns string) string {
	t.Helper()
	bin := buildPlugin(t)
	var status string
	waitFor(ctx, t, 2*time.Minute, "kubectl openbao status to show the leader and 3 voters", func() (bool, string) {
		status = runPlugin(t, bin, "status", "bao", "-n", ns)
		roles := serverRoles(status)
		return roles["leader"] == 1 && roles["leader"]+roles["voter"] == replicas && roles["active"] == 1, status
	})
	if !strings.Contains(status, "Certificate (server):") || strings.Contains(status, "Certificate (server):  -") {
		t.Errorf("status shows no server certificate expiry:\n%s", status)
	}
	logf("kubectl openbao status:\n%s", status)

	out := filepath.Join(t.TempDir(), "report.tar.gz")
	runPlugin(t, bin, "report", "bao", "-n", ns, "--file", out)
	files := untar(t, out)
	var operatorLogs int
	for name := range files {
		if strings.Contains(name, "log") && strings.Contains(name, "operator") {
			operatorLogs++
		}
	}
	if operatorLogs == 0 {
		t.Errorf("the report holds no operator log; files: %v", slices.Sorted(maps.Keys(files)))
	}
	for what, forms := range secretValues(ctx, t, cl, ns) {
		for name, data := range files {
			for _, form := range forms {
				if bytes.Contains(data, []byte(form)) {
					t.Errorf("%s is in the report's %s", what, name)
				}
			}
		}
	}
	logf("kubectl openbao report: %d files, %d operator logs, no Secret value", len(files), operatorLogs)
	return bin
}

func buildPlugin(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-openbao")
	if err := images.GoBuild(node.RepoRoot, "./cmd/kubectl-openbao", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// serverRoles counts the roles in status's server table (SERVER ROLE
// SEALED READY RAFT ...): active or standby, and leader or voter.
func serverRoles(status string) map[string]int {
	roles := map[string]int{}
	for _, line := range strings.Split(status, "\n") {
		if f := strings.Fields(line); len(f) >= 5 && strings.HasPrefix(f[0], "bao-") {
			roles[f[1]]++
			roles[f[4]]++
		}
	}
	return roles
}

// runPlugin runs the plugin with the node's kubeconfig and returns its
// output; a failure fails the test. A run whose write the API server could
// not send to the operator's webhook (a parallel test killed the operator)
// wrote nothing, and runs again, as a user would run it again, for up to
// webhookDownFor.
func runPlugin(t testing.TB, bin string, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(webhookDownFor)
	for {
		cmd := exec.Command(bin, append(args, "--kubeconfig", node.Kubeconfig())...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			return string(out)
		}
		if !strings.Contains(string(out), "failed calling webhook") || time.Now().After(deadline) {
			t.Fatalf("kubectl-openbao %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		logf("kubectl-openbao %s: the operator's webhook did not answer; running it again", strings.Join(args, " "))
		time.Sleep(time.Second)
	}
}

func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if files[hdr.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

// pluginLogs: after `step-down`, `logs --operator` prints each server's
// lines under its pod's name and, of the operator's log, only lines
// about this cluster (other tests' clusters run beside it), among them
// the audit line of the step-down.
func pluginLogs(ctx context.Context, t *testing.T, bin, ns string) {
	t.Helper()
	logf("kubectl openbao step-down: %s", strings.TrimSpace(runPlugin(t, bin, "step-down", "bao", "-n", ns)))
	var stdout, stderr bytes.Buffer
	waitFor(ctx, t, 3*time.Minute, "the step-down's audit line in kubectl openbao logs --operator", func() (bool, string) {
		stdout.Reset()
		stderr.Reset()
		cmd := exec.Command(bin, "logs", "bao", "-n", ns, "--since", "30m", "--tail", "20", "--operator", "--kubeconfig", node.Kubeconfig())
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return false, err.Error() + ": " + stderr.String()
		}
		return strings.Contains(stdout.String(), `"event_type":"openbao.raft.step_down`), stderr.String()
	})
	if stderr.Len() != 0 {
		logf("kubectl openbao logs notes: %s", stderr.String()) // an operator pod being replaced has no log yet
	}
	servers, operator := map[string]int{}, 0
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		prefix, rest, _ := strings.Cut(line, "] ")
		switch {
		case strings.HasPrefix(prefix, "[operator/"):
			operator++
			var keys struct{ Namespace, Name string }
			if err := json.Unmarshal([]byte(rest), &keys); err != nil || keys.Namespace != ns || keys.Name != "bao" {
				t.Errorf("an operator line not about %s/bao: %s", ns, line)
			}
		case strings.HasPrefix(prefix, "[bao-"):
			servers[strings.TrimPrefix(prefix, "[")]++
		default:
			t.Errorf("a line without a pod prefix: %q", line)
		}
	}
	if len(servers) != replicas || operator == 0 {
		t.Errorf("logs: lines per server %v, %d operator lines:\n%.2000s", servers, operator, stdout.String())
	}
	logf("kubectl openbao logs --operator: lines per server %v, %d operator lines about %s/bao", servers, operator, ns)
}

// pluginBaoEnv runs `bao-env` in the background as a user would, then
// uses its BAO_ADDR and BAO_CACERT (and BAO_TLS_SERVER_NAME when printed)
// to GET sys/health through the port-forward: 200 means the active,
// unsealed server answered and the certificate verified. Ctrl-C (SIGINT)
// stops it cleanly.
func pluginBaoEnv(t *testing.T, bin, ns string) {
	t.Helper()
	cmd := exec.Command(bin, "bao-env", "bao", "-n", ns, "--kubeconfig", node.Kubeconfig())
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
	// One pipe for stdout and stderr keeps their order: the exports come
	// before the note that it forwards until Ctrl-C.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer func() { _ = cmd.Process.Kill() }()
	env, lines := map[string]string{}, []string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() && !strings.Contains(sc.Text(), "Ctrl-C") {
		lines = append(lines, sc.Text())
		if k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "="); ok && strings.HasPrefix(sc.Text(), "export ") {
			env[k] = v
		}
	}
	if env["BAO_ADDR"] == "" || env["BAO_CACERT"] == "" {
		t.Fatalf("bao-env printed no BAO_ADDR and BAO_CACERT:\n%s", strings.Join(lines, "\n"))
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	pemBytes, err := os.ReadFile(env["BAO_CACERT"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) || bytes.Contains(pemBytes, []byte("PRIVATE KEY")) {
		t.Fatalf("BAO_CACERT %s: not only certificates:\n%s", env["BAO_CACERT"], pemBytes)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: env["BAO_TLS_SERVER_NAME"], MinVersion: tls.VersionTLS12}}}
	resp, err := hc.Get(env["BAO_ADDR"] + "/v1/sys/health")
	if err != nil {
		t.Fatalf("GET sys/health with bao-env's exports %v: %v", env, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET sys/health through bao-env: %s %s (200 is the active, unsealed server)", resp.Status, body)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("bao-env after Ctrl-C: %v", err)
	}
	logf("kubectl openbao bao-env: %v; sys/health %s", env, resp.Status)
}

// pluginRestoreBackup creates the OpenBaoRestore name of backup b with
// `kubectl openbao restore --backup --yes` (stdin is no terminal): it
// must say which snapshot it restores and create a restore of b's key,
// checked against b's digest, and not forced.
func pluginRestoreBackup(ctx context.Context, t *testing.T, cl client.Client, bin, ns string, b *v1alpha1.OpenBaoBackup, name string) *v1alpha1.OpenBaoRestore {
	t.Helper()
	out := runPlugin(t, bin, "restore", "bao", "-n", ns, "--backup", b.Name, "--name", name, "--yes")
	for _, want := range []string{b.Status.Key, "LOST", "kubectl get openbaorestore -n " + ns + " " + name + " -w"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl openbao restore --backup %s does not say %q:\n%s", b.Name, want, out)
		}
	}
	rs := &v1alpha1.OpenBaoRestore{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rs); err != nil {
		t.Fatal(err)
	}
	if rs.Spec.ClusterName != "bao" || rs.Spec.Source != (v1alpha1.RestoreSource{Key: b.Status.Key}) ||
		rs.Spec.ExpectedSHA256 != b.Status.SHA256 || rs.Spec.Force {
		t.Fatalf("kubectl openbao restore --backup %s created %+v", b.Name, rs.Spec)
	}
	logf("kubectl openbao restore --backup %s created %s", b.Name, name)
	return rs
}

// pluginRestart runs `kubectl openbao restart bao`, which sets
// spec.restartRequest; the caller watches the rollout it starts.
func pluginRestart(t *testing.T, bin, ns string) {
	t.Helper()
	out := runPlugin(t, bin, "restart", "bao", "-n", ns)
	if !strings.Contains(out, "spec.restartRequest=") {
		t.Errorf("kubectl openbao restart does not say what it asked:\n%s", out)
	}
	logf("kubectl openbao restart: %s", strings.TrimSpace(out))
}

// waitRestartCompleted waits for status.restart to show the request in
// spec.restartRequest carried out, and every server's pod to carry it.
func waitRestartCompleted(ctx context.Context, t *testing.T, cl client.Client, ns string) {
	t.Helper()
	var request string
	waitFor(ctx, t, time.Minute, "status.restart.completedTime", func() (bool, string) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("openbao.org/v1alpha1")
		u.SetKind("OpenBaoCluster")
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, u); err != nil {
			return false, err.Error()
		}
		request, _, _ = unstructured.NestedString(u.Object, "spec", "restartRequest")
		handled, _, _ := unstructured.NestedString(u.Object, "status", "restart", "request")
		completed, _, _ := unstructured.NestedString(u.Object, "status", "restart", "completedTime")
		return request != "" && handled == request && completed != "", fmt.Sprint(u.Object["status"])
	})
	for _, p := range serverPods(ctx, t, cl, ns, replicas) {
		if got := p.Annotations[v1alpha1.AnnotationRestartRequest]; got != request {
			t.Errorf("%s carries restart request %q, want %q", p.Name, got, request)
		}
	}
}

// pluginRotateCerts runs `kubectl openbao rotate-certs bao --wait`: every
// server then serves a new certificate, without a restart.
func pluginRotateCerts(ctx context.Context, t *testing.T, cl client.Client, bin, ns string, caPEM []byte) {
	t.Helper()
	pods := serverPods(ctx, t, cl, ns, replicas)
	before := map[string]*x509.Certificate{}
	for _, p := range pods {
		before[p.Name] = servedCertificate(t, p.Status.PodIP, dnsName(p, ns), caPEM)
	}
	out := runPlugin(t, bin, "rotate-certs", "bao", "-n", ns, "--wait", "--timeout", "2m")
	if !strings.Contains(out, "spec.tls.rotateRequest=") || !strings.Contains(out, "reissued") {
		t.Errorf("kubectl openbao rotate-certs --wait:\n%s", out)
	}
	for _, p := range pods {
		waitFor(ctx, t, 3*time.Minute, p.Name+" to serve the certificate rotate-certs asked for", func() (bool, string) {
			got := servedCertificate(t, p.Status.PodIP, dnsName(p, ns), caPEM)
			return got.SerialNumber.Cmp(before[p.Name].SerialNumber) != 0, "still serial " + got.SerialNumber.String()
		})
	}
	for _, p := range serverPods(ctx, t, cl, ns, replicas) {
		if was := podByName(pods, p.Name); p.UID != was.UID || restarts(&p) != restarts(was) {
			t.Errorf("%s was restarted for the rotation rotate-certs asked for", p.Name)
		}
	}
	logf("kubectl openbao rotate-certs: all %d servers serve a new certificate without a restart", replicas)
}
