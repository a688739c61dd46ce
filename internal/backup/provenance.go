package backup

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Provenance: which objects under a cluster's prefix its own executor
// wrote.
//
// Anyone who may write to the prefix can put an object there under a name
// of the executor's form, such as 99991231T000000Z-xxxxxxxx.snap; trusted by
// its name, it would be restored as source.latest and push real snapshots
// out of retention's maxCount. So the executor signs each name it gives: the
// name ends in a tag, HMAC-SHA-256 (truncated to 128 bits) of the
// namespace, the cluster and the name's time and id, keyed by the cluster's
// provenance key, 32 random bytes the operator keeps in the Secret
// <cluster>-backup-provenance and mounts into the backup and restore Jobs
// only. Whoever cannot read that Secret cannot make a tag, however much of
// the store they may write, so source.latest and retention consider proven
// names only and ignore (and report) the rest; retention never deletes an
// object it cannot prove was written for this cluster.
//
// Why a signed name and not the alternatives:
//   - plain object metadata is forgeable by the same writer;
//   - metadata carrying the MAC would work, but S3's listing does not
//     return metadata (one HEAD per object), and a copy between buckets may
//     drop it; the name is listed and copied everywhere;
//   - the OpenBaoBackups' recorded key and SHA-256 cannot be forged, but
//     only historyLimit scheduled ones are kept (10 by default, at most
//     100), fewer than a maxCount or maxAge may keep, and none survive the
//     cluster for a recovery under the same name.
//
// The tag proves who named the object, not its bytes: a writer may still
// replace the bytes of a real name. expectedSHA256 and OpenBao's own seal
// check guard the bytes; this guards the choice.
//
// The key is bound to the namespace and the cluster's name, not to the
// bucket or pathPrefix, so snapshots copied to another store stay proven;
// the Secret has no owner and outlives the cluster like its data (deleted
// only by deletionPolicy DeleteAll), so a cluster recovered under the same
// name proves its predecessor's snapshots.

// ProvenanceKeyBytes is the size of a provenance key.
const ProvenanceKeyBytes = 32

// ProvenanceDataKey is the key of the provenance Secret's data.
const ProvenanceDataKey = "key"

// tagHexLen is the length of a name's tag: 128 bits in hex.
const tagHexLen = 32

// NewProvenanceKey draws a provenance key.
func NewProvenanceKey(random io.Reader) ([]byte, error) {
	key := make([]byte, ProvenanceKeyBytes)
	if _, err := io.ReadFull(random, key); err != nil {
		return nil, fmt.Errorf("provenance key: %w", err)
	}
	return key, nil
}

// Prover signs and proves the names of one cluster's snapshots. Its zero
// value, or one without a key, signs nothing and proves nothing.
type Prover struct {
	key                []byte
	namespace, cluster string
}

// NewProver is the prover of cluster namespace/cluster with key; a key of
// the wrong size proves nothing.
func NewProver(key []byte, namespace, cluster string) Prover {
	if len(key) != ProvenanceKeyBytes {
		key = nil
	}
	return Prover{key: key, namespace: namespace, cluster: cluster}
}

// ForCluster is the prover of another cluster of the namespace with the
// same key: a restore proves the names of its source cluster's snapshots
// with that cluster's key.
func (p Prover) ForCluster(cluster string) Prover {
	return Prover{key: p.key, namespace: p.namespace, cluster: cluster}
}

// ForSource is the prover of cluster namespace/cluster with the same key:
// a standby proves the names of a source that ran in another namespace
// (of another Kubernetes cluster) as that namespace's.
func (p Prover) ForSource(namespace, cluster string) Prover {
	return Prover{key: p.key, namespace: namespace, cluster: cluster}
}

// CanSign says the prover holds a key.
func (p Prover) CanSign() bool { return len(p.key) > 0 }

func (p Prover) tag(stamp, id string) string {
	mac := hmac.New(sha256.New, p.key)
	// NUL-separated: none of the parts can hold a NUL.
	fmt.Fprintf(mac, "openbao-operator/snapshot-name/v1\x00%s\x00%s\x00%s-%s", p.namespace, p.cluster, stamp, id)
	return hex.EncodeToString(mac.Sum(nil))[:tagHexLen]
}

// SignedObjectKey names a snapshot taken at t with its tag:
// <prefix><YYYYMMDDThhmmssZ>-<id>-<tag>.snap.
func (p Prover) SignedObjectKey(prefix string, t time.Time, id string) string {
	stamp := t.UTC().Format(keyTimeLayout)
	return prefix + stamp + "-" + id + "-" + p.tag(stamp, id) + ".snap"
}

// Prove returns the time in the name of a snapshot directly under prefix
// whose tag this prover made; ok is false for any other key.
func (p Prover) Prove(prefix, key string) (t time.Time, ok bool) {
	if !p.CanSign() {
		return time.Time{}, false
	}
	t, m, ok := matchObjectKey(prefix, key)
	if !ok || m[3] == "" || !hmac.Equal([]byte(m[3]), []byte(p.tag(m[1], m[2]))) {
		return time.Time{}, false
	}
	return t, true
}

// Snapshot is a proven snapshot: its key and the time in its name.
type Snapshot struct {
	Key string
	At  time.Time
}

// Ignored is what a choice among snapshots left out because it could not
// be proven: how many objects directly under the prefix, and the first of
// them by key, as an example (an object's name: no secret).
type Ignored struct {
	Count   int    `json:"count"`
	Example string `json:"example,omitempty"`
}

// Message says what was ignored, or "" when nothing was.
func (i *Ignored) Message() string {
	if i == nil || i.Count == 0 {
		return ""
	}
	return fmt.Sprintf("ignored %d object(s) under the cluster's prefix that its executor cannot prove it wrote "+
		"(no valid provenance tag in the name, such as %s): neither restored as latest nor deleted by retention", i.Count, i.Example)
}

// Proven sorts the keys directly under prefix: those p proves, newest
// first (the key breaks ties, so the order never depends on the
// listing's), and the others, ignored. Deeper keys (a path of their own)
// are neither: they are not this cluster's snapshots.
func Proven(p Prover, prefix string, keys []string) ([]Snapshot, *Ignored) {
	var proven []Snapshot
	var ignored []string
	for _, k := range keys {
		rest, under := strings.CutPrefix(k, prefix)
		if !under || rest == "" || strings.Contains(rest, "/") {
			continue
		}
		if t, ok := p.Prove(prefix, k); ok {
			proven = append(proven, Snapshot{Key: k, At: t})
		} else {
			ignored = append(ignored, k)
		}
	}
	sort.Slice(proven, func(i, j int) bool {
		if !proven[i].At.Equal(proven[j].At) {
			return proven[i].At.After(proven[j].At)
		}
		return proven[i].Key > proven[j].Key
	})
	if len(ignored) == 0 {
		return proven, nil
	}
	sort.Strings(ignored)
	return proven, &Ignored{Count: len(ignored), Example: ignored[0]}
}
