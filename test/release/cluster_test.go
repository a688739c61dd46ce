package release_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/test/localnode"
)

// managerOn says whether every manager pod runs want (repo@sha256:...),
// Ready, from an image containerd resolved to want's digest, with no pod
// of another image left, not even terminating.
func managerOn(ctx context.Context, cl client.Client, want string) (bool, string, error) {
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(localnode.OperatorNamespace), localnode.ManagerSelector); err != nil {
		return false, err.Error(), nil
	}
	if len(pods.Items) == 0 {
		return false, "no manager pod", nil
	}
	_, digest, _ := strings.Cut(want, "@")
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if c.Name == localnode.ManagerContainer && c.Image != want {
				return false, fmt.Sprintf("pod %s runs %s", p.Name, c.Image), nil
			}
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == localnode.ManagerContainer && (!s.Ready || !strings.HasSuffix(s.ImageID, "@"+digest)) {
				return false, fmt.Sprintf("pod %s: ready %t, image ID %q", p.Name, s.Ready, s.ImageID), nil
			}
		}
	}
	return true, "", nil
}

// createNamespace makes a restricted namespace and hands it to the
// operator (the node's install is least-privilege).
func createNamespace(ctx context.Context, t *testing.T, cl client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: prefix + "-",
		Labels:       map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}
	if err := cl.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace %s-*: %v", prefix, err)
	}
	t.Cleanup(func() { deleteNamespace(t, cl, ns.Name) })
	if err := localnode.Provision(ctx, cl, ns.Name); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// deleteNamespace removes what a test left on a node that outlives the
// run (one that was up already), without waiting for it to go. The
// OpenBaoTenant stays: taken away now, it would take the operator's rights
// before the cluster's deletion ran with them.
func deleteNamespace(t *testing.T, cl client.Client, name string) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := cl.Delete(context.Background(), ns); client.IgnoreNotFound(err) != nil {
		t.Errorf("delete namespace %s: %v", name, err)
	}
}

// createCluster creates a cluster of the OpenBao image in the registry.
// Unstructured: the node client's scheme does not know v1alpha1.
func createCluster(ctx context.Context, t *testing.T, cl client.Client, ns string, img image) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "openbao.org/v1alpha1", "kind": "OpenBaoCluster",
		"metadata": map[string]any{"name": clusterName, "namespace": ns},
		"spec": map[string]any{
			"version": img.tag, "image": img.repo, "replicas": int64(servers),
			"storage": map[string]any{"size": "64Mi"},
		},
	}}
	if err := cl.Create(ctx, u); err != nil {
		t.Fatalf("create OpenBaoCluster: %v", err)
	}
}

// waitReady waits for the cluster's phase Running with every server ready.
func waitReady(ctx context.Context, t *testing.T, cl client.Client, ns string) {
	t.Helper()
	start := time.Now()
	err := localnode.Poll(ctx, formTimeout, "cluster "+ns+"/"+clusterName+" Running with 3 ready servers", func(ctx context.Context) (bool, string, error) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("openbao.org/v1alpha1")
		u.SetKind("OpenBaoCluster")
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, u); err != nil {
			return false, err.Error(), nil
		}
		st, _ := u.Object["status"].(map[string]any)
		return st["phase"] == "Running" && fmt.Sprint(st["readyReplicas"]) == fmt.Sprint(servers), fmt.Sprint(st), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	logf("cluster %s/%s formed in %s", ns, clusterName, time.Since(start).Round(time.Millisecond))
}

// servers is what an operator upgrade must leave as it was: each server
// pod by name (its UID and restarts), and the StatefulSet's revisions.
type serverState struct {
	pods        map[string]podState
	generation  int64
	updateRev   string
	currentRev  string
	statefulSet string
}

type podState struct {
	uid      types.UID
	restarts int32
}

