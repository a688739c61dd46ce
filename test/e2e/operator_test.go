package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/test/localnode"
)

var (
	installOnce sync.Once
	installErr  error
)

// installOperator installs the operator once per run; every test that
// needs it calls this first.
func installOperator(t testing.TB) client.Client {
	t.Helper()
	requireNode(t)
	installOnce.Do(func() {
		var tm localnode.OperatorTimings
		tm, installErr = localnode.InstallOperator(context.Background(), node, logf)
		if installErr == nil {
			logf("operator images built in %s, imported in %s, helm install %s, Ready %s after helm started", tm.Build, tm.Import, tm.Helm, tm.Ready)
		}
	})
	if installErr != nil {
		t.Fatalf("install operator: %v", installErr)
	}
	cl, err := node.Client()
	if err != nil {
		t.Fatal(err)
	}
	return webhookRetrying{cl}
}

// breakGlassClient acts as an administrator in the group that the lock of
// config/admission lets change what the operator manages: tests that stand
// for a hand edit (a deleted certificate, objects applied by a bare script
// with no operator) act through it.
func breakGlassClient(t testing.TB) client.Client {
	t.Helper()
	cfg, err := node.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "e2e-break-glass",
		Groups: []string{v1alpha1.BreakGlassGroup, "system:masters"}}
	cl, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func TestOperatorRunsReadyAsNonRootUnderRestrictedPodSecurity(t *testing.T) {
	cl := installOperator(t)
	t.Parallel()
	ctx := context.Background()

	var ns corev1.Namespace
	if err := cl.Get(ctx, client.ObjectKey{Name: localnode.OperatorNamespace}, &ns); err != nil {
		t.Fatal(err)
	}
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Errorf("namespace %s enforce label = %q, want restricted", ns.Name, got)
	}

	pod := managerPod(ctx, t, cl)
	if !podReady(pod) {
		t.Errorf("manager pod %s not Ready: %+v", pod.Name, pod.Status.Conditions)
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsUser != nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and no pinned runAsUser", sc)
	}
	uid, err := containerUID(pod, localnode.ManagerContainer)
	if err != nil {
		t.Fatal(err)
	}
	if uid == 0 {
		t.Errorf("manager process runs as UID 0")
	}
	t.Logf("manager pod %s Ready, process UID %d", pod.Name, uid)
}

func TestRestrictedNamespaceRejectsARootPod(t *testing.T) {
	cl := installOperator(t)
	t.Parallel()
	root := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "root-probe", Namespace: localnode.OperatorNamespace},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: &root},
			Containers:      []corev1.Container{{Name: "c", Image: "localhost/pause:any"}},
		},
	}
	err := cl.Create(context.Background(), pod, client.DryRunAll)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "restricted") {
		t.Errorf("dry-run create of a root pod in %s: %v; want Forbidden by PodSecurity restricted", pod.Namespace, err)
	}
}

func managerPod(ctx context.Context, t testing.TB, cl client.Client) *corev1.Pod {
	t.Helper()
	var ready *corev1.Pod
	// A parallel test may have just killed the manager: its successor is
	// the one, once Ready.
	waitFor(ctx, t, 2*time.Minute, "one Ready manager pod", func() (bool, string) {
		var pods corev1.PodList
		err := cl.List(ctx, &pods, client.InNamespace(localnode.OperatorNamespace),
			client.MatchingLabels{"control-plane": "controller-manager"})
		if err != nil {
			return false, err.Error()
		}
		var running []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				running = append(running, p)
			}
		}
		if len(running) != 1 || !podReady(&running[0]) {
			return false, fmt.Sprintf("%d manager pods not being deleted, the first Ready: %t", len(running),
				len(running) > 0 && podReady(&running[0]))
		}
		ready = &running[0]
		return true, ""
	})
	return ready
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// containerUID reads the real UID of the container's process from /proc:
// the node runs on this machine, so the process whose cgroup names the
// container's ID is the manager itself.
func containerUID(p *corev1.Pod, container string) (int, error) {
	var id string
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			id = strings.TrimPrefix(s.ContainerID, "containerd://")
		}
	}
	if id == "" {
		return 0, fmt.Errorf("container %s of pod %s has no container ID", container, p.Name)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if uid, ok := uidOfCgroup(id); ok {
			return uid, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return 0, fmt.Errorf("no process in the cgroup of container %s", id)
}

func uidOfCgroup(id string) (int, bool) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if !strings.Contains(string(cg), id) {
			continue
		}
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
				uid, err := strconv.Atoi(f[1])
				return uid, err == nil
			}
		}
	}
	return 0, false
}

// TestTheOperatorsHeapAimsBelowItsContainersLimit: the manager sets the Go
// runtime's soft memory limit from its container's cgroup, so that its
// heap is collected before the kernel kills it for memory.
func TestTheOperatorsHeapAimsBelowItsContainersLimit(t *testing.T) {
	cl := installOperator(t)
	t.Parallel()
	ctx := context.Background()
	pod := managerPod(ctx, t, cl)
	var limit int64
	for _, c := range pod.Spec.Containers {
		if c.Name == "manager" {
			limit = c.Resources.Limits.Memory().Value()
		}
	}
	if limit == 0 {
		t.Fatalf("the manager container of %s has no memory limit", pod.Name)
	}
	sc := bufio.NewScanner(strings.NewReader(podLogs(ctx, t, clientset(t), pod)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg       string `json:"msg"`
			Limit     int64  `json:"limitBytes"`
			Container int64  `json:"containerLimitBytes"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "soft memory limit set from the container's" {
			continue
		}
		if line.Container != limit || line.Limit != limit-limit/10 {
			t.Fatalf("soft memory limit %d of %d, want 90%% of the container's %d", line.Limit, line.Container, limit)
		}
		return
	}
	t.Fatalf("the manager %s did not log its soft memory limit (its container's limit: %d bytes)", pod.Name, limit)
}
