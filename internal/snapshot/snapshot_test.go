package snapshot_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openbao/operator/internal/snapshot"
)

// The fixtures under testdata are real snapshots of bao 2.4.0 (empty, and
// holding a few items), written by the OpenBao tier's
// TestRealSnapshotsCheckOutInStream with -update-snapshot-fixtures, with a
// truncated and a bit-flipped copy of the second.

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func reasonOf(err error) string {
	var se *snapshot.Error
	if errors.As(err, &se) {
		return se.Reason
	}
	return ""
}

func TestRealSnapshotsCheckOut(t *testing.T) {
	for _, name := range []string{"empty.snap", "with-data.snap"} {
		info, err := snapshot.Verify(bytes.NewReader(fixture(t, name)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if info.Index == 0 || info.Term == 0 || info.StateSize == 0 {
			t.Errorf("%s: %+v, want the Raft position and the state size", name, info)
		}
	}
}

func TestTheStoredCorruptCopiesAreRefused(t *testing.T) {
	cases := map[string][]string{
		"truncated.snap":   {snapshot.ReasonSnapshotTruncated},
		"bit-flipped.snap": {snapshot.ReasonSnapshotCorrupt, snapshot.ReasonSnapshotChecksumMismatch},
	}
	for name, reasons := range cases {
		_, err := snapshot.Verify(bytes.NewReader(fixture(t, name)))
		if !oneOf(reasonOf(err), reasons) {
			t.Errorf("%s: %v, want one of %v", name, err, reasons)
		}
	}
}

func oneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

// TestEveryTruncationIsRefused cuts the snapshot at every seventh length,
// and at each of its last 64: none checks out, and each says it was cut
// short or is not a snapshot.
func TestEveryTruncationIsRefused(t *testing.T) {
	data := fixture(t, "with-data.snap")
	for n := 0; n < len(data); n++ {
		if n%7 != 0 && n < len(data)-64 {
			continue
		}
		_, err := snapshot.Verify(bytes.NewReader(data[:n]))
		if !oneOf(reasonOf(err), []string{snapshot.ReasonSnapshotTruncated, snapshot.ReasonSnapshotCorrupt}) {
			t.Fatalf("cut at %d of %d bytes: %v", n, len(data), err)
		}
	}
}

// decompressed returns what a gzip stream holds, or nil when it is not one.
func decompressed(data []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		return nil
	}
	return out
}

// TestEveryBitFlipThatChangesTheSnapshotIsRefused flips one bit at every
// fifth byte of a real snapshot. Some bits carry nothing: the gzip header's
// time, flags and OS bytes, and the padding of the empty blocks OpenBao's
// flushes leave in the deflate stream. A flip there leaves the snapshot as
// it was; every other flip must be refused.
func TestEveryBitFlipThatChangesTheSnapshotIsRefused(t *testing.T) {
	data := fixture(t, "with-data.snap")
	want := decompressed(data)
	harmless := 0
	for pos := 0; pos < len(data); pos += 5 {
		flipped := bytes.Clone(data)
		flipped[pos] ^= byte(1) << (pos % 8)
		if _, err := snapshot.Verify(bytes.NewReader(flipped)); err != nil {
			continue
		}
		if !bytes.Equal(decompressed(flipped), want) {
			t.Fatalf("flipping bit %d of byte %d changed the snapshot unnoticed", pos%8, pos)
		}
		harmless++
	}
	if harmless > len(data)/5/20 {
		t.Errorf("%d of %d flips changed nothing; expected a handful", harmless, len(data)/5)
	}
}

type entry struct {
	name string
	data []byte
}

// unpack reads the entries of a snapshot in order.
func unpack(t *testing.T, data []byte) []entry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []entry
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{hdr.Name, b})
	}
}

