package bootstrap

import (
	"errors"
	"fmt"
	"io"
)

// Static seal key material, in the form OpenBao's static seal reads from
// file:///etc/bao/unseal/key: exactly 32 raw bytes. A trailing newline
// makes it 33 bytes, which OpenBao refuses.
const (
	UnsealKeySize = 32
	// UnsealKeyDataKey is the data key of <cluster>-unseal-key; the chart
	// mounts the Secret at /etc/bao/unseal, so the file is .../key.
	UnsealKeyDataKey = "key"
	// RootTokenDataKey is the data key of <cluster>-root-token.
	RootTokenDataKey = "token"
)

// ErrInvalidUnsealKey is wrapped by every complaint about a key. Messages
// name lengths, never bytes.
var ErrInvalidUnsealKey = errors.New("invalid static unseal key")

// NewUnsealKey reads UnsealKeySize bytes from random (crypto/rand.Reader in
// the operator, a fixed reader in tests).
func NewUnsealKey(random io.Reader) ([]byte, error) {
	key := make([]byte, UnsealKeySize)
	if _, err := io.ReadFull(random, key); err != nil {
		return nil, fmt.Errorf("generate static unseal key: %w", err)
	}
	return key, nil
}

// ValidateUnsealKey checks an existing key before it is mounted. A key
// that fails is never replaced by the operator: data sealed with it would
// be lost.
func ValidateUnsealKey(key []byte) error {
	switch n := len(key); {
	case n == UnsealKeySize:
		return nil
	case n == UnsealKeySize+1 && (key[n-1] == '\n'):
		return fmt.Errorf("%w: %d bytes ending in a newline; store the 32 raw bytes without it", ErrInvalidUnsealKey, n)
	case n == UnsealKeySize+2 && key[n-2] == '\r' && key[n-1] == '\n':
		return fmt.Errorf("%w: %d bytes ending in CRLF; store the 32 raw bytes without it", ErrInvalidUnsealKey, n)
	default:
		return fmt.Errorf("%w: %d bytes, want exactly %d raw bytes", ErrInvalidUnsealKey, n, UnsealKeySize)
	}
}

// UnsealKeyAction is what the seal-material step does with
// <cluster>-unseal-key.
type UnsealKeyAction string

// Unseal key actions.
const (
	// UnsealKeyCreate: the Secret is missing; create it with NewUnsealKey.
	UnsealKeyCreate UnsealKeyAction = "Create"
	// UnsealKeyKeep: the Secret holds a valid key; mount it as it is.
	UnsealKeyKeep UnsealKeyAction = "Keep"
	// UnsealKeyDegraded: the Secret holds no valid key. It is never
	// replaced, since OpenBao's data may be sealed with it; set Degraded
	// ReasonInvalidUnsealKey with the error's message.
	UnsealKeyDegraded UnsealKeyAction = "Degraded"
)

// ReasonInvalidUnsealKey is the Degraded reason for UnsealKeyDegraded.
const ReasonInvalidUnsealKey = "InvalidUnsealKey"

// DecideUnsealKey looks at the Secret's data (nil when the Secret does not
// exist) and says what to do; the error explains UnsealKeyDegraded.
func DecideUnsealKey(exists bool, data map[string][]byte) (UnsealKeyAction, error) {
	if !exists {
		return UnsealKeyCreate, nil
	}
	key, ok := data[UnsealKeyDataKey]
	if !ok {
		return UnsealKeyDegraded, fmt.Errorf("%w: the Secret has no data key %q", ErrInvalidUnsealKey, UnsealKeyDataKey)
	}
	if err := ValidateUnsealKey(key); err != nil {
		return UnsealKeyDegraded, err
	}
	return UnsealKeyKeep, nil
}
