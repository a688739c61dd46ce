package executor

import (
	"errors"
	"io"

	"github.com/openbao/operator/internal/restore"
	"github.com/openbao/operator/internal/snapshot"
)

// tailGate passes a snapshot on as it is read, except its last tail
// bytes: those wait until the whole object was read, and go only if
// restore.ReleaseEnd allows it. Otherwise the read fails with the reason,
// the upload goes without its end, and OpenBao installs nothing.
type tailGate struct {
	src      *snapshot.Reader
	expected string
	tail     int
	// buf[off:] is read and not yet passed on.
	buf []byte
	off int
	// released says the end may go; refusal why it may not (the check,
	// the digest, or a failed read of the object).
	released bool
	refusal  error
}

// gateChunk is how much is read from the object at once.
const gateChunk = 256 << 10

func newTailGate(src *snapshot.Reader, expectedSHA256 string, tail int) *tailGate {
	return &tailGate{src: src, expected: expectedSHA256, tail: tail, buf: make([]byte, 0, tail+gateChunk)}
}

// Read implements io.Reader.
func (g *tailGate) Read(p []byte) (int, error) {
	if g.refusal != nil {
		return 0, g.refusal
	}
	for !g.released && len(g.buf)-g.off <= g.tail {
		if err := g.fill(); err != nil {
			g.refusal = err
			return 0, err
		}
	}
	ready := len(g.buf) - g.off
	if !g.released {
		ready -= g.tail
	}
	if ready == 0 {
		return 0, io.EOF
	}
	n := copy(p, g.buf[g.off:g.off+ready])
	g.off += n
	return n, nil
}

// fill reads once more from the object; at its end it decides whether the
// end goes.
func (g *tailGate) fill() error {
	if len(g.buf) == cap(g.buf) {
		g.buf = g.buf[:copy(g.buf, g.buf[g.off:])]
		g.off = 0
	}
	n, err := g.src.Read(g.buf[len(g.buf):cap(g.buf)])
	g.buf = g.buf[:len(g.buf)+n]
	switch {
	case errors.Is(err, io.EOF):
		// The snapshot.Reader returns io.EOF only for a snapshot that
		// checked out.
		if err := restore.ReleaseEnd(restore.UploadEnd{Checked: true, SHA256: g.src.SHA256(), ExpectedSHA256: g.expected}); err != nil {
			return err
		}
		g.released = true
	case err != nil:
		return err
	}
	return nil
}
