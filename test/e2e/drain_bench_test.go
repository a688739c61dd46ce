package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
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
	ctx := context.Background()
	ns := createNamespace(ctx, b, cl, "bench-drain")
	createClusterWith(ctx, b, cl, ns, "bao", nil)
	token, caPEM := waitRunning(ctx, b, cl, ns, replicas)
	guarded := drainRound(ctx, b, cl, ns, token, caPEM)
	b.Logf("with the guard: %s", guarded)
	removeDrainGuard(ctx, b, cl)
	baseline := drainRound(ctx, b, cl, ns, token, caPEM)
	b.Logf("without the guard: %s", baseline)
	writeBenchSection(b, "<!-- bench-drain:begin -->", "<!-- bench-drain:end -->", drainSection(guarded, baseline))
}

// drainResult is one round: every server evicted once.
type drainResult struct {
	writes, failed int
	longest        time.Duration
	perServer      []time.Duration
	refusals       int
}

func (r drainResult) String() string {
	return fmt.Sprintf("%d writes, %d failed, longest gap %s, per server %v, %d evictions refused",
		r.writes, r.failed, r.longest.Round(10*time.Millisecond), r.perServer, r.refusals)
}

func drainRound(ctx context.Context, b *testing.B, cl client.Client, ns, token string, caPEM []byte) drainResult {
	w := startPlainWriter(ctx, b, cl, ns, token, caPEM)
	var r drainResult
	for i := range replicas {
		started := time.Now()
		r.refusals += evictPod(ctx, b, cl, ns, fmt.Sprintf("bao-%d", i))
		waitRunning(ctx, b, cl, ns, replicas)
		r.perServer = append(r.perServer, time.Since(started).Round(100*time.Millisecond))
	}
	r.writes, r.failed, r.longest = w.finish()
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
	for deadline := time.Now().Add(3 * time.Minute); ; {
		err := cl.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
		if err == nil {
			break
		}
		if !apierrors.IsTooManyRequests(err) || time.Now().After(deadline) {
			b.Fatalf("evict %s: %v", name, err)
		}
		if strings.Contains(err.Error(), "vpodeviction.openbao.org") { // not the budget's
			refusals++
		}
		time.Sleep(time.Second)
	}
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

// plainWriter writes every 100 ms through the client Service, as a plain
// application would: a failed write is retried once after 100 ms, then
// counted as failed.
type plainWriter struct {
	*writer
	mount    string
	mu       sync.Mutex
	count    int
	failures int
	lastAck  time.Time
	longest  time.Duration
	stop     chan struct{}
	done     chan struct{}
}

func startPlainWriter(ctx context.Context, b *testing.B, cl client.Client, ns, token string, caPEM []byte) *plainWriter {
	svc := &corev1.Service{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, svc); err != nil {
		b.Fatal(err)
	}
	w := &plainWriter{writer: &writer{url: "https://" + net.JoinHostPort(svc.Spec.ClusterIP, "8200"),
		serverName: "bao." + ns + ".svc", token: token, caPEM: caPEM},
		mount: fmt.Sprintf("drain-%d", time.Now().UnixNano()), lastAck: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	if code, body := w.do(http.MethodPost, "/v1/sys/mounts/"+w.mount, `{"type":"kv"}`); code != http.StatusNoContent {
		b.Fatalf("enable a KV mount through the client Service: HTTP %d %s", code, body)
	}
	go w.run()
	return w
}

func (w *plainWriter) run() {
	defer close(w.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		path := fmt.Sprintf("/v1/%s/k%d", w.mount, i)
		ok := false
		for try := range 2 {
			if try > 0 {
				time.Sleep(100 * time.Millisecond)
			}
			if code, _ := w.do(http.MethodPut, path, fmt.Sprintf(`{"v":"%d"}`, i)); code == http.StatusNoContent {
				ok = true
				break
			}
		}
		w.mu.Lock()
		w.count++
		if ok {
			now := time.Now()
			w.longest = max(w.longest, now.Sub(w.lastAck))
			w.lastAck = now
		} else {
			w.failures++
		}
		w.mu.Unlock()
	}
}

func (w *plainWriter) finish() (writes, failed int, longest time.Duration) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count, w.failures, w.longest
}

func drainSection(guarded, baseline drainResult) string {
	var s strings.Builder
	s.WriteString("<!-- bench-drain:begin -->\n## Node drains (make bench-drain)\n\n")
	s.WriteString("A 3-server cluster on the local node; a client writes every 100 ms through the client Service, " +
		"retrying a failed write once after 100 ms; each server's pod is evicted in turn through the Eviction API " +
		"(retried on 429 every second, as kubectl drain does) and recreated by the StatefulSet. Time per server: " +
		"from the first eviction request to the cluster Running again with 3 voters.\n\n")
	s.WriteString("| Run | Writes | Failed writes | Longest gap between acknowledged writes | Evictions refused (429) | Time per server |\n|---|---|---|---|---|---|\n")
	for _, r := range []struct {
		name string
		r    drainResult
	}{{"drain guard on", guarded}, {"baseline (guard off)", baseline}} {
		fmt.Fprintf(&s, "| %s | %d | %d | %s | %d | %v |\n", r.name, r.r.writes, r.r.failed,
			r.r.longest.Round(10*time.Millisecond), r.r.refusals, r.r.perServer)
	}
	s.WriteString("<!-- bench-drain:end -->\n")
	return s.String()
}