func snapshotServers(ctx context.Context, t *testing.T, cl client.Client, ns string) serverState {
	t.Helper()
	var sts appsv1.StatefulSet
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, &sts); err != nil {
		t.Fatalf("get the StatefulSet: %v", err)
	}
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{
		v1alpha1.LabelAppName: v1alpha1.AppName, v1alpha1.LabelAppInstance: clusterName}); err != nil {
		t.Fatal(err)
	}
	s := serverState{pods: map[string]podState{}, generation: sts.Generation,
		updateRev: sts.Status.UpdateRevision, currentRev: sts.Status.CurrentRevision, statefulSet: ns + "/" + sts.Name}
	for _, p := range pods.Items {
		var n int32
		for _, c := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			n += c.RestartCount
		}
		s.pods[p.Name] = podState{uid: p.UID, restarts: n}
	}
	if len(s.pods) != servers {
		t.Fatalf("%d server pods, want %d", len(s.pods), servers)
	}
	return s
}

// countRestarts lists every way the servers changed between two
// snapshots: a pod replaced or gone, a container restarted, a StatefulSet
// whose pod template changed (a new generation or revision starts a
// rollout even before any pod is replaced).
func countRestarts(before, after serverState) []string {
	var out []string
	if before.generation != after.generation {
		out = append(out, fmt.Sprintf("StatefulSet %s changed: generation %d -> %d", before.statefulSet, before.generation, after.generation))
	}
	if before.updateRev != after.updateRev || before.currentRev != after.currentRev {
		out = append(out, fmt.Sprintf("StatefulSet %s revisions changed: update %s -> %s, current %s -> %s",
			before.statefulSet, before.updateRev, after.updateRev, before.currentRev, after.currentRev))
	}
	for _, name := range sortedKeys(before.pods) {
		b, a := before.pods[name], after.pods[name]
		switch {
		case a.uid == "":
			out = append(out, fmt.Sprintf("pod %s is gone", name))
		case a.uid != b.uid:
			out = append(out, fmt.Sprintf("pod %s was replaced (UID %s -> %s)", name, b.uid, a.uid))
		case a.restarts != b.restarts:
			out = append(out, fmt.Sprintf("pod %s restarted %d times", name, a.restarts-b.restarts))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkChildComesBack deletes a Service the cluster owns, twice, and waits
// each time for the operator to create it again: the old manager pods are
// gone, so the new operator manages the cluster. The second deletion is
// handled in a later pass than the first, so the pass that answered the
// first has run to its end, StatefulSet step included, before the servers
// are compared.
func checkChildComesBack(ctx context.Context, t *testing.T, cl client.Client, ns string) {
	t.Helper()
	glass := breakGlassClient(t)
	for i := range 2 {
		svc := ownedService(ctx, t, cl, ns)
		start := time.Now()
		if err := glass.Delete(ctx, svc); err != nil {
			t.Fatalf("delete Service %s: %v", svc.Name, err)
		}
		err := localnode.Poll(ctx, childTimeout, "Service "+svc.Name+" to come back", func(ctx context.Context) (bool, string, error) {
			var got corev1.Service
			err := cl.Get(ctx, client.ObjectKeyFromObject(svc), &got)
			if apierrors.IsNotFound(err) {
				return false, "not found", nil
			}
			return err == nil && got.UID != svc.UID, fmt.Sprintf("UID %s (%v)", got.UID, err), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		logf("deleted Service %s/%s came back in %s (%d of 2)", ns, svc.Name, time.Since(start).Round(time.Millisecond), i+1)
	}
}

// breakGlassClient acts as an administrator in the group that the
// managed-objects admission policy lets change what the operator manages,
// as a hand repair would.
func breakGlassClient(t *testing.T) client.Client {
	t.Helper()
	cfg, err := node.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "release-break-glass",
		Groups: []string{v1alpha1.BreakGlassGroup, "system:masters"}}
	cl, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// ownedService is a Service the cluster owns that no server needs to find
// its peers (not headless), so deleting it disturbs no Raft traffic.
func ownedService(ctx context.Context, t *testing.T, cl client.Client, ns string) *corev1.Service {
	t.Helper()
	var svcs corev1.ServiceList
	if err := cl.List(ctx, &svcs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for i, s := range svcs.Items {
		names = append(names, s.Name)
		owned := slices.ContainsFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool {
			return o.Kind == "OpenBaoCluster" && o.Name == clusterName
		})
		if owned && s.Spec.ClusterIP != corev1.ClusterIPNone {
			return &svcs.Items[i]
		}
	}
	t.Fatalf("no Service in %s owned by the cluster and not headless (have %v)", ns, names)
	return nil
}
