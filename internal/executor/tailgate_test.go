package executor

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openbao/operator/internal/restore"
	"github.com/openbao/operator/internal/snapshot"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "snapshot", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// drain reads g with the read sizes given, in turn, and returns what came
// through and the error that ended it.
func drain(g io.Reader, sizes []byte) ([]byte, error) {
	var out []byte
	for i := 0; ; i++ {
		size := 1 + int(sizes[i%len(sizes)])*97
		p := make([]byte, size)
		n, err := g.Read(p)
		out = append(out, p[:n]...)
		if err != nil {
			return out, err
		}
	}
}

// FuzzTheLastBytesWaitForTheVerdict: however the upload reads, and
// whatever the withheld tail's size, a snapshot that checks out with the
// digest named comes through whole and then io.EOF; one of another digest,
// or one that fails its check, never lets its last tail bytes (all of it,
// when it is smaller) through, and ends in an error instead of io.EOF.
func FuzzTheLastBytesWaitForTheVerdict(f *testing.F) {
	f.Add(uint16(1024), []byte{3, 40, 0}, byte(0))
	f.Add(uint16(1), []byte{255}, byte(1))
	f.Add(uint16(60000), []byte{0}, byte(2))
	f.Add(uint16(512), []byte{7, 200}, byte(3))
	fixtures := map[byte][]byte{0: fixture(f, "with-data.snap"), 1: fixture(f, "truncated.snap"), 2: fixture(f, "bit-flipped.snap")}
	sum := sha256.Sum256(fixtures[0])
	good := hex.EncodeToString(sum[:])
	f.Fuzz(func(t *testing.T, tail uint16, sizes []byte, which byte) {
		if len(sizes) == 0 {
			sizes = []byte{1}
		}
		data, expected := fixtures[which%3], good
		if which%4 == 3 {
			expected = strings.Repeat("0", 64) // a valid snapshot, another digest
		}
		src := snapshot.NewReader(bytes.NewReader(data))
		defer src.Close()
		out, err := drain(newTailGate(src, expected, int(tail)), sizes)
		if which%3 == 0 && expected == good {
			if !errors.Is(err, io.EOF) || !bytes.Equal(out, data) {
				t.Fatalf("a good snapshot: %d of %d bytes, then %v", len(out), len(data), err)
			}
			return
		}
		if errors.Is(err, io.EOF) || len(out) > max(0, len(data)-int(tail)) || !bytes.Equal(out, data[:len(out)]) {
			t.Fatalf("a bad snapshot (%d) let %d of %d bytes through with a tail of %d, then %v", which, len(out), len(data), tail, err)
		}
	})
}

// A refusal of the digest is a DigestMismatch, of the check a
// CorruptSnapshot.
func TestTheGatesRefusalsNameTheirReason(t *testing.T) {
	src := snapshot.NewReader(bytes.NewReader(fixture(t, "with-data.snap")))
	defer src.Close()
	_, err := drain(newTailGate(src, strings.Repeat("0", 64), restore.WithheldTail), []byte{9})
	var se *stageError
	if !errors.As(readError(err), &se) || se.reason != restore.ReasonDigestMismatch {
		t.Fatalf("another digest: %v", readError(err))
	}
	src = snapshot.NewReader(bytes.NewReader(fixture(t, "bit-flipped.snap")))
	defer src.Close()
	_, err = drain(newTailGate(src, "", restore.WithheldTail), []byte{9})
	if !errors.As(readError(err), &se) || se.reason != restore.ReasonCorruptSnapshot {
		t.Fatalf("a bit flipped: %v", readError(err))
	}
}
