package openbao_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/restore"
	"github.com/openbao/operator/test/baotest"
)

// endWithout passes data through, then fails where io.EOF was due, as the
// executor's upload fails when it keeps a snapshot's end back.
type endWithout struct {
	r   io.Reader
	err error
}

func (e *endWithout) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if errors.Is(err, io.EOF) {
		return 0, e.err
	}
	return n, err
}

var errWithheld = errors.New("the end of the upload is withheld")

// afterCutUpload waits until the server has given up reading an upload
// that was cut (it logs the decompressor's unexpected EOF), then watches
// for 3 s that no install follows: an install starts within milliseconds
// of that line, so this sees one if it comes.
func afterCutUpload(t *testing.T, bao *baotest.Server, logFrom int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(bao.Log()[logFrom:], "failed to close snapshot decompressor") {
		if time.Now().After(deadline) {
			t.Fatalf("the server never ended reading the cut upload:\n%s", bao.Log()[logFrom:])
		}
		time.Sleep(100 * time.Millisecond)
	}
	for quiet := time.Now().Add(3 * time.Second); time.Now().Before(quiet); time.Sleep(100 * time.Millisecond) {
		if installed(bao, logFrom) {
			return
		}
	}
}

// installed says the server's log shows an install since logFrom.
func installed(bao *baotest.Server, logFrom int) bool {
	log := bao.Log()[logFrom:]
	return strings.Contains(log, "installing snapshot") || strings.Contains(log, "applying snapshot")
}

// TestOpenBaoInstallsNothingFromAnUploadCutBeforeItsEnd is what streaming
// the restore in one read rests on: OpenBao 2.4.0 receives a valid
// snapshot of its own (larger than restore.WithheldTail) but for its last
// restore.WithheldTail bytes, as the executor sends one that fails the
// snapshot check or its SHA-256 at the end, and installs nothing: the key
// written since the snapshot is still there. The same bytes posted to
// their end are installed (the key goes), so the test sees an install.
// (Cut only 9 bytes short, OpenBao 2.4.0 does install it: hence the tail.)
func TestOpenBaoInstallsNothingFromAnUploadCutBeforeItsEnd(t *testing.T) {
	t.Parallel()
	f := newRestoreFixture(t)
	kvWrite(t, f.bao, f.root, "before", "one")
	writeData(t, f.bao, f.root, 8, 256<<10)
	c := baoClient(t, f.bao, nil, f.root)
	stream, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	snap := readAll(t, stream)
	if len(snap) <= restore.WithheldTail {
		t.Fatalf("the snapshot has %d bytes, not more than the withheld tail", len(snap))
	}
	kvWrite(t, f.bao, f.root, "after", "two")

	logFrom := len(f.bao.Log())
	cut := &endWithout{r: io.LimitReader(bytes.NewReader(snap), int64(len(snap)-restore.WithheldTail)), err: errWithheld}
	if err := c.RestoreSnapshot(context.Background(), cut, false); !errors.Is(err, errWithheld) {
		t.Fatalf("the cut upload: %v, want the withheld end", err)
	}
	afterCutUpload(t, f.bao, logFrom)
	if _, ok := kvRead(t, f.bao, f.root, "after"); !ok || installed(f.bao, logFrom) {
		t.Fatalf("OpenBao installed the snapshot of an upload without its last %d bytes (kv/after there: %v):\n%s",
			restore.WithheldTail, ok, f.bao.Log()[logFrom:])
	}

	if err := c.RestoreSnapshot(context.Background(), bytes.NewReader(snap), false); err != nil {
		t.Fatalf("the same bytes to their end: %v", err)
	}
	waitForActive(t, baoClient(t, f.bao, nil, f.root), 30*time.Second)
	// OpenBao installs a snapshot in the background after the upload
	// returns, so a read may still be answered from the data before it
	// (seen once in CI; restore_source_test.go measures that window): the
	// check is that the complete upload takes effect, within 30 s.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		v, ok := kvRead(t, f.bao, f.root, "after")
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kv/after survived the complete upload for 30 s: %q", v)
		}
	}
	if v, _ := kvRead(t, f.bao, f.root, "before"); !strings.Contains(v, "one") {
		t.Fatalf("kv/before after the restore: %q", v)
	}
}
