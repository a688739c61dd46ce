package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/test/localnode"
)

// TestSelfInitClusterFormsWithoutARootToken: with self-init the servers
// initialize themselves from their config; the operator detects it through
// the service-registration labels, scales out, and never holds a token.
func TestSelfInitClusterFormsWithoutARootToken(t *testing.T) {
	cl := installOperator(t)
	ctx := context.Background()
	ns := createNamespace(ctx, t, cl, "e2e-selfinit")
	createClusterWith(ctx, t, cl, ns, "bao", map[string]any{
		"enabled": true,
		"requests": []any{map[string]any{
			"name": "enable-kv", "operation": "update", "path": "sys/mounts/secret",
			"data": map[string]any{"type": "kv", "options": map[string]any{"version": "2"}},
		}},
	})
	waitFor(ctx, t, 5*time.Minute, "phase Running with 3 ready servers", func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "bao")
		return st["phase"] == "Running" && fmt.Sprint(st["readyReplicas"]) == fmt.Sprint(replicas), fmt.Sprint(st)
	})
	if st := clusterStatus(ctx, t, cl, ns, "bao"); st["selfInitialized"] != true || st["initialized"] != true {
		t.Fatalf("status %v, want initialized and selfInitialized", st)
	}
	err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao-root-token"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("a self-initialized cluster has a root-token Secret (%v)", err)
	}
	// pod-0 read the requests from Secret bao-self-init; once they ran, the
	// operator deletes it.
	waitFor(ctx, t, time.Minute, "Secret bao-self-init to be deleted", func() (bool, string) {
		err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao-self-init"}, &corev1.Secret{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	// Without a token the Raft configuration cannot be read; the labels
	// show all three servers unsealed in one cluster: one active, two standby.
	active, standby := 0, 0
	for _, p := range serverPods(ctx, t, cl, ns, replicas) {
		if p.Labels["openbao-initialized"] != "true" || p.Labels["openbao-sealed"] != "false" {
			t.Errorf("%s: labels %v, want initialized and unsealed", p.Name, p.Labels)
		}
		if p.Labels["openbao-active"] == "true" {
			active++
		} else {
			standby++
		}
	}
	if active != 1 || standby != replicas-1 {
		t.Fatalf("%d active and %d standby servers, want 1 and %d", active, standby, replicas-1)
	}
	assertNoLeaks(ctx, t, cl, ns, nil)
}

// TestOperatorKilledDuringBootstrapStillInitializesOnce kills the operator
// pod at different moments of the bootstrap. Each run must converge to
// three servers of one cluster, initialized once. Either the stored root
// token opens its Raft configuration with three voters, or, when the kill
// landed inside the sys/init call (OpenBao finishes it, the answer reaches
// nobody), the cluster reports RootTokenLost: it is never silently adopted
// and never initialized again.
func TestOperatorKilledDuringBootstrapStillInitializesOnce(t *testing.T) {
	cl := installOperator(t)
	ctx := context.Background()
	for run, delay := range []time.Duration{500 * time.Millisecond, 2 * time.Second, 4 * time.Second, 7 * time.Second, 10 * time.Second} {
		t.Run(fmt.Sprintf("killed after %s", delay), func(t *testing.T) {
			ns := createNamespace(ctx, t, cl, fmt.Sprintf("e2e-kill%d", run))
			start := time.Now()
			createCluster(ctx, t, cl, ns, "bao")
			time.Sleep(delay)
			killManager(ctx, t, cl)
			waitFor(ctx, t, 5*time.Minute, "3 ready servers, Running or reporting RootTokenLost", func() (bool, string) {
				st := clusterStatus(ctx, t, cl, ns, "bao")
				settled := st["phase"] == "Running" || hasConditionReason(st, "RootTokenLost")
				return settled && fmt.Sprint(st["readyReplicas"]) == fmt.Sprint(replicas), fmt.Sprint(st)
			})
			if hasConditionReason(clusterStatus(ctx, t, cl, ns, "bao"), "RootTokenLost") {
				assertOneClusterWithoutToken(ctx, t, cl, ns)
				assertNoLeaks(ctx, t, cl, ns, nil)
				logf("operator killed %s after create, inside sys/init: RootTokenLost reported, 3 servers of one cluster", delay)
				return
			}
			token := string(secretData(ctx, t, cl, ns, "bao-root-token", "token"))
			caPEM := secretData(ctx, t, cl, ns, "bao-tls-ca", "ca.crt")
			pods := serverPods(ctx, t, cl, ns, replicas)
			waitFor(ctx, t, 2*time.Minute, "three voters, read with the stored token", func() (bool, string) {
				voters, err := raftVoters(pods[0], ns, caPEM, token)
				return err == nil && len(voters) == replicas, fmt.Sprintf("voters %v (%v)", voters, err)
			})
			assertNoLeaks(ctx, t, cl, ns, nil)
			logf("operator killed %s after create: 3 voters %s after create", delay, time.Since(start).Round(100*time.Millisecond))
		})
	}
}

// killManager deletes the manager pod at once, as a node crash would; the
// Deployment starts another, which takes the leader lease once it expires.
func killManager(ctx context.Context, t *testing.T, cl client.Client) {
	t.Helper()
	pod := managerPod(ctx, t, cl)
	keepLogsOf(ctx, t, pod)
	if err := cl.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatalf("kill %s: %v", pod.Name, err)
	}
}

// createClusterWith creates the test cluster from the locally built OpenBao
// image, with a self-init block when selfInit is not nil.
func createClusterWith(ctx context.Context, t testing.TB, cl client.Client, ns, name string, selfInit map[string]any) {
	t.Helper()
	if err := cl.Create(ctx, clusterObject(t, ns, name, selfInit)); err != nil {
		t.Fatalf("create OpenBaoCluster: %v", err)
	}
}

// clusterObject is the test cluster as createClusterWith creates it. It is
// unstructured because the e2e client's scheme does not know v1alpha1.
func clusterObject(t testing.TB, ns, name string, selfInit map[string]any) *unstructured.Unstructured {
	t.Helper()
	built, err := localnode.BuildImages(node, localnode.ImageOpenBao)
	if err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(built[localnode.ImageOpenBao].Ref, ":")
	cluster := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "openbao.org/v1alpha1", "kind": "OpenBaoCluster",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"version": tag, "image": repo, "replicas": int64(replicas),
			"storage": map[string]any{"size": "64Mi"},
		},
	}}
	if selfInit != nil {
		cluster.Object["spec"].(map[string]any)["selfInit"] = selfInit
	}
	return cluster
}

func hasConditionReason(status map[string]any, reason string) bool {
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["reason"] == reason {
			return true
		}
	}
	return false
}

// assertOneClusterWithoutToken checks that no root-token Secret exists and
// that the three servers are unsealed members of one cluster: one active,
// the others standby.
func assertOneClusterWithoutToken(ctx context.Context, t *testing.T, cl client.Client, ns string) {
	t.Helper()
	err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao-root-token"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("RootTokenLost reported but the Secret exists (%v)", err)
	}
	active := 0
	for _, p := range serverPods(ctx, t, cl, ns, replicas) {
		if p.Labels["openbao-sealed"] != "false" {
			t.Errorf("%s is sealed", p.Name)
		}
		if p.Labels["openbao-active"] == "true" {
			active++
		}
	}
	if active != 1 {
		t.Fatalf("%d active servers, want 1", active)
	}
}
