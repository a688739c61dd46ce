package backup

import (
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// keyTimeLayout is the time in an object's name: UTC, sortable as text.
const keyTimeLayout = "20060102T150405Z"

// objectNameRE matches the names ObjectKey and Prover.SignedObjectKey
// give, under a prefix: the time, the id, and the provenance tag, which
// names from before provenance lack.
var objectNameRE = regexp.MustCompile(`^([0-9]{8}T[0-9]{6}Z)-([0-9a-f]{8})(?:-([0-9a-f]{32}))?\.snap$`)

// ObjectPrefix is the "directory" of a cluster's snapshots:
// <pathPrefix>/<namespace>/<cluster>/, or <namespace>/<cluster>/ without
// a pathPrefix. It ends in a slash, so it never covers another cluster
// whose name starts with this one's.
func ObjectPrefix(pathPrefix, namespace, cluster string) string {
	parts := []string{namespace, cluster}
	if p := strings.Trim(pathPrefix, "/"); p != "" {
		parts = append([]string{p}, parts...)
	}
	return strings.Join(parts, "/") + "/"
}

// ObjectKey names a snapshot taken at t without a provenance tag:
// <prefix><YYYYMMDDThhmmssZ>-<id>.snap, the form of earlier releases. The
// executor names its snapshots with Prover.SignedObjectKey.
func ObjectKey(prefix string, t time.Time, id string) string {
	return prefix + t.UTC().Format(keyTimeLayout) + "-" + id + ".snap"
}

// NewObjectID returns the short random part of an object's name: eight
// hex digits (the head of a random UUID), so that two snapshots taken in
// the same second never share a name.
func NewObjectID(random io.Reader) (string, error) {
	b := make([]byte, 4)
	if _, err := io.ReadFull(random, b); err != nil {
		return "", fmt.Errorf("object id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// ParseObjectKey returns the time in the name of a snapshot directly under
// prefix; ok is false for any other key: another cluster's (a deeper
// path), or an object not named in the executor's form. It proves nothing:
// anyone who may write to the prefix can choose such a name (Prover.Prove
// proves).
func ParseObjectKey(prefix, key string) (t time.Time, ok bool) {
	t, _, ok = matchObjectKey(prefix, key)
	return t, ok
}

// matchObjectKey reads the name of a snapshot directly under prefix: its
// time, and the submatches of objectNameRE (time, id, tag; the tag ""
// when the name has none). ok is false for any other key.
func matchObjectKey(prefix, key string) (t time.Time, m []string, ok bool) {
	name, found := strings.CutPrefix(key, prefix)
	if !found {
		return time.Time{}, nil, false
	}
	if m = objectNameRE.FindStringSubmatch(name); m == nil {
		return time.Time{}, nil, false
	}
	t, err := time.Parse(keyTimeLayout, m[1])
	return t, m, err == nil
}
