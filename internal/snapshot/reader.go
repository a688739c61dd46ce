package snapshot

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
)

// Reader passes a snapshot through unchanged and checks it on the way, in
// a goroutine of its own. It returns io.EOF only once the whole snapshot
// checked out; a snapshot that does not is an error instead, returned as
// soon as the check fails and at the latest in place of io.EOF. A consumer
// that completes its work only at io.EOF (a multipart upload) therefore
// never completes it for a bad snapshot.
type Reader struct {
	src     io.Reader
	pw      *io.PipeWriter
	verdict chan result
	sum     hash.Hash
	size    int64
	info    Info
	err     error
}

type result struct {
	info Info
	err  error
}

// checkBuffer is what the checking goroutine reads at once.
const checkBuffer = 256 << 10

// NewReader starts checking what is read from src.
func NewReader(src io.Reader) *Reader {
	pr, pw := io.Pipe()
	r := &Reader{src: src, pw: pw, verdict: make(chan result, 1), sum: sha256.New()}
	go func() {
		// Verify reads to the end of the stream: past the archive it looks
		// for a further gzip member, so it returns only after the writer
		// closed the pipe, or on a failure.
		info, err := Verify(bufio.NewReaderSize(pr, checkBuffer))
		pr.CloseWithError(errOr(err, io.EOF))
		r.verdict <- result{info, err}
	}()
	return r
}

func errOr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.src.Read(p)
	if n > 0 {
		r.sum.Write(p[:n])
		r.size += int64(n)
		if _, werr := r.pw.Write(p[:n]); werr != nil {
			return 0, r.finish(werr)
		}
	}
	switch {
	case errors.Is(err, io.EOF):
		r.pw.Close()
		return n, r.finish(nil)
	case err != nil:
		r.pw.CloseWithError(err)
		return n, r.finish(err)
	}
	return n, nil
}

// finish waits for the check and settles what Read returns from now on:
// the check's error, else cause, else io.EOF.
func (r *Reader) finish(cause error) error {
	v := <-r.verdict
	r.info = v.info
	switch {
	case v.err != nil && !isReadError(v.err):
		r.err = v.err
	case cause != nil && !errors.Is(cause, io.EOF):
		r.err = cause
	case v.err != nil:
		r.err = v.err
	default:
		r.err = io.EOF
	}
	return r.err
}

func isReadError(err error) bool {
	var re *readError
	return errors.As(err, &re)
}

// Close stops the check; call it when the stream is abandoned before its
// end, so the checking goroutine ends.
func (r *Reader) Close() error {
	if r.err == nil {
		r.pw.CloseWithError(errAbandoned)
		r.finish(errAbandoned)
	}
	return nil
}

var errAbandoned = errors.New("snapshot stream abandoned")

// Info returns what the snapshot said about itself, once Read returned io.EOF.
func (r *Reader) Info() Info { return r.info }

// Size returns the bytes passed through so far.
func (r *Reader) Size() int64 { return r.size }

// SHA256 returns the hex SHA-256 of the bytes passed through so far.
func (r *Reader) SHA256() string { return hex.EncodeToString(r.sum.Sum(nil)) }
