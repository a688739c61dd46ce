// Package snapshot checks an OpenBao Raft snapshot while it streams, in
// bounded memory. A snapshot (GET sys/storage/raft/snapshot) is a gzipped
// tar archive of meta.json (Raft's metadata), state.bin (the data),
// SHA256SUMS (the SHA-256 of the other two) and SHA256SUMS.sealed (the same
// sums sealed with the barrier, which only the cluster can open). A
// snapshot checks out when the gzip stream ends with its CRC, the archive
// holds exactly these entries, each once, the sums match the entries,
// state.bin has the size meta.json gives, and the sealed sums are present.
// Errors name the failure, never a byte of the snapshot.
package snapshot

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Entry names.
const (
	MetaEntry   = "meta.json"
	StateEntry  = "state.bin"
	SumsEntry   = "SHA256SUMS"
	SealedEntry = "SHA256SUMS.sealed"
)

// maxSmallEntry bounds what is held in memory: everything but state.bin.
const maxSmallEntry = 64 << 10

// Reasons of an *Error, CamelCase for conditions.
const (
	ReasonSnapshotTruncated        = "SnapshotTruncated"
	ReasonSnapshotCorrupt          = "SnapshotCorrupt"
	ReasonSnapshotChecksumMismatch = "SnapshotChecksumMismatch"
	ReasonSnapshotIncomplete       = "SnapshotIncomplete"
)

// Error says why a snapshot does not check out.
type Error struct {
	Reason string
	Detail string
}

func (e *Error) Error() string { return "snapshot check: " + e.Detail }

func fail(reason, format string, args ...any) error {
	return &Error{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Info is what a checked snapshot says about itself.
type Info struct {
	// Index and Term are the Raft position the snapshot was taken at.
	Index, Term uint64
	// StateSize is the size of state.bin.
	StateSize int64
}

type meta struct {
	Index uint64
	Term  uint64
	Size  int64
}

// Verify reads a whole snapshot from r and checks it.
func Verify(r io.Reader) (Info, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return Info{}, classify("read the gzip header", err)
	}
	c := &checker{digests: map[string][]byte{}}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Info{}, classify("read the archive", err)
		}
		if err := c.entry(hdr, tr); err != nil {
			return Info{}, err
		}
	}
	if err := drainPadding(zr); err != nil {
		return Info{}, err
	}
	return c.finish()
}

type checker struct {
	digests map[string][]byte
	sums    []byte
	meta    meta
	sealed  bool
	state   int64
}

func (c *checker) entry(hdr *tar.Header, tr *tar.Reader) error {
	name := hdr.Name
	switch name {
	case MetaEntry, StateEntry, SumsEntry, SealedEntry:
	default:
		return fail(ReasonSnapshotCorrupt, "the archive holds an entry that is not part of a snapshot")
	}
	if _, seen := c.digests[name]; seen {
		return fail(ReasonSnapshotCorrupt, "the archive holds %s twice", name)
	}
	if hdr.Typeflag != tar.TypeReg {
		return fail(ReasonSnapshotCorrupt, "%s is not a regular file", name)
	}
	h := sha256.New()
	var small bytes.Buffer
	var dst io.Writer = h
	if name != StateEntry {
		if hdr.Size > maxSmallEntry {
			return fail(ReasonSnapshotCorrupt, "%s is %d bytes, more than a snapshot's %s ever holds", name, hdr.Size, name)
		}
		dst = io.MultiWriter(h, &small)
	}
	n, err := io.Copy(dst, tr)
	if err != nil {
		return classify("read "+name, err)
	}
	c.digests[name] = h.Sum(nil)
	switch name {
	case StateEntry:
		c.state = n
	case MetaEntry:
		if err := json.Unmarshal(small.Bytes(), &c.meta); err != nil {
			return fail(ReasonSnapshotCorrupt, "%s is not the JSON of Raft's snapshot metadata", name)
		}
	case SumsEntry:
		c.sums = small.Bytes()
	case SealedEntry:
		c.sealed = n > 0
	}
	return nil
}

