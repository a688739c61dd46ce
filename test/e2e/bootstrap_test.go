package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
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
	t.Parallel()
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
// pod once, at a different moment of five bootstraps: each cluster is
// created its delay before the kill. Every cluster must end Running with
// three voters opened by the stored root token, initialized once: a kill
// inside the sys/init call (OpenBao finishes it, the answer reaches nobody)
// heals through the one reset of pod-0. Each cluster logs where the kill
// landed relative to its sys/init, from the managers' audit lines.
//
// One kill for five clusters, not five kills: the test stays serial (see
// the package comment), and five kills in a row held every parallel test
// back for over two minutes. Each cluster is a parallel subtest, so that
// the five namespaces are deleted side by side too; a sixth kills.
func TestOperatorKilledDuringBootstrapStillInitializesOnce(t *testing.T) {
	cl := installOperator(t)
	ctx := context.Background()
	delays := []time.Duration{10 * time.Second, 7 * time.Second, 4 * time.Second, 2 * time.Second, 500 * time.Millisecond}
	// The subtests start together once this function returns; the first
	// seconds are for them to create their namespaces.
	killAt := time.Now().Add(5*time.Second + delays[0])
	var killed time.Time
	killDone := make(chan struct{})
	t.Run("the kill", func(t *testing.T) {
		t.Parallel()
		defer close(killDone)
		time.Sleep(time.Until(killAt))
		killed = killManager(ctx, t, cl)
	})
	for run, delay := range delays {
		t.Run(fmt.Sprintf("killed after %s", delay), func(t *testing.T) {
			t.Parallel()
			ns := createNamespace(ctx, t, cl, fmt.Sprintf("e2e-kill%d", run))
			time.Sleep(time.Until(killAt.Add(-delay)))
			created := time.Now()
			createCluster(ctx, t, cl, ns, "bao")
			<-killDone
			if killed.IsZero() {
				t.Fatal("the operator was not killed")
			}
			assertFormsWithItsToken(ctx, t, cl, ns)
			audit := readBootstrapAudit(ctx, t, cl, ns)
			if audit.initialized != 1 || audit.resets > 1 || (audit.resets == 1 && !audit.lostInside(killed)) {
				t.Fatalf("bootstrap audit %+v for a kill at %s: want one stored token, and a reset only when the kill cut sys/init",
					audit, killed.Format(time.RFC3339Nano))
			}
			logf("operator killed %s after create, %s; %d reset(s); 3 voters %s after create",
				killed.Sub(created).Round(100*time.Millisecond), audit.where(killed), audit.resets,
				time.Since(created).Round(100*time.Millisecond))
		})
	}
}

// TestARootTokenThatCannotBeStoredIsHealedOnce: an admission policy
// refuses the root-token Secret (dry runs pass), so the operator's sys/init
// succeeds and its token reaches no one, the same state a kill inside the
// call leaves. The operator must reset pod-0 once; with the policy gone the
// second initialization stores its token and the cluster forms.
//
// It stays serial although it kills nothing: it counts the sys/init calls
// exactly, and beside the parallel tests it once saw three, a call after
// the reset having failed without initializing and been retried. (Parallel
// tests kill the operator too, and a kill inside its sys/init would be a
// second reset this test refuses.)
func TestARootTokenThatCannotBeStoredIsHealedOnce(t *testing.T) {
	cl := installOperator(t)
	ctx := context.Background()
	ns := createNamespace(ctx, t, cl, "e2e-tokenlost")
	lift := refuseSecret(ctx, t, cl, ns, "bao-root-token")
	createCluster(ctx, t, cl, ns, "bao")
	waitFor(ctx, t, 3*time.Minute, "status.bootstrapReset", func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "bao")
		return st["bootstrapReset"] != nil, fmt.Sprint(st)
	})
	lift()
	assertFormsWithItsToken(ctx, t, cl, ns)
	reset, _ := clusterStatus(ctx, t, cl, ns, "bao")["bootstrapReset"].(map[string]any)
	if reset["lostInitializationStarted"] == nil || reset["claimUID"] == nil || reset["podUID"] == nil {
		t.Fatalf("bootstrapReset %v, want the lost init's start, pod and claim", reset)
	}
	audit := readBootstrapAudit(ctx, t, cl, ns)
	if audit.initialized != 1 || audit.resets != 1 || audit.lost != 1 || len(audit.initStarted) != 2 {
		t.Fatalf("bootstrap audit %+v: want 2 sys/init calls, 1 lost token, 1 reset, 1 stored token", audit)
	}
	assertEventReason(ctx, t, cl, ns, "ResettingLostInitialization")
	logf("root token refused: reset once, re-initialized and formed (sys/init at %v)", audit.initStarted)
}

