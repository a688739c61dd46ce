package e2e_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/test/localnode"
)

// goneLogs holds the logs of pods a test deleted (the managers it killed):
// a kill must not take the evidence with it.
var goneLogs goneLogsT

type goneLogsT struct {
	sync.Mutex
	dir   string // where writeLocked keeps them on disk
	byPod map[string]string
	order []string // pods in the order their logs were kept
}

// operatorLogs is every manager's log of the run: the killed ones in the
// order they were killed, then the running one's. A test reading the
// operator's audit lines reads them all: a parallel test may kill the
// operator between an act and the check of its line.
func operatorLogs(ctx context.Context, t testing.TB, cl client.Client) string {
	t.Helper()
	current := podLogs(ctx, t, clientset(t), managerPod(ctx, t, cl))
	goneLogs.Lock()
	defer goneLogs.Unlock()
	var all strings.Builder
	for _, pod := range goneLogs.order {
		all.WriteString(goneLogs.byPod[pod])
	}
	all.WriteString(current)
	return all.String()
}

// keepLogsOf follows every container log of a pod that is about to go,
// from its start, and returns a func to call once the pod was told to go:
// it waits until the streams end with the containers (bounded) and keeps
// what they carried, up to the last line written before the kill.
func keepLogsOf(ctx context.Context, t testing.TB, pod *corev1.Pod) (kept func()) {
	t.Helper()
	cs := clientset(t)
	type stream struct {
		body io.ReadCloser
		text bytes.Buffer
		done chan struct{}
	}
	var streams []*stream
	var previous strings.Builder
	for _, st := range pod.Status.ContainerStatuses {
		// A container that exited by itself (a crash, a failed start) took
		// its log along: the one before the current is kept too.
		if st.RestartCount > 0 {
			out, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: st.Name, Previous: true}).DoRaw(ctx)
			fmt.Fprintf(&previous, "--- %s: the container before restart %d (%v) ---\n%s--- the current container ---\n", st.Name, st.RestartCount, err, out)
		}
	}
	for _, c := range pod.Spec.Containers {
		body, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name, Follow: true}).Stream(ctx)
		if err != nil {
			t.Fatalf("follow the log of %s/%s: %v", pod.Name, c.Name, err)
		}
		s := &stream{body: body, done: make(chan struct{})}
		go func() { _, _ = io.Copy(&s.text, body); close(s.done) }()
		streams = append(streams, s)
	}
	return func() {
		var text strings.Builder
		text.WriteString(previous.String())
		for _, s := range streams {
			select {
			case <-s.done:
			case <-time.After(20 * time.Second):
				_ = s.body.Close()
				<-s.done
			}
			text.Write(s.text.Bytes())
		}
		goneLogs.Lock()
		defer goneLogs.Unlock()
		if goneLogs.byPod == nil {
			goneLogs.byPod = map[string]string{}
		}
		key := pod.Namespace + "/" + pod.Name
		if _, seen := goneLogs.byPod[key]; !seen {
			goneLogs.order = append(goneLogs.order, key)
		}
		goneLogs.byPod[key] += text.String()
		goneLogs.writeLocked(key)
	}
}

// writeLocked keeps a gone pod's log on disk too, so that a failed run
// can be read after the fact (the node's pod logs go with their pods);
// TestMain removes the directory after a run that passed.
func (g *goneLogsT) writeLocked(key string) {
	if g.dir == "" {
		dir, err := os.MkdirTemp("", "e2e-gone-pod-logs-")
		if err != nil {
			return
		}
		g.dir = dir
	}
	_ = os.WriteFile(filepath.Join(g.dir, strings.ReplaceAll(key, "/", "_")+".log"), []byte(g.byPod[key]), 0o600)
}

// keepGoneLogs removes the gone pods' logs after a run that passed, and
// says where they are after one that failed.
func keepGoneLogs(code int) {
	goneLogs.Lock()
	defer goneLogs.Unlock()
	switch {
	case goneLogs.dir == "":
	case code == 0:
		_ = os.RemoveAll(goneLogs.dir)
	default:
		logf("logs of the managers the tests killed kept in %s", goneLogs.dir)
	}
}

