// Package memstore is an in-memory objectstore.Store for tests, with the
// same contract as a real store: an object appears only when its stream
// ended with io.EOF. Failures are injected through its fields.
package memstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/openbao/operator/internal/objectstore"
)

// Store holds objects in memory.
type Store struct {
	mu      sync.Mutex
	objects map[string]stored
	// Now stamps LastModified; nil uses time.Now.
	Now func() time.Time

	// PutErr, StatErr, ListErr and DeleteErr fail those calls.
	PutErr, StatErr, ListErr, DeleteErr error
	// CorruptStat makes Stat report a checksum that differs from what
	// Put sent, as a store that damaged the object would.
	CorruptStat bool
	// NoChecksums makes Stat report no checksum, as stores without S3
	// checksums do.
	NoChecksums bool
	// Deleted records the keys deleted, in order.
	Deleted []string
	// OnOpen, when set, runs before each OpenVersion, for example to
	// replace the object between a restore's two reads.
	OnOpen func(key string)

	writes int
}

type stored struct {
	data     []byte
	modified time.Time
	version  string
}

// New returns an empty store.
func New() *Store { return &Store{objects: map[string]stored{}} }

var _ objectstore.Store = (*Store)(nil)

func checksum(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Put reads r to its end and stores it only if it ended with io.EOF.
func (s *Store) Put(_ context.Context, key string, r io.Reader) (objectstore.PutResult, error) {
	if err := s.fail(s.PutErr, "put", key); err != nil {
		return objectstore.PutResult{}, err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return objectstore.PutResult{}, &objectstore.Error{Op: "put", Key: key, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = s.newVersion(data, s.now())
	return objectstore.PutResult{Size: int64(len(data)), Checksum: checksum(data)}, nil
}

// Stat returns the object's size and checksum.
func (s *Store) Stat(_ context.Context, key string) (objectstore.Object, error) {
	if err := s.fail(s.StatErr, "stat", key); err != nil {
		return objectstore.Object{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return objectstore.Object{}, fmt.Errorf("stat %s: %w", key, objectstore.ErrNotFound)
	}
	sum := checksum(o.data)
	switch {
	case s.NoChecksums:
		sum = ""
	case s.CorruptStat:
		sum = checksum(append(bytes.Clone(o.data), 0))
	}
	return objectstore.Object{Key: key, Size: int64(len(o.data)), LastModified: o.modified, Checksum: sum, Version: o.version}, nil
}

// newVersion stores data as a new version; the caller holds s.mu.
func (s *Store) newVersion(data []byte, modified time.Time) stored {
	s.writes++
	return stored{data: data, modified: modified, version: fmt.Sprintf("v%d", s.writes)}
}

// OpenVersion returns the object's bytes while it is still that version.
func (s *Store) OpenVersion(ctx context.Context, key, version string) (io.ReadCloser, error) {
	if s.OnOpen != nil {
		s.OnOpen(key)
	}
	s.mu.Lock()
	o, ok := s.objects[key]
	s.mu.Unlock()
	if ok && o.version != version {
		return nil, &objectstore.Error{Op: "get", Key: key, Permanent: true, Err: objectstore.ErrVersionChanged}
	}
	return s.Open(ctx, key)
}

// Open returns the object's bytes (damaged when CorruptStat is set).
func (s *Store) Open(_ context.Context, key string) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return nil, fmt.Errorf("open %s: %w", key, objectstore.ErrNotFound)
	}
	data := o.data
	if s.CorruptStat {
		data = append(bytes.Clone(data), 0)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// List returns the objects under prefix, sorted by key.
func (s *Store) List(_ context.Context, prefix string) ([]objectstore.Object, error) {
	if err := s.fail(s.ListErr, "list", prefix); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []objectstore.Object
	for k, o := range s.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, objectstore.Object{Key: k, Size: int64(len(o.data)), LastModified: o.modified})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete removes the object.
func (s *Store) Delete(_ context.Context, key string) error {
	if err := s.fail(s.DeleteErr, "delete", key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, key)
	s.Deleted = append(s.Deleted, key)
	return nil
}

// Add stores an object directly, for a test's setup.
func (s *Store) Add(key string, data []byte, modified time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = s.newVersion(data, modified)
}

// Keys returns the stored keys, sorted.
func (s *Store) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.objects))
	for k := range s.objects {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Data returns an object's bytes.
func (s *Store) Data(key string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objects[key].data
}

func (s *Store) fail(err error, op, key string) error {
	if err == nil {
		return nil
	}
	var se *objectstore.Error
	if errors.As(err, &se) {
		return err
	}
	return &objectstore.Error{Op: op, Key: key, Err: err}
}