// assertFormsWithItsToken waits for the cluster to form (waitFormed, on
// the API port), then scans for leaks.
func assertFormsWithItsToken(ctx context.Context, t *testing.T, cl client.Client, ns string) {
	t.Helper()
	waitFormed(ctx, t, cl, ns, "8200")
	assertNoLeaks(ctx, t, cl, ns, nil)
}

// waitFormed waits for three ready servers in phase Running and three
// Raft voters, read at port with the stored root token, and returns the
// server pods.
func waitFormed(ctx context.Context, t *testing.T, cl client.Client, ns, port string) []corev1.Pod {
	t.Helper()
	waitFor(ctx, t, 5*time.Minute, "phase Running with 3 ready servers", func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "bao")
		return st["phase"] == "Running" && fmt.Sprint(st["readyReplicas"]) == fmt.Sprint(replicas), fmt.Sprint(st)
	})
	token := string(secretData(ctx, t, cl, ns, "bao-root-token", "token"))
	caPEM := secretData(ctx, t, cl, ns, "bao-tls-ca", "ca.crt")
	pods := serverPods(ctx, t, cl, ns, replicas)
	waitFor(ctx, t, 2*time.Minute, "three voters, read with the stored token", func() (bool, string) {
		_, voters, err := raftMembersAt(pods[0], port, ns, caPEM, token)
		return err == nil && len(voters) == replicas, fmt.Sprintf("voters %v (%v)", voters, err)
	})
	return pods
}

// killManager deletes the manager pod at once, as a node crash would, and
// says when; the Deployment starts another, which takes the leader lease
// once it expires. The killed manager's log is kept to its last line.
// It waits while a parallel test holds kills off (holdOperatorKills).
func killManager(ctx context.Context, t *testing.T, cl client.Client) (killed time.Time) {
	t.Helper()
	end := reserveKills(t)
	defer end()
	return killReserved(ctx, t, cl)
}

// killReserved is killManager for a test that reserved kills.
func killReserved(ctx context.Context, t testing.TB, cl client.Client) (killed time.Time) {
	t.Helper()
	pod := managerPod(ctx, t, cl)
	kept := keepLogsOf(ctx, t, pod)
	killed = time.Now()
	if err := cl.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatalf("kill %s: %v", pod.Name, err)
	}
	kept()
	return killed
}

// operatorKills keeps killManager out of a window in which a parallel test
// reads what a manager's restart resets (its counters).
var operatorKills sync.RWMutex

// holdOperatorKills holds kills off until the returned func (or the end
// of the test) lets them go on; calling it twice is harmless.
func holdOperatorKills(t testing.TB) (resume func()) {
	operatorKills.RLock()
	var once sync.Once
	resume = func() { once.Do(operatorKills.RUnlock) }
	t.Cleanup(resume)
	return resume
}

// reserveKills waits until no parallel test holds kills off and keeps
// them off for the others until end (or the end of the test): a test
// whose kills must land at given moments (each partition of a rollout, a
// restore's stream) reserves them first, then kills with killReserved.
func reserveKills(t testing.TB) (end func()) {
	operatorKills.Lock()
	var once sync.Once
	end = func() { once.Do(operatorKills.Unlock) }
	t.Cleanup(end)
	return end
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