// assertNoLeaks fails the test when a secret value of namespace ns (every
// Secret's data but public certificates), or one of extra (by what it is),
// appears in any log the run can read (the operator's, including managers
// the test killed, and every container of every pod in ns, current and
// previous), in an Event of ns or of the operator's namespace, or in the
// status of an OpenBao resource in ns. Each value is looked for as it is,
// in base64 and in hex; a PEM key by each line of its body. Every e2e test
// that forms a cluster calls it at its end.
func assertNoLeaks(ctx context.Context, t *testing.T, cl client.Client, ns string, extra map[string]string) {
	t.Helper()
	values := secretValues(ctx, t, cl, ns)
	for what, v := range extra {
		values[what] = formsOf([]byte(v))
	}
	if len(values) == 0 {
		t.Fatalf("no secret values to look for in %s", ns)
	}
	sources := leakSources(ctx, t, cl, ns)
	found := 0
	for _, where := range slices.Sorted(maps.Keys(sources)) {
		for what, forms := range values {
			for _, form := range forms {
				if strings.Contains(sources[where], form) {
					t.Errorf("%s appears in %s", what, where)
					found++
					break
				}
			}
		}
	}
	logf("leak scan of %s: %d secret values in %d sources (logs, events, statuses): %d found", ns, len(values), len(sources), found)
}

// secretValues reads the values of every Secret in ns, by where they are.
func secretValues(ctx context.Context, t *testing.T, cl client.Client, ns string) map[string][]string {
	t.Helper()
	secrets := &corev1.SecretList{}
	if err := cl.List(ctx, secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, s := range secrets.Items {
		for key, v := range s.Data {
			if strings.HasSuffix(key, ".crt") {
				continue // certificates are public
			}
			if forms := formsOf(v); len(forms) > 0 {
				out[fmt.Sprintf("Secret %s key %s", s.Name, key)] = forms
			}
		}
	}
	return out
}

// formsOf is how a value could show up in text; values under 8 bytes are
// too short to look for without false alarms.
func formsOf(v []byte) []string {
	v = bytes.TrimSpace(v)
	if len(v) < 8 {
		return nil
	}
	if bytes.HasPrefix(v, []byte("-----BEGIN")) {
		var lines []string
		for _, line := range strings.Split(string(v), "\n") {
			if line = strings.TrimSpace(line); len(line) >= 32 && !strings.HasPrefix(line, "-----") {
				lines = append(lines, line)
			}
		}
		return lines
	}
	forms := []string{base64.StdEncoding.EncodeToString(v), hex.EncodeToString(v)}
	if utf8.Valid(v) && !bytes.ContainsAny(v, "\x00") {
		forms = append(forms, string(v))
	}
	return forms
}

// leakSources reads everything a secret must never reach, by name.
func leakSources(ctx context.Context, t *testing.T, cl client.Client, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	cs := clientset(t)
	for _, namespace := range []string{ns, localnode.OperatorNamespace} {
		pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			out["the logs of "+namespace+"/"+pods.Items[i].Name] = podLogs(ctx, t, cs, &pods.Items[i])
		}
		events, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for _, e := range events.Items {
			fmt.Fprintf(&text, "%s %s\n", e.Reason, e.Message)
		}
		out["the events of "+namespace] = text.String()
	}
	goneLogs.Lock()
	for pod, text := range goneLogs.byPod {
		out["the logs of deleted pod "+pod] = text
	}
	goneLogs.Unlock()
	for _, kind := range []string{"OpenBaoCluster", "OpenBaoBackup"} {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("openbao.org/v1alpha1")
		list.SetKind(kind + "List")
		if err := cl.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, item := range list.Items {
			out["the status of "+kind+" "+item.GetName()] = fmt.Sprint(item.Object["status"])
		}
	}
	return out
}

// podLogs reads every container's log of a pod, the previous run's too.
func podLogs(ctx context.Context, t testing.TB, cs kubernetes.Interface, pod *corev1.Pod) string {
	t.Helper()
	var text strings.Builder
	containers := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range containers {
		for _, previous := range []bool{false, true} {
			out, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name, Previous: previous}).DoRaw(ctx)
			if err == nil { // a container that never ran, or never restarted, has no such log
				text.Write(out)
			}
		}
	}
	return text.String()
}

func clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cfg, err := node.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
