package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// writer writes numbered keys through the client Service as a plain
// client in a pod would during a rollout or a drain: one write every
// writeEvery, retried once after writeRetryAfter, then given up (counted
// failed, with the answer) while the next write goes on. A standby that
// cannot forward a request answers with a redirect to the active server's
// stable name, which the writer follows as such a client does (the name
// resolves through the cluster's DNS). It records which writes
// OpenBao acknowledged, read back at the end (the data-loss check), and
// the longest time without an acknowledgement (the outage check).
type writer struct {
	url, serverName, token string
	caPEM                  []byte
	mount                  string

	mu     sync.Mutex
	acked  []int
	writes int
	failed int
	// redirected counts the writes acknowledged after a redirect.
	redirected int
	why        map[string]int
	lastAck    time.Time
	longest    time.Duration // since resetGap
	longestEnd time.Time     // when the longest gap ended
	worst      time.Duration // since the start
	worstAt    time.Time

	stop chan struct{}
	done chan struct{}
}

const (
	writeEvery      = 100 * time.Millisecond
	writeRetryAfter = 100 * time.Millisecond
	// writeOutageMax bounds the longest gap between acknowledged writes
	// that a test accepts: no change it makes may stop writes for longer.
	writeOutageMax = 10 * time.Second
)

// startWriter enables a KV mount of its own with the root token and
// writes until stopped.
func startWriter(ctx context.Context, t testing.TB, cl client.Client, ns, token string, caPEM []byte) *writer {
	t.Helper()
	svc := &corev1.Service{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, svc); err != nil {
		t.Fatal(err)
	}
	w := &writer{
		url:        "https://" + net.JoinHostPort(svc.Spec.ClusterIP, "8200"),
		serverName: "bao." + ns + ".svc", token: token, caPEM: caPEM,
		mount: fmt.Sprintf("writer-%d", time.Now().UnixNano()), why: map[string]int{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if code, body := w.do(http.MethodPost, "/v1/sys/mounts/"+w.mount, `{"type":"kv"}`); code != http.StatusNoContent {
		t.Fatalf("enable a KV mount through the client Service: HTTP %d %s", code, body)
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
		why := w.write(i)
		w.mu.Lock()
		w.writes++
		if why == "" {
			now := time.Now()
			gap := now.Sub(w.lastAck)
			if gap > w.longest {
				w.longest, w.longestEnd = gap, now
			}
			if gap > w.worst {
				w.worst, w.worstAt = gap, now
			}
			w.lastAck = now
			w.acked = append(w.acked, i)
		} else {
			w.failed++
			w.why[why]++
			logf("write %d failed at %s: %s", i, time.Now().Format("15:04:05.000"), why)
		}
		w.mu.Unlock()
	}
}

// write tries write i twice, as a plain client does; "" when OpenBao
// acknowledged it, else the last answer.
func (w *writer) write(i int) string {
	why := ""
	for try := range 2 {
		if try > 0 {
			time.Sleep(writeRetryAfter)
		}
		code, body, redirects := w.send(http.MethodPut, fmt.Sprintf("/v1/%s/k%d", w.mount, i), fmt.Sprintf(`{"v":"%d"}`, i))
		if code == http.StatusNoContent {
			if redirects > 0 {
				w.mu.Lock()
				w.redirected++
				w.mu.Unlock()
			}
			return ""
		}
		why = fmt.Sprintf("HTTP %d %s", code, body)
		if at := strings.LastIndex(why, ": "); code == 0 && at > 0 {
			why = "HTTP 0" + why[at:] // the transport's error, without the URL
		}
	}
	return why
}

func (w *writer) do(method, path, body string) (int, string) {
	code, out, _ := w.send(method, path, body)
	return code, out
}

// send makes one request on a new connection and follows redirects;
// redirects says how many.
func (w *writer) send(method, path, body string) (code int, out string, redirects int) {
	req, err := http.NewRequest(method, w.url+path, bytes.NewBufferString(body))
	if err != nil {
		return 0, err.Error(), 0
	}
	req.Header.Set("X-Vault-Token", w.token)
	c := tlsClient(w.caPEM, w.serverName, nil)
	c.Timeout = 3 * time.Second
	c.Transport.(*http.Transport).DialContext = dialInCluster
	c.CheckRedirect = func(_ *http.Request, via []*http.Request) error {
		redirects = len(via)
		if len(via) >= 3 {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error(), redirects
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), redirects
}

// dialInCluster dials as a client in a pod would: a name in the cluster
// (host.svc, such as a standby's redirect to the active server's stable
// name) resolves through the cluster DNS, which the host reaches at its
// ClusterIP; an address dials as it is.
func dialInCluster(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(host, ".svc") {
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort(node.DNSIP, "53"))
		}}
		ips, err := r.LookupHost(ctx, host+".cluster.local")
		if err != nil {
			return nil, err
		}
		addr = net.JoinHostPort(ips[0], port)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// finish stops the writer, reads every acknowledged write back, and
// fails the test when one is lost or writes stopped for longer than
// writeOutageMax.
func (w *writer) finish(t testing.TB) (writes, failed int, longest time.Duration) {
	t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	lost, why := 0, map[string]int{}
	for _, i := range w.acked {
		code, body := w.do(http.MethodGet, fmt.Sprintf("/v1/%s/k%d", w.mount, i), "")
		if code != http.StatusOK || !bytes.Contains([]byte(body), []byte(fmt.Sprintf(`"v":"%d"`, i))) {
			lost++
			why[fmt.Sprintf("HTTP %d: %.80s", code, body)]++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged writes cannot be read back: %v", lost, len(w.acked), why)
	}
	if w.worst > writeOutageMax {
		t.Errorf("no write was acknowledged for %s (up to %s), longer than %s", w.worst.Round(10*time.Millisecond),
			w.worstAt.Format("15:04:05.000"), writeOutageMax)
	}
	logf("writer: %d writes, %d acknowledged and read back (%d after a redirect), %d failed for a plain client %v",
		w.writes, len(w.acked), w.redirected, w.failed, w.why)
	return w.writes, w.failed, w.longest
}

// mark returns the number of acknowledged writes, the writes that failed,
// and the longest gap so far.
func (w *writer) mark() (acked, failed int, longest time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked), w.failed, w.longest
}

// resetGap starts the longest gap afresh, so that each rollout's figure is
// its own.
func (w *writer) resetGap() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.longest, w.longestEnd = 0, time.Time{}
}

// longestGapEnd is when the longest gap since resetGap ended, to find it
// in the servers' logs.
func (w *writer) longestGapEnd() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longestEnd
}
