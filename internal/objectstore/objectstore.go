// Package objectstore is the small interface backups are written through:
// a streaming put in bounded memory, stat, list and delete. S3 and every
// S3-compatible store implement it in s3store; GCS and Azure Blob would
// implement the same four calls.
package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Object is one stored object.
type Object struct {
	Key          string
	Size         int64
	LastModified time.Time
	// Checksum is the store's own checksum of the object, in the store's
	// own form; Put returns the one the store must hold for what was sent.
	Checksum string
	// Version identifies these bytes of the object, in the store's own
	// opaque form (a version ID, else an ETag); Stat fills it, and
	// OpenVersion reads exactly these bytes or nothing.
	Version string
}

// PutResult is what Put sent.
type PutResult struct {
	Size int64
	// Checksum is computed from the bytes sent, in the form Stat returns,
	// so that equal checksums prove the store holds those bytes.
	Checksum string
}

// Store holds objects under keys.
type Store interface {
	// Put streams r into key, holding at most a few parts in memory
	// whatever the size. The object exists only once r has returned
	// io.EOF and every part was stored; any other error of r, or of the
	// store, aborts the upload and leaves no object and no parts.
	Put(ctx context.Context, key string, r io.Reader) (PutResult, error)
	// Stat reads an object's size and checksum; ErrNotFound when absent.
	// A store that keeps no checksums leaves Checksum empty.
	Stat(ctx context.Context, key string) (Object, error)
	// Open reads an object back.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// OpenVersion reads the object only while it is still the version
	// Stat returned; a replaced object fails with ErrVersionChanged, at the
	// open or at the first read. A restore reads one object twice (first to
	// check it, then to post it) and must post the bytes it checked.
	OpenVersion(ctx context.Context, key, version string) (io.ReadCloser, error)
	// List returns every object whose key starts with prefix, at any
	// depth.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Delete removes an object; an absent one counts as removed.
	Delete(ctx context.Context, key string) error
}

// ErrNotFound says the object does not exist.
var ErrNotFound = errors.New("object not found")

// ErrVersionChanged says the object was replaced since it was read.
var ErrVersionChanged = errors.New("object changed since it was read")

// Error is a failure of a store's call, classified.
type Error struct {
	Op  string // "put", "stat", "list", "delete", "check"
	Key string
	// Permanent says a retry cannot help (credentials refused, no such
	// bucket); otherwise the failure may pass (network, 5xx, throttling).
	Permanent bool
	Err       error
}

func (e *Error) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("object store %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("object store %s %s: %v", e.Op, e.Key, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// IsPermanent says whether err is a store failure that a retry cannot fix.
func IsPermanent(err error) bool {
	var se *Error
	return errors.As(err, &se) && se.Permanent
}

// Download passes a download's failures (not its end) through classify,
// so that an error in mid-read is told as the store's other errors are.
func Download(body io.ReadCloser, classify func(error) error) io.ReadCloser {
	return &download{body: body, classify: classify}
}

type download struct {
	body     io.ReadCloser
	classify func(error) error
}

func (d *download) Read(p []byte) (int, error) {
	n, err := d.body.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = d.classify(err)
	}
	return n, err
}

func (d *download) Close() error { return d.body.Close() }
