package wrapper

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openbao/operator/internal/pki"
	"github.com/openbao/operator/test/baotest"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// tlsFiles issues a CA and returns a function that issues fresh Secret
// volume contents (tls.crt, tls.key, ca.crt) from it.
func tlsFiles(t testing.TB) func() map[string][]byte {
	t.Helper()
	spec := pki.Spec{ClusterName: "bao", Namespace: "ns", HeadlessService: "bao-internal", ClientService: "bao", Replicas: 1}
	caPEM, caKey, err := pki.NewCA(spec, now, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return func() map[string][]byte {
		cert, key, err := pki.IssueServerCert(caPEM, caKey, spec, now, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": caPEM}
	}
}

func watched(dir string) []string {
	return []string{filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")}
}

func write(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	if err := baotest.WriteSecretVolume(dir, files); err != nil {
		t.Fatal(err)
	}
}

func TestWatcher(t *testing.T) {
	issue := tlsFiles(t)
	dir := t.TempDir()
	first := issue()
	write(t, dir, first)
	w := NewWatcher(watched(dir))

	if changed, note := w.Poll(); changed || note != "" {
		t.Fatalf("unchanged files reported: %v %q", changed, note)
	}
	write(t, dir, first) // a new ..data directory with identical bytes
	if changed, _ := w.Poll(); changed {
		t.Fatal("identical content behind a new ..data reported as a change")
	}

	second := issue()
	partial := map[string][]byte{"tls.crt": first["tls.crt"], "tls.key": second["tls.key"], "ca.crt": first["ca.crt"]}
	write(t, dir, partial)
	changed, note := w.Poll()
	if changed || !strings.Contains(note, "does not match") {
		t.Fatalf("key without its certificate: changed=%v note=%q", changed, note)
	}
	if changed, note := w.Poll(); changed || note != "" {
		t.Fatalf("same inconsistency reported twice: %v %q", changed, note)
	}

	write(t, dir, second)
	if changed, note := w.Poll(); !changed {
		t.Fatalf("consistent new pair not reported: %q", note)
	}
	if changed, _ := w.Poll(); changed {
		t.Fatal("one change reported twice")
	}
}

func TestWatcherWaitsForMissingAndEmptyFiles(t *testing.T) {
	issue := tlsFiles(t)
	dir := t.TempDir()
	files := issue()
	write(t, dir, files)
	w := NewWatcher(watched(dir))

	if err := os.Remove(filepath.Join(dir, "ca.crt")); err != nil {
		t.Fatal(err)
	}
	if changed, note := w.Poll(); changed || !strings.Contains(note, "ca.crt") {
		t.Fatalf("missing file: changed=%v note=%q", changed, note)
	}
	next := issue()
	next["ca.crt"] = nil
	write(t, dir, next) // recreates the ca.crt link, to an empty file
	if changed, note := w.Poll(); changed || !strings.Contains(note, "no certificate") {
		t.Fatalf("empty bundle: changed=%v note=%q", changed, note)
	}
	next["ca.crt"] = files["ca.crt"]
	write(t, dir, next)
	if changed, note := w.Poll(); !changed {
		t.Fatalf("complete update not reported: %q", note)
	}
	for range 2 { // exactly once: the files stay as they are
		if changed, note := w.Poll(); changed || note != "" {
			t.Fatalf("an unchanged state reported again: changed=%v note=%q", changed, note)
		}
	}
}

// TestCertificateChangeSendsSIGHUP runs the wrapper over a Secret volume and
// swaps the volume's content as the kubelet does.
func TestCertificateChangeSendsSIGHUP(t *testing.T) {
	issue := tlsFiles(t)
	dir := t.TempDir()
	first := issue()
	write(t, dir, first)
	file := filepath.Join(t.TempDir(), "signals")
	w := startWrapper(t, []string{"-interval", "50ms", "-watch", strings.Join(watched(dir), ",")}, "trap", file)
	waitForLine(t, file, "ready")

	// Judged on events, not on time windows: each half-written state makes
	// the wrapper log a note of its own, and a poll that logs a note has
	// finished what an earlier poll did; the wrapper logs each SIGHUP it
	// sends before sending it.
	sends := func() int { return strings.Count(w.stderr.String(), "sending SIGHUP") }
	second, third := issue(), issue()
	write(t, dir, map[string][]byte{"tls.crt": first["tls.crt"], "tls.key": second["tls.key"], "ca.crt": first["ca.crt"]})
	waitForLog(t, w, "tls.key does not match", 1)
	write(t, dir, map[string][]byte{"tls.crt": nil, "tls.key": second["tls.key"], "ca.crt": first["ca.crt"]})
	waitForLog(t, w, "tls.crt holds no certificate", 1)
	if n := sends(); n != 0 {
		t.Fatalf("%d SIGHUPs for a key without its certificate", n)
	}
	write(t, dir, second)
	waitForLine(t, file, "hangup")
	write(t, dir, map[string][]byte{"tls.crt": second["tls.crt"], "tls.key": third["tls.key"], "ca.crt": second["ca.crt"]})
	waitForLog(t, w, "tls.key does not match", 2)
	if n := sends(); n != 1 {
		t.Fatalf("%d SIGHUPs for one change", n)
	}
	w.signal(t, syscall.SIGTERM)
	if code := w.wait(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, w.stderr.String())
	}
}

// waitForLog waits for the wrapper to have logged text n times.
func waitForLog(t *testing.T, w *wrapperProc, text string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Count(w.stderr.String(), text) >= n {
			return
		}
	}
	t.Fatalf("the wrapper never logged %q:\n%s", text, w.stderr.String())
}
