package snapshot_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"testing"
	"testing/iotest"
	"time"

	"github.com/openbao/operator/internal/snapshot"
)

// consume reads r to the end as an uploader does: the result counts only
// when the reader ended with io.EOF (io.ReadAll turns that into nil).
func consume(r io.Reader) ([]byte, error) { return io.ReadAll(r) }

func TestReaderPassesAGoodSnapshotThroughUnchanged(t *testing.T) {
	data := fixture(t, "with-data.snap")
	for name, src := range map[string]io.Reader{
		"whole":            bytes.NewReader(data),
		"one byte a read":  iotest.OneByteReader(bytes.NewReader(data)),
		"data with io.EOF": iotest.DataErrReader(bytes.NewReader(data)),
		"half reads":       iotest.HalfReader(bytes.NewReader(data)),
	} {
		r := snapshot.NewReader(src)
		got, err := consume(r)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes, %v", name, len(got), err)
		}
		sum := sha256.Sum256(data)
		if r.SHA256() != hex.EncodeToString(sum[:]) || r.Size() != int64(len(data)) || r.Info().Index == 0 {
			t.Errorf("%s: sha256 %s size %d info %+v", name, r.SHA256(), r.Size(), r.Info())
		}
	}
}

func TestReaderNeverEndsABadSnapshotWithEOF(t *testing.T) {
	good := fixture(t, "with-data.snap")
	cases := map[string][]byte{
		"truncated":              fixture(t, "truncated.snap"),
		"bit-flipped":            fixture(t, "bit-flipped.snap"),
		"cut before the trailer": good[:len(good)-4],
		"not a snapshot":         bytes.Repeat([]byte("x"), 100_000),
		"empty":                  nil,
	}
	for name, data := range cases {
		_, err := consume(snapshot.NewReader(bytes.NewReader(data)))
		var se *snapshot.Error
		if !errors.As(err, &se) {
			t.Errorf("%s: %v, want a snapshot error instead of the end", name, err)
		}
	}
}

// TestReaderStopsEarlyOnACorruptStart: a stream that is not gzip fails at
// once, long before its end, so a large bad stream is not uploaded whole.
func TestReaderStopsEarlyOnACorruptStart(t *testing.T) {
	garbage := io.LimitReader(neverEnding('x'), 1<<30)
	r := snapshot.NewReader(garbage)
	n, err := io.Copy(io.Discard, r)
	if err == nil || n > 1<<20 {
		t.Fatalf("read %d bytes of a 1 GiB stream that is not a snapshot: %v", n, err)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

func TestReaderKeepsTheSourcesError(t *testing.T) {
	data := fixture(t, "with-data.snap")
	broken := errors.New("connection reset")
	r := snapshot.NewReader(io.MultiReader(bytes.NewReader(data[:len(data)/2]), iotest.ErrReader(broken)))
	if _, err := consume(r); !errors.Is(err, broken) {
		t.Errorf("%v, want the connection's error", err)
	}
	// A body the server cut short ends in io.ErrUnexpectedEOF: truncated.
	r = snapshot.NewReader(io.MultiReader(bytes.NewReader(data[:len(data)/2]), iotest.ErrReader(io.ErrUnexpectedEOF)))
	if _, err := consume(r); reasonOf(err) != snapshot.ReasonSnapshotTruncated {
		t.Errorf("%v, want a truncated snapshot", err)
	}
}

func TestCloseEndsAnAbandonedCheck(t *testing.T) {
	data := fixture(t, "with-data.snap")
	r := snapshot.NewReader(bytes.NewReader(data))
	if _, err := io.ReadFull(r, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { r.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if _, err := r.Read(make([]byte, 10)); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("read after Close: %v", err)
	}
}
