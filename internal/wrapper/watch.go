package wrapper

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// Watcher notices when watched files change content. It polls content
// hashes rather than using inotify: Kubernetes updates a Secret volume by
// swapping the `..data` symlink, which inotify on the file paths misses, and
// reading a few small files every couple of seconds costs nothing.
//
// A change is reported only once the new content is consistent, so a reload
// never picks up half an update: every file must be readable, every watched
// `*.crt` must hold a certificate, and every watched `X.key` must match the
// watched `X.crt` beside it (tls.crt with tls.key).
type Watcher struct {
	paths   []string
	applied map[string][sha256.Size]byte
	waiting string // why the last change is not consistent yet, to log once
}

// NewWatcher records the files' current content as the applied state.
func NewWatcher(paths []string) *Watcher {
	w := &Watcher{paths: paths}
	w.applied, _ = w.snapshot()
	return w
}

// snapshot hashes every file; unreadable files are left out and reported.
func (w *Watcher) snapshot() (map[string][sha256.Size]byte, error) {
	hashes := make(map[string][sha256.Size]byte, len(w.paths))
	var firstErr error
	for _, p := range w.paths {
		data, err := os.ReadFile(p)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("read %s: %w", p, err)
			}
			continue
		}
		hashes[p] = sha256.Sum256(data)
	}
	return hashes, firstErr
}

// Poll reports whether the files changed to a new consistent state since the
// last reported one. When a change is seen but not yet consistent, it
// returns false and a note (once per distinct reason) for the log.
func (w *Watcher) Poll() (changed bool, note string) {
	current, err := w.snapshot()
	if err == nil && maps.Equal(current, w.applied) {
		w.waiting = ""
		return false, ""
	}
	if err == nil {
		err = w.consistent()
	}
	if err != nil {
		if err.Error() == w.waiting {
			return false, ""
		}
		w.waiting = err.Error()
		return false, "change seen, waiting for a consistent update: " + w.waiting
	}
	w.applied, w.waiting = current, ""
	return true, ""
}

// consistent checks the files as they are now (see Watcher).
func (w *Watcher) consistent() error {
	for _, p := range w.paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if strings.HasSuffix(p, ".crt") && !hasCertificate(data) {
			return fmt.Errorf("%s holds no certificate", p)
		}
		if !strings.HasSuffix(p, ".key") {
			continue
		}
		certPath := strings.TrimSuffix(p, ".key") + ".crt"
		if !slices.Contains(w.paths, certPath) {
			continue
		}
		cert, err := os.ReadFile(certPath)
		if err != nil {
			return fmt.Errorf("read %s: %w", certPath, err)
		}
		// The error of X509KeyPair is not passed on: it may describe the key.
		if _, err := tls.X509KeyPair(cert, data); err != nil {
			return fmt.Errorf("%s does not match %s", p, certPath)
		}
	}
	return nil
}

func hasCertificate(data []byte) bool {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return false
		}
		if block.Type == "CERTIFICATE" {
			return true
		}
	}
}