// pack writes entries as a snapshot, a valid gzipped tar archive.
func pack(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o600, Size: int64(len(e.data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sums(entries []entry, names ...string) []byte {
	var b strings.Builder
	for _, e := range entries {
		for _, n := range names {
			if e.name == n {
				fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256(e.data), e.name)
			}
		}
	}
	return []byte(b.String())
}

func edit(entries []entry, name string, f func([]byte) []byte) []entry {
	out := make([]entry, 0, len(entries))
	for _, e := range entries {
		if e.name == name {
			e.data = f(bytes.Clone(e.data))
		}
		out = append(out, e)
	}
	return out
}

func without(entries []entry, name string) []entry {
	var out []entry
	for _, e := range entries {
		if e.name != name {
			out = append(out, e)
		}
	}
	return out
}

// TestWellFormedArchivesThatAreNotTheSnapshotAreRefused rebuilds the real
// snapshot as valid gzip and tar with one thing changed each time, so that
// only the snapshot's own rules can catch it.
func TestWellFormedArchivesThatAreNotTheSnapshotAreRefused(t *testing.T) {
	real := unpack(t, fixture(t, "with-data.snap"))
	if got := pack(t, real); func() error { _, err := snapshot.Verify(bytes.NewReader(got)); return err }() != nil {
		t.Fatal("the repacked real snapshot does not check out; the cases below would prove nothing")
	}
	flipState := edit(real, snapshot.StateEntry, func(b []byte) []byte { b[len(b)/2] ^= 1; return b })
	resized := edit(real, snapshot.StateEntry, func(b []byte) []byte { return append(b, 0) })
	resized = edit(resized, snapshot.SumsEntry, func([]byte) []byte { return sums(resized, snapshot.MetaEntry, snapshot.StateEntry) })
	cases := map[string]struct {
		entries []entry
		reason  string
	}{
		"state.bin changed, sums not":     {flipState, snapshot.ReasonSnapshotChecksumMismatch},
		"state.bin longer than meta says": {resized, snapshot.ReasonSnapshotCorrupt},
		"no sealed sums":                  {without(real, snapshot.SealedEntry), snapshot.ReasonSnapshotIncomplete},
		"empty sealed sums":               {edit(real, snapshot.SealedEntry, func([]byte) []byte { return nil }), snapshot.ReasonSnapshotIncomplete},
		"no sums":                         {without(real, snapshot.SumsEntry), snapshot.ReasonSnapshotIncomplete},
		"no state":                        {without(real, snapshot.StateEntry), snapshot.ReasonSnapshotIncomplete},
		"an extra file":                   {append(real, entry{"notes.txt", []byte("x")}), snapshot.ReasonSnapshotCorrupt},
		"state.bin twice":                 {append(real, real[1]), snapshot.ReasonSnapshotCorrupt},
		"sums listing a third file": {edit(real, snapshot.SumsEntry, func(b []byte) []byte {
			return append(b, []byte(fmt.Sprintf("%x  other\n", sha256.Sum256(nil)))...)
		}), snapshot.ReasonSnapshotCorrupt},
		"sums that are not sums": {edit(real, snapshot.SumsEntry, func([]byte) []byte { return []byte("hello\n") }), snapshot.ReasonSnapshotCorrupt},
		"meta that is not JSON":  {edit(real, snapshot.MetaEntry, func([]byte) []byte { return []byte("{") }), snapshot.ReasonSnapshotCorrupt},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := snapshot.Verify(bytes.NewReader(pack(t, tc.entries)))
			if reasonOf(err) != tc.reason {
				t.Errorf("%v, want reason %s", err, tc.reason)
			}
		})
	}
}

func TestDataAfterTheSnapshotIsRefused(t *testing.T) {
	data := fixture(t, "empty.snap")
	var member bytes.Buffer
	zw := gzip.NewWriter(&member)
	zw.Write([]byte("more"))
	zw.Close()
	cases := map[string][]byte{
		"garbage after the gzip stream": append(bytes.Clone(data), "garbage"...),
		"a second gzip member":          append(bytes.Clone(data), member.Bytes()...),
		"nothing at all":                nil,
	}
	for name, input := range cases {
		if _, err := snapshot.Verify(bytes.NewReader(input)); err == nil {
			t.Errorf("%s: checked out", name)
		}
	}
}

func TestErrorsQuoteNothingOfTheSnapshot(t *testing.T) {
	real := unpack(t, fixture(t, "with-data.snap"))
	secret := "s.SECRET-IN-AN-ENTRY-NAME"
	for _, input := range [][]byte{
		pack(t, append(real, entry{secret, []byte(secret)})),
		pack(t, edit(real, snapshot.SumsEntry, func([]byte) []byte { return []byte(secret) })),
		pack(t, edit(real, snapshot.MetaEntry, func([]byte) []byte { return []byte(secret) })),
	} {
		_, err := snapshot.Verify(bytes.NewReader(input))
		if err == nil || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("error %v", err)
		}
	}
}
