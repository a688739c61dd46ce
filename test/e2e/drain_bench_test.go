package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkDrain (make bench-drain): a 3-server cluster on the local node,
// a plain client writing every 100 ms through the client Service with one
// retry after 100 ms, and every server evicted in turn through the
// Eviction API, as kubectl drain does, its pod recreated by the
// StatefulSet; first with the drain guard, then with its webhook removed
// from the configuration (the baseline). It writes BENCHMARKS.md.
func BenchmarkDrain(b *testing.B) {
	cl := installOperator(b)
	evictions = evictionClient(b)
	ctx := context.Background()
	ns := createNamespace(ctx, b, cl, "bench-drain")
	createClusterWith(ctx, b, cl, ns, "bao", nil)
	token, caPEM := waitRunning(ctx, b, cl, ns, replicas)
	guarded := drainRound(ctx, b, cl, ns, token, caPEM)
	b.Logf("with the guard: %s", guarded)
	removeDrainGuard(ctx, b, cl)
	baseline := drainRound(ctx, b, cl, ns, token, caPEM)
	baseline.stepDowns -= guarded.stepDowns // the events are the namespace's, both rounds'
	b.Logf("without the guard: %s", baseline)
	writeBenchSection(b, "<!-- bench-drain:begin -->", "<!-- bench-drain:end -->", drainSection(guarded, baseline))
}

// evictions is the client that evicts; guard429s counts the guard's
// refusals it met, including those client-go retried by itself after
// their Retry-After, and catchUp429s those that waited for another server
// to catch up with the leader (drain.PeerCatchingUp's message).
var (
	evictions   client.Client
	guard429s   atomic.Int64
	catchUp429s atomic.Int64
)

type guardCounter struct{ next http.RoundTripper }

