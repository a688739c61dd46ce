package e2e_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/test/localnode"
)

// The tests in this file check the node itself: what the operator's
// clusters will rely on (cluster DNS, dynamic volumes, the OpenBao image).

func TestClusterDNSResolvesTheKubernetesService(t *testing.T) {
	requireNode(t)
	t.Parallel()
	// The host reaches the kube-dns ClusterIP through kube-proxy's rules.
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(node.DNSIP, "53"))
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := r.LookupHost(ctx, "kubernetes.default.svc.cluster.local")
	if err != nil {
		t.Fatalf("resolve through %s: %v", node.DNSIP, err)
	}
	if len(addrs) != 1 || addrs[0] != node.APIServerIP {
		t.Errorf("kubernetes.default resolves to %v, want [%s]", addrs, node.APIServerIP)
	}
}

// TestAServiceAddressWithoutEndpointsIsRefusedOnTheNode: a connection to
// an address of the Service range that no endpoint answers is refused on
// the node at once; it never follows the host's default route off the
// machine (where, before the harness's guard, another host answered).
func TestAServiceAddressWithoutEndpointsIsRefusedOnTheNode(t *testing.T) {
	requireNode(t)
	t.Parallel()
	_, cidr, err := net.ParseCIDR(node.ServiceCIDR)
	if err != nil {
		t.Fatal(err)
	}
	last := slices.Clone(cidr.IP.To4())
	for i := range last {
		last[i] |= ^cidr.Mask[i]
	}
	last[3]-- // the broadcast address less one: no Service holds it
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(last.String(), "8200"), 5*time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("a connection to %s:8200, which no Service holds, was answered", last)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a connection to %s:8200, which no Service holds: %v, want it refused on the node", last, err)
	}
}

func TestDefaultStorageClassBindsAClaim(t *testing.T) {
	requireNode(t)
	t.Parallel()
	cl, err := node.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := createNamespace(ctx, t, cl, "e2e-storage")
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := cl.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, 60*time.Second, "claim bound", func() (bool, string) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, err.Error()
		}
		return pvc.Status.Phase == corev1.ClaimBound, string(pvc.Status.Phase)
	})
}

func TestOpenBaoImageRunsUnderRestrictedPodSecurity(t *testing.T) {
	installOperator(t) // imports the OpenBao image
	t.Parallel()
	built, err := localnode.BuildImages(node, localnode.ImageOpenBao)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := node.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := createNamespace(ctx, t, cl, "e2e-openbao-image")
	pod := restrictedPod(ns, "bao-version", built[localnode.ImageOpenBao].Ref, "/bin/bao", "version")
	if err := cl.Create(ctx, pod); err != nil {
		t.Fatalf("create pod (restricted level enforced): %v", err)
	}
	waitFor(ctx, t, 60*time.Second, "bao version to succeed", func() (bool, string) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error()
		}
		if pod.Status.Phase == corev1.PodFailed {
			t.Fatalf("bao version failed: %+v", pod.Status.ContainerStatuses)
		}
		return pod.Status.Phase == corev1.PodSucceeded, string(pod.Status.Phase)
	})
	// The log comes from kubelet through the API server, which checks that
	// path of the node too.
	cs, err := kubernetes.NewForConfig(mustRESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	out, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("read log of %s: %v", pod.Name, err)
	}
	if !strings.Contains(string(out), "OpenBao v2.4.0") {
		t.Errorf("bao version printed %q, want OpenBao v2.4.0", out)
	}
}

func mustRESTConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := node.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// restrictedPod is a one-shot pod that satisfies the restricted level
// without pinning a UID: the image's numeric user applies.
func restrictedPod(ns, name, image string, command ...string) *corev1.Pod {
	yes, no := true, false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Command:         command,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// createNamespace creates a namespace that enforces the restricted level,
// hands it to the operator (an OpenBaoTenant), and deletes both when the
// test ends, unless it is gone already (a benchmark
// deletes its namespaces as it goes). The name is generated: on a reused
// node the namespace of a previous run may still be terminating.
func createNamespace(ctx context.Context, t testing.TB, cl client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: prefix + "-",
		Labels:       map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}
	if err := cl.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace %s*: %v", prefix, err)
	}
	t.Cleanup(func() {
		deleteNamespace(context.Background(), t, cl, ns.Name)
		if err := localnode.Unprovision(context.Background(), cl, ns.Name); err != nil {
			t.Error(err)
		}
	})
	if err := localnode.Provision(ctx, cl, ns.Name); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func waitFor(ctx context.Context, t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	waitEvery(ctx, t, 200*time.Millisecond, timeout, what, cond)
}

// waitEvery is waitFor with its own poll interval, for waits whose end is
// being timed and must be seen sooner than 200 ms.
func waitEvery(ctx context.Context, t testing.TB, every, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		select {
		case <-ctx.Done():
			t.Fatalf("wait for %s: %v", what, ctx.Err())
		case <-time.After(every):
		}
	}
	t.Fatalf("wait for %s: not within %s (last: %s)", what, timeout, last)
}
