package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
)

// readReplicas is the count the read replica test starts with.
const readReplicas = 2

// TestReadReplicasServeReadsRollFirstAndLeaveRaft: a cluster of 3 voters
// and 2 read replicas forms with the replicas as non-voters; a value
// written through the client Service is read through the read Service
// (`bao-read`, whose certificate name the servers hold); a version
// rollout, with a client writing all along, replaces each read replica,
// Ready on the new release, before the first voter goes, and no write
// fails; scaling the replicas 2 -> 0 leaves the 3 voters as the only Raft
// peers and no read pod.
func TestReadReplicasServeReadsRollFirstAndLeaveRaft(t *testing.T) {
	cl := installOperator(t)
	t.Parallel()
	ctx := context.Background()
	next := importNextOpenBao(t)
	ns := createNamespace(ctx, t, cl, "e2e-read")
	u := clusterObject(t, ns, "bao", nil)
	u.Object["spec"].(map[string]any)["readReplicas"] = map[string]any{"replicas": int64(readReplicas)}
	if err := cl.Create(ctx, u); err != nil {
		t.Fatalf("create OpenBaoCluster: %v", err)
	}
	waitFor(ctx, t, 5*time.Minute, fmt.Sprintf("phase Running with %d ready servers", replicas), func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "bao")
		return st["phase"] == "Running" && fmt.Sprint(st["readyReplicas"]) == fmt.Sprint(replicas), fmt.Sprint(st)
	})
	token := string(secretData(ctx, t, cl, ns, "bao-root-token", "token"))
	caPEM := secretData(ctx, t, cl, ns, "bao-tls-ca", "ca.crt")
	waitVotersN(ctx, t, cl, ns, token, caPEM, replicas+readReplicas, replicas)
	waitStatusNonVoters(ctx, t, cl, ns, "bao-read-0", "bao-read-1")

	w := startWriter(ctx, t, cl, ns, token, caPEM)
	readBackThroughReadService(ctx, t, cl, ns, w, caPEM, "formed")

	readPods := clusterServerPods(ctx, t, cl, ns, "bao-read", readReplicas)
	readTracker := trackRestartsOf(ctx, cl, ns, readPods)
	m := rollTo(ctx, t, cl, ns, map[string]any{"version": next}, 0)
	readTracker.stop()
	m.replacedTwice("the version rollout of a cluster with read replicas")
	readyAt := readTracker.readyAt()
	for _, p := range readPods {
		ready, ok := readyAt[p.Name]
		switch {
		case !ok:
			t.Errorf("the version rollout did not replace the read replica %s", p.Name)
		case !ready.Before(m.firstGone):
			t.Errorf("the read replica %s was Ready on %s %s after the first voter went: the replicas roll first",
				p.Name, next, ready.Sub(m.firstGone).Round(100*time.Millisecond))
		default:
			logf("  %s Ready on %s %s before the first voter went", p.Name, next, m.firstGone.Sub(ready).Round(100*time.Millisecond))
		}
	}
	for _, p := range clusterServerPods(ctx, t, cl, ns, "bao-read", readReplicas) {
		if image := containerImage(p, "openbao"); !strings.HasSuffix(image, ":"+next) {
			t.Errorf("the read replica %s runs %s after the rollout, want the tag %s", p.Name, image, next)
		}
	}
	logf("rollout with %d read replicas: %s; %d writes acked so far, longest gap %s", readReplicas, m.total, m.acked(w), m.gap(w))
	readBackThroughReadService(ctx, t, cl, ns, w, caPEM, "rolled")

	patchSpec(ctx, t, cl, ns, map[string]any{"readReplicas": map[string]any{"replicas": 0}})
	waitVotersN(ctx, t, cl, ns, token, caPEM, replicas, replicas)
	waitFor(ctx, t, 3*time.Minute, "no read replica pod", func() (bool, string) {
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelAppName: v1alpha1.AppName, v1alpha1.LabelAppInstance: "bao-read"}); err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d read pods", len(pods.Items))
	})
	waitStatusNonVoters(ctx, t, cl, ns)

	w.finish(t)
	assertNoLeaks(ctx, t, cl, ns, nil)
}

// waitStatusNonVoters waits until status.raft lists exactly these
// non-voters and the 3 servers as voters.
func waitStatusNonVoters(ctx context.Context, t *testing.T, cl client.Client, ns string, nonVoters ...string) {
	t.Helper()
	waitFor(ctx, t, 2*time.Minute, fmt.Sprintf("status.raft: %d voters, non-voters %v", replicas, nonVoters), func() (bool, string) {
		raft, _ := clusterStatus(ctx, t, cl, ns, "bao")["raft"].(map[string]any)
		voters, non := stringList(raft["voters"]), stringList(raft["nonVoters"])
		return len(voters) == replicas && slices.Equal(non, nonVoters), fmt.Sprintf("voters %v non-voters %v", voters, non)
	})
}

func stringList(v any) []string {
	list, _ := v.([]any)
	out := []string{}
	for _, s := range list {
		out = append(out, fmt.Sprint(s))
	}
	sort.Strings(out)
	return out
}

// readBackThroughReadService writes a value through the client Service and
// waits until the read Service returns it, verifying the read Service's
// name against the cluster's CA.
func readBackThroughReadService(ctx context.Context, t *testing.T, cl client.Client, ns string, w *writer, caPEM []byte, what string) {
	t.Helper()
	svc := &corev1.Service{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao-read"}, svc); err != nil {
		t.Fatal(err)
	}
	value := fmt.Sprintf("%s-%d", what, time.Now().UnixNano())
	if code, body := w.do(http.MethodPut, "/v1/"+w.mount+"/read-"+what, fmt.Sprintf(`{"v":%q}`, value)); code != http.StatusNoContent {
		t.Fatalf("write read-%s through the client Service: HTTP %d %s", what, code, body)
	}
	written := time.Now()
	c := tlsClient(caPEM, "bao-read."+ns+".svc", nil)
	waitFor(ctx, t, time.Minute, "the read Service to return read-"+what, func() (bool, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet,
			"https://"+net.JoinHostPort(svc.Spec.ClusterIP, "8200")+"/v1/"+w.mount+"/read-"+what, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Vault-Token", w.token)
		resp, err := c.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte(value)), fmt.Sprintf("HTTP %d", resp.StatusCode)
	})
	logf("read-%s read through bao-read %s after it was written", what, time.Since(written).Round(10*time.Millisecond))
}

func containerImage(p corev1.Pod, name string) string {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}