func (g guardCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := g.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests || !strings.HasSuffix(req.URL.Path, "/eviction") {
		return resp, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if bytes.Contains(body, []byte("vpodeviction.openbao.org")) {
		guard429s.Add(1)
		if bytes.Contains(body, []byte("not caught up with the leader")) {
			catchUp429s.Add(1)
		}
	}
	return resp, nil
}

func evictionClient(b *testing.B) client.Client {
	cfg, err := node.RESTConfig()
	if err != nil {
		b.Fatal(err)
	}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return guardCounter{rt} }
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// drainResult is one round: every server evicted once.
type drainResult struct {
	writes, failed int
	longest        time.Duration
	perServer      []time.Duration
	refusals       int
	catchUps       int
	stepDowns      int
}

func (r drainResult) String() string {
	return fmt.Sprintf("%d writes, %d failed, longest gap %s, per server %v, %d evictions refused",
		r.writes, r.failed, r.longest.Round(10*time.Millisecond), r.perServer, r.refusals)
}

func drainRound(ctx context.Context, b *testing.B, cl client.Client, ns, token string, caPEM []byte) drainResult {
	w := startWriter(ctx, b, cl, ns, token, caPEM)
	var r drainResult
	catchUpsBefore := catchUp429s.Load()
	for i := range replicas {
		w.waitAutopilotHealthy(ctx, b)
		started := time.Now()
		logf("evicting bao-%d at %s; active: %s", i, started.Format("15:04:05.000"), activePod(ctx, b, cl, ns))
		r.refusals += evictPod(ctx, b, cl, ns, fmt.Sprintf("bao-%d", i))
		waitRunning(ctx, b, cl, ns, replicas)
		r.perServer = append(r.perServer, time.Since(started).Round(100*time.Millisecond))
	}
	r.catchUps = int(catchUp429s.Load() - catchUpsBefore)
	r.writes, r.failed, r.longest = w.finish(b)
	r.stepDowns = countEvents(ctx, b, cl, ns, "DrainStepDown")
	logf("DrainStepDown events so far: %d, DrainTimeBoundReached: %d", r.stepDowns, countEvents(ctx, b, cl, ns, "DrainTimeBoundReached"))
	return r
}

// evictPod evicts the pod through the Eviction API until it goes, as
// kubectl drain does, and returns how many of the guard's 429s it met; it
// waits for the recreated pod to be Ready.
func evictPod(ctx context.Context, b *testing.B, cl client.Client, ns, name string) int {
	pod := &corev1.Pod{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		b.Fatal(err)
	}
	uid := pod.UID
	refusals := 0
	before, catchUpsBefore := guard429s.Load(), catchUp429s.Load()
	defer func() {
		logf("evicted %s after %d refusals of the guard (%d while another server caught up)", name,
			guard429s.Load()-before, catchUp429s.Load()-catchUpsBefore)
	}()
	for deadline := time.Now().Add(3 * time.Minute); ; {
		err := evictions.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
		if err == nil {
			break
		}
		if !apierrors.IsTooManyRequests(err) || time.Now().After(deadline) {
			b.Fatalf("evict %s: %v", name, err)
		}
		time.Sleep(time.Second)
	}
	refusals = int(guard429s.Load() - before)
	waitFor(ctx, b, 2*time.Minute, name+" replaced", func() (bool, string) {
		p := &corev1.Pod{}
		err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		return err == nil && p.UID != uid && ready, fmt.Sprint(err)
	})
	return refusals
}

// removeDrainGuard drops the drain guard's webhook from the operator's
// configuration, for the baseline.
func removeDrainGuard(ctx context.Context, b *testing.B, cl client.Client) {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := cl.Get(ctx, client.ObjectKey{Name: "openbao-operator-validating-webhook"}, cfg); err != nil {
		b.Fatal(err)
	}
	kept := cfg.Webhooks[:0]
	for _, w := range cfg.Webhooks {
		if w.Name != "vpodeviction.openbao.org" {
			kept = append(kept, w)
		}
	}
	cfg.Webhooks = kept
	if err := cl.Update(ctx, cfg); err != nil {
		b.Fatal(err)
	}
}

func drainSection(guarded, baseline drainResult) string {
	var s strings.Builder
	s.WriteString("<!-- bench-drain:begin -->\n## Node drains (make bench-drain)\n\n")
	fmt.Fprintf(&s, "%s; `make bench-drain`.\n\n", measuredOnTheNode())
	s.WriteString("A 3-server cluster on the local node; a client writes every 100 ms through the client Service, " +
		"retrying a failed write once after 100 ms; each server's pod is evicted in turn through the Eviction API " +
		"(client-go retries the guard's 429 after its Retry-After, as under kubectl drain) and recreated by the StatefulSet. Time per server: " +
		"from the first eviction request to the cluster Running again with 3 voters. Each eviction is asked once the " +
		"leader's autopilot says healthy with a failure tolerance (a replaced server counts after autopilot's " +
		"stabilization time), as a drain of one node after another would be; the guard then holds it, too, while " +
		"another server is not yet reached by the leader's replication; without the guard the PodDisruptionBudget, " +
		"which counts Ready pods, decides alone.\n\n")
	s.WriteString("| Run | Writes | Failed writes | Longest gap between acknowledged writes | Guard's 429s (while another server caught up) | DrainStepDown events | Time per server |\n|---|---|---|---|---|---|---|\n")
	for _, r := range []struct {
		name string
		r    drainResult
	}{{"drain guard on", guarded}, {"baseline (guard off)", baseline}} {
		fmt.Fprintf(&s, "| %s | %d | %d | %s | %d (%d) | %d | %v |\n", r.name, r.r.writes, r.r.failed,
			r.r.longest.Round(10*time.Millisecond), r.r.refusals, r.r.catchUps, r.r.stepDowns, r.r.perServer)
	}
	s.WriteString("<!-- bench-drain:end -->\n")
	return s.String()
}

// activePod names the pod service registration labels active.
func activePod(ctx context.Context, b *testing.B, cl client.Client, ns string) string {
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"openbao-active": "true"}); err != nil {
		b.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	return strings.Join(names, ",")
}

// waitAutopilotHealthy waits until the leader's autopilot says the
// cluster is healthy and tolerates a failure: a replaced server counts
// only after autopilot's stabilization time, and until then the guard, by
// design, holds nothing.
func (w *writer) waitAutopilotHealthy(ctx context.Context, b testing.TB) {
	waitFor(ctx, b, 2*time.Minute, "autopilot healthy with a failure tolerance", func() (bool, string) {
		code, body := w.do(http.MethodGet, "/v1/sys/storage/raft/autopilot/state", "")
		var st struct {
			Data struct {
				Healthy          bool `json:"healthy"`
				FailureTolerance int  `json:"failure_tolerance"`
			} `json:"data"`
		}
		_ = json.Unmarshal([]byte(body), &st)
		return code == http.StatusOK && st.Data.Healthy && st.Data.FailureTolerance > 0, fmt.Sprintf("HTTP %d %+v", code, st.Data)
	})
}

// countEvents counts the events of reason in ns.
func countEvents(ctx context.Context, b *testing.B, cl client.Client, ns, reason string) int {
	list := &eventsv1.EventList{}
	if err := cl.List(ctx, list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Reason == reason {
			n++
		}
	}
	return n
}
