// Package sealkey decides the static seal key of a cluster: how it is made,
// what form OpenBao reads, and what the operator does with a Secret that
// already holds one. A key is created once and never replaced: it wraps
// OpenBao's root key, so a new key would make the stored data unreadable.
// It is pure; the random source is injected.
package sealkey

import (
	"errors"
	"fmt"
	"io"
)

// Static seal key material, in the form OpenBao's static seal reads from
// file:///etc/bao/unseal/key: exactly 32 raw bytes. A trailing newline
// makes it 33 bytes, which OpenBao refuses.
const (
	Size = 32
	// DataKey is the data key of <cluster>-unseal-key; the chart mounts
	// the Secret at /etc/bao/unseal, so the file is .../key.
	DataKey = "key"
)

// ErrInvalid is wrapped by every complaint about a key. Messages name
// lengths, never bytes.
var ErrInvalid = errors.New("invalid static unseal key")

// New reads Size bytes from random (crypto/rand.Reader in the operator, a
// fixed reader in tests).
func New(random io.Reader) ([]byte, error) {
	key := make([]byte, Size)
	if _, err := io.ReadFull(random, key); err != nil {
		return nil, fmt.Errorf("generate static unseal key: %w", err)
	}
	return key, nil
}

// Validate checks an existing key before it is mounted. A key
// that fails is never replaced by the operator: data sealed with it would
// be lost.
func Validate(key []byte) error {
	switch n := len(key); {
	case n == Size:
		return nil
	case n == Size+1 && (key[n-1] == '\n'):
		return fmt.Errorf("%w: %d bytes ending in a newline; store the 32 raw bytes without it", ErrInvalid, n)
	case n == Size+2 && key[n-2] == '\r' && key[n-1] == '\n':
		return fmt.Errorf("%w: %d bytes ending in CRLF; store the 32 raw bytes without it", ErrInvalid, n)
	default:
		return fmt.Errorf("%w: %d bytes, want exactly %d raw bytes", ErrInvalid, n, Size)
	}
}

// Action is what the seal-material step does with
// <cluster>-unseal-key.
type Action string

// Unseal key actions.
const (
	// Create: the Secret is missing; create it with New.
	Create Action = "Create"
	// Keep: the Secret holds a valid key; mount it as it is.
	Keep Action = "Keep"
	// Degraded: the Secret holds no valid key. It is never replaced,
	// since OpenBao's data may be sealed with it; report the error's
	// message.
	Degraded Action = "Degraded"
)

// Decide looks at the Secret's data (nil when the Secret does not exist)
// and says what to do; the error explains Degraded.
func Decide(exists bool, data map[string][]byte) (Action, error) {
	if !exists {
		return Create, nil
	}
	key, ok := data[DataKey]
	if !ok {
		return Degraded, fmt.Errorf("%w: the Secret has no data key %q", ErrInvalid, DataKey)
	}
	if err := Validate(key); err != nil {
		return Degraded, err
	}
	return Keep, nil
}