// finish checks what only the whole archive can show.
func (c *checker) finish() (Info, error) {
	for _, name := range []string{MetaEntry, StateEntry, SumsEntry} {
		if _, ok := c.digests[name]; !ok {
			return Info{}, fail(ReasonSnapshotIncomplete, "the archive has no %s", name)
		}
	}
	if !c.sealed {
		return Info{}, fail(ReasonSnapshotIncomplete, "the archive has no %s, which OpenBao writes last", SealedEntry)
	}
	listed, err := parseSums(c.sums)
	if err != nil {
		return Info{}, err
	}
	for _, name := range []string{MetaEntry, StateEntry} {
		want, ok := listed[name]
		if !ok {
			return Info{}, fail(ReasonSnapshotCorrupt, "%s lists no digest for %s", SumsEntry, name)
		}
		if !bytes.Equal(want, c.digests[name]) {
			return Info{}, fail(ReasonSnapshotChecksumMismatch, "the SHA-256 of %s differs from %s", name, SumsEntry)
		}
	}
	if len(listed) != 2 {
		return Info{}, fail(ReasonSnapshotCorrupt, "%s lists %d files, a snapshot has 2", SumsEntry, len(listed))
	}
	if c.meta.Size != c.state {
		return Info{}, fail(ReasonSnapshotCorrupt, "%s is %d bytes where %s says %d", StateEntry, c.state, MetaEntry, c.meta.Size)
	}
	return Info{Index: c.meta.Index, Term: c.meta.Term, StateSize: c.state}, nil
}

// parseSums reads a SHA256SUMS file: "<hex digest>  <name>" per line.
func parseSums(data []byte) (map[string][]byte, error) {
	out := map[string][]byte{}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		digest, name, ok := strings.Cut(s.Text(), "  ")
		sum, err := hex.DecodeString(digest)
		if !ok || err != nil || len(sum) != sha256.Size {
			return nil, fail(ReasonSnapshotCorrupt, "%s is not a list of SHA-256 digests", SumsEntry)
		}
		if _, dup := out[name]; dup {
			return nil, fail(ReasonSnapshotCorrupt, "%s lists %s twice", SumsEntry, name)
		}
		out[name] = sum
	}
	return out, nil
}

// drainPadding reads the rest of the gzip stream after the archive's end:
// only zero padding may follow, and reaching the end checks the gzip CRC
// and length of everything.
func drainPadding(zr *gzip.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := zr.Read(buf)
		for _, b := range buf[:n] {
			if b != 0 {
				return fail(ReasonSnapshotCorrupt, "data follows the end of the archive")
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return classify("read the end of the gzip stream", err)
		}
	}
}

// classify names a read failure: the stream ended early, or it is not
// what it claims to be. The cause's text is kept only for errors of this
// process (the reader's own), never for the decoders', which could quote
// the input.
func classify(action string, err error) error {
	var corrupt flate.CorruptInputError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fail(ReasonSnapshotTruncated, "%s: the snapshot ends early", action)
	case errors.Is(err, gzip.ErrChecksum), errors.Is(err, gzip.ErrHeader), errors.Is(err, tar.ErrHeader),
		errors.Is(err, tar.ErrFieldTooLong), errors.As(err, &corrupt):
		return fail(ReasonSnapshotCorrupt, "%s: the data is not a valid gzipped tar archive", action)
	case errors.Is(err, io.EOF):
		return fail(ReasonSnapshotTruncated, "%s: the snapshot is empty", action)
	}
	var se *Error
	if errors.As(err, &se) {
		return err
	}
	return &readError{action: action, err: err}
}

// readError is a failure of the stream the snapshot came from (the
// connection, a canceled context); it wraps the cause.
type readError struct {
	action string
	err    error
}

func (e *readError) Error() string { return "snapshot check: " + e.action + ": " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }
