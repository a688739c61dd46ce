package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// writer writes numbered keys through the client Service as a plain
// client would during a rollout: one write every writeEvery, retried once
// after writeRetryAfter. A write whose retry fails too counts as failed for
// a plain client (the rollout's figure); it is then retried for up to
// retryFor, and only a write that never succeeds counts as lost for the
// data-loss check. It records which writes OpenBao acknowledged and the
// longest time without one.
type writer struct {
	url, serverName, token string
	caPEM                  []byte

	mu        sync.Mutex
	acked     []int
	failed    int
	plainFail int
	lastAck   time.Time
	longest   time.Duration
	longestAt time.Time

	stop chan struct{}
	done chan struct{}
}

const (
	writeEvery      = 100 * time.Millisecond
	writeRetryAfter = 100 * time.Millisecond
	writeRetryFor   = 10 * time.Second
	writeRetryEvery = 50 * time.Millisecond
)

// startWriter enables a KV mount with the root token and writes until
// stopped.
func startWriter(ctx context.Context, t testing.TB, cl client.Client, ns, token string, caPEM []byte) *writer {
	t.Helper()
	svc := &corev1.Service{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, svc); err != nil {
		t.Fatal(err)
	}
	w := &writer{
		url:        "https://" + net.JoinHostPort(svc.Spec.ClusterIP, "8200"),
		serverName: "bao." + ns + ".svc", token: token, caPEM: caPEM,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if code, body := w.do(http.MethodPost, "/v1/sys/mounts/rollout", `{"type":"kv"}`); code != http.StatusNoContent {
		t.Fatalf("enable the KV mount through the client Service: HTTP %d %s", code, body)
	}
	w.lastAck = time.Now()
	go w.run()
	return w
}

func (w *writer) run() {
	defer close(w.done)
	tick := time.NewTicker(writeEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		plain, ok := w.writeWithRetry(i)
		w.mu.Lock()
		if !plain {
			w.plainFail++
		}
		if ok {
			now := time.Now()
			if gap := now.Sub(w.lastAck); gap > w.longest {
				w.longest, w.longestAt = gap, now
			}
			w.lastAck = now
			w.acked = append(w.acked, i)
		} else {
			w.failed++
		}
		w.mu.Unlock()
	}
}

// writeWithRetry says whether the write succeeded within a plain client's
// two tries, and whether it succeeded at all within retryFor.
func (w *writer) writeWithRetry(i int) (plain, ok bool) {
	put := func() bool {
		code, _ := w.do(http.MethodPut, fmt.Sprintf("/v1/rollout/k%d", i), fmt.Sprintf(`{"v":"%d"}`, i))
		return code == http.StatusNoContent
	}
	deadline := time.Now().Add(writeRetryFor)
	if put() {
		return true, true
	}
	time.Sleep(writeRetryAfter)
	if put() {
		return true, true
	}
	for time.Now().Before(deadline) {
		time.Sleep(writeRetryEvery)
		if put() {
			return false, true
		}
	}
	return false, false
}

func (w *writer) do(method, path, body string) (int, string) {
	req, err := http.NewRequest(method, w.url+path, bytes.NewBufferString(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("X-Vault-Token", w.token)
	c := tlsClient(w.caPEM, w.serverName, nil)
	c.Timeout = 3 * time.Second
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// finish stops the writer and reads every acknowledged write back.
func (w *writer) finish(t testing.TB) (acked, failed int, longest time.Duration) {
	t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	lost := 0
	for _, i := range w.acked {
		code, body := w.do(http.MethodGet, fmt.Sprintf("/v1/rollout/k%d", i), "")
		if code != http.StatusOK || !bytes.Contains([]byte(body), []byte(fmt.Sprintf(`"v":"%d"`, i))) {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged writes cannot be read back", lost, len(w.acked))
	}
	return len(w.acked), w.failed, w.longest
}

// mark returns the number of acknowledged writes, the writes a plain
// client failed, and the longest gap so far.
func (w *writer) mark() (acked, plainFailed int, longest time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked), w.plainFail, w.longest
}

// resetGap starts the longest gap afresh, so that each rollout's figure is
// its own.
func (w *writer) resetGap() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.longest = 0
}
