package sealkey_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/openbao/operator/internal/sealkey"
)

func TestNewUnsealKeyReads32BytesFromTheInjectedReader(t *testing.T) {
	src := bytes.Repeat([]byte{0xab}, 40)
	key, err := sealkey.New(bytes.NewReader(src))
	if err != nil || !bytes.Equal(key, src[:32]) {
		t.Fatalf("key %x, error %v", key, err)
	}
	if err := sealkey.Validate(key); err != nil {
		t.Errorf("a generated key fails validation: %v", err)
	}
	_, err = sealkey.New(bytes.NewReader(src[:31]))
	if err == nil {
		t.Error("a short random source gave a key")
	}
}

func TestValidateUnsealKey(t *testing.T) {
	raw := bytes.Repeat([]byte{'k'}, 32)
	tests := map[string]struct {
		key  []byte
		ok   bool
		hint string
	}{
		"32 raw bytes are accepted":                       {raw, true, ""},
		"32 raw bytes ending in 0x0a are a valid key":     {append(bytes.Repeat([]byte{1}, 31), '\n'), true, ""},
		"a trailing newline is rejected with the reason":  {append(append([]byte{}, raw...), '\n'), false, "newline"},
		"a trailing CRLF is rejected with the reason":     {append(append([]byte{}, raw...), '\r', '\n'), false, "CRLF"},
		"an empty key is rejected":                        {nil, false, "0 bytes"},
		"a 64-character hex key is not the form we mount": {bytes.Repeat([]byte{'a'}, 64), false, "64 bytes"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := sealkey.Validate(tc.key)
			if (err == nil) != tc.ok {
				t.Fatalf("error %v, want ok=%v", err, tc.ok)
			}
			if err != nil && (!errors.Is(err, sealkey.ErrInvalid) || !strings.Contains(err.Error(), tc.hint)) {
				t.Errorf("error %v, want ErrInvalidUnsealKey naming %q", err, tc.hint)
			}
			if err != nil && bytes.Contains([]byte(err.Error()), raw[:8]) {
				t.Errorf("the error quotes key bytes: %v", err)
			}
		})
	}
}

func TestDecideUnsealKey(t *testing.T) {
	good := bytes.Repeat([]byte{7}, 32)
	tests := map[string]struct {
		exists bool
		data   map[string][]byte
		want   sealkey.Action
	}{
		"a missing Secret is created":                            {false, nil, sealkey.Create},
		"a valid key is kept":                                    {true, map[string][]byte{"key": good}, sealkey.Keep},
		"a key with a trailing newline degrades, never replaced": {true, map[string][]byte{"key": append(append([]byte{}, good...), '\n')}, sealkey.Degraded},
		"a Secret without the key data key degrades":             {true, map[string][]byte{"unseal": good}, sealkey.Degraded},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := sealkey.Decide(tc.exists, tc.data)
			if got != tc.want || (got == sealkey.Degraded) != (err != nil) {
				t.Errorf("%s, %v; want %s", got, err, tc.want)
			}
		})
	}
}
