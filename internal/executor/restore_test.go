package executor_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/executor"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/restore"
)

// restoreRun runs the restore executor of the harness's cluster.
func (h *harness) restore(t *testing.T, mutate func(*restore.ExecutorConfig)) backup.Report {
	t.Helper()
	cfg := restore.ExecutorConfig{ExecutorConfig: h.cfg, Restore: "r1"}
	cfg.Backup, cfg.JWTRole = "", identity.RestoreRole
	mutate(&cfg)
	return executor.RunRestore(context.Background(), cfg, executor.Deps{
		OpenBao:  func(openbao.Options) (openbao.Client, error) { return h.bao, nil },
		NewStore: func(context.Context, objectstore.Config) (objectstore.Store, error) { return h.store, nil },
		ReadFile: func(p string) ([]byte, error) {
			v, ok := h.files[p]
			if !ok {
				return nil, fmt.Errorf("open %s: %w", p, fs.ErrNotExist)
			}
			return []byte(v), nil
		},
		Clock: clocktesting.NewFakeClock(time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)),
		Sleep: func(context.Context, time.Duration) { h.sleeps++ },
	})
}

func hexSHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func TestARestorePostsTheNewestSnapshotOfThisClusterAsChecked(t *testing.T) {
	h := newHarness(t)
	good := snapshotFixture(t, "with-data.snap")
	prefix := backup.ObjectPrefix("p", "ns", "bao")
	at := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	h.store.Add(signer("bao").SignedObjectKey(prefix, at, "00000001"), good, at)
	h.store.Add(signer("bao").SignedObjectKey(prefix, at.Add(-time.Hour), "00000002"), []byte("older"), at)
	h.store.Add(signer("bao-2").SignedObjectKey(backup.ObjectPrefix("p", "ns", "bao-2"), at.Add(time.Hour), "00000003"), []byte("another cluster's"), at)
	r := h.restore(t, func(c *restore.ExecutorConfig) { c.Latest, c.ExpectedSHA256 = true, hexSHA256(good) })
	if r.Failed() || r.Key != signer("bao").SignedObjectKey(prefix, at, "00000001") || r.SHA256 != hexSHA256(good) || r.RaftIndex == 0 {
		t.Fatalf("report %+v", r)
	}
	if !bytes.Equal(h.bao.Restored, good) || h.bao.RestoreForced || strings.Join(h.bao.Logins, ",") != "openbao-operator/restore" {
		t.Fatalf("OpenBao received %d bytes (forced %v), logins %v", len(h.bao.Restored), h.bao.RestoreForced, h.bao.Logins)
	}
	if strings.Contains(string(r.Encode()), issuedToken) || strings.Contains(string(r.Encode()), jwt) {
		t.Error("a secret is in the report")
	}
}

// A cluster bootstrapped from another's backup takes the newest snapshot
// under the source's prefix, not its own.
func TestABootstrapRestoreTakesTheSourcesNewestSnapshot(t *testing.T) {
	h := newHarness(t)
	good := snapshotFixture(t, "with-data.snap")
	at := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	source := backup.ObjectPrefix("p", "ns", "old")
	h.store.Add(signer("old").SignedObjectKey(source, at, "00000001"), good, at)
	h.store.Add(signer("bao").SignedObjectKey(backup.ObjectPrefix("p", "ns", "bao"), at.Add(time.Hour), "00000002"), []byte("this cluster's own"), at)
	r := h.restore(t, func(c *restore.ExecutorConfig) { c.Latest, c.SourceCluster = true, "old" })
	if r.Failed() || r.Key != signer("old").SignedObjectKey(source, at, "00000001") || !bytes.Equal(h.bao.Restored, good) {
		t.Fatalf("report %+v, OpenBao received %d bytes", r, len(h.bao.Restored))
	}
}

// A standby whose source ran in a namespace of another name (in another
// Kubernetes cluster) takes the newest snapshot under that namespace's
// prefix, proven as that namespace's names; a name the same key signed for
// this namespace, planted in that prefix, is not chosen.
func TestAStandbyRestoreTakesTheNewestSnapshotOfASourceInAnotherNamespace(t *testing.T) {
	h := newHarness(t)
	good := snapshotFixture(t, "with-data.snap")
	at := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	source := backup.ObjectPrefix("p", "site-a", "old")
	other := backup.NewProver([]byte(testProvenanceKey), "site-a", "old")
	h.store.Add(other.SignedObjectKey(source, at, "00000001"), good, at)
	h.store.Add(signer("old").SignedObjectKey(source, at.Add(time.Hour), "00000002"), []byte("signed for this namespace"), at)
	r := h.restore(t, func(c *restore.ExecutorConfig) { c.Latest, c.SourceCluster, c.SourceNamespace = true, "old", "site-a" })
	if r.Failed() || r.Key != other.SignedObjectKey(source, at, "00000001") || !bytes.Equal(h.bao.Restored, good) {
		t.Fatalf("report %+v, OpenBao received %d bytes", r, len(h.bao.Restored))
	}
}

// TestLatestIgnoresAPlantedFarFutureName injects the fault latest guards
// against: 99991231T000000Z-xxxxxxxx.snap, a valid snapshot, and a forged
// copy carrying a real name's tag, planted beside the real snapshot. The
// restore posts the real one and reports both planted objects; without
// the provenance key nothing is chosen, and the refusal says why.
func TestLatestIgnoresAPlantedFarFutureName(t *testing.T) {
	h := newHarness(t)
	good := snapshotFixture(t, "with-data.snap")
	prefix := backup.ObjectPrefix("p", "ns", "bao")
	at := time.Date(2025, 3, 1, 5, 6, 7, 0, time.UTC)
	real := signer("bao").SignedObjectKey(prefix, at, "00000001")
	h.store.Add(real, good, at)
	h.store.Add(planted, good, at)
	h.store.Add(forgedCopy(real), good, at)
	r := h.restore(t, func(c *restore.ExecutorConfig) { c.Latest = true })
	if r.Failed() || r.Key != real {
		t.Fatalf("restored %q (%s: %s), want %s", r.Key, r.Reason, r.Error, real)
	}
	if r.Unproven == nil || r.Unproven.Count != 2 || r.Unproven.Example != forgedCopy(real) { // the first by key
		t.Errorf("unproven %+v, want 2 with the example %s", r.Unproven, forgedCopy(real))
	}
	if strings.Contains(string(r.Encode()), testProvenanceKey) {
		t.Error("the provenance key is in the report")
	}

	h = newHarness(t)
	delete(h.files, "/provenance/key")
	h.store.Add(real, good, at)
	h.store.Add(planted, good, at)
	r = h.restore(t, func(c *restore.ExecutorConfig) { c.Latest = true })
	if r.Reason != restore.ReasonNoSnapshot || !strings.Contains(r.Error, "bao-backup-provenance") || len(h.bao.Restored) != 0 {
		t.Fatalf("without the key: %s: %s; OpenBao received %d bytes", r.Reason, r.Error, len(h.bao.Restored))
	}
}

// TestNothingUncheckedReachesOpenBao: each bad object is refused with its
// reason, without a retry of what cannot pass, and OpenBao receives no
// complete body. The first is the fault the one read guards against: a
// valid snapshot of this cluster, only not the one named, which nothing
// but its SHA-256 at its very end tells apart.
func TestNothingUncheckedReachesOpenBao(t *testing.T) {
	good := snapshotFixture(t, "with-data.snap")
	for _, tc := range []struct {
		name   string
		data   []byte
		expect string
		want   string
	}{
		{"a valid snapshot whose digest differs only at its end", good, strings.Repeat("0", 64), restore.ReasonDigestMismatch},
		{"a truncated snapshot", snapshotFixture(t, "truncated.snap"), "", restore.ReasonCorruptSnapshot},
		{"a bit flipped", snapshotFixture(t, "bit-flipped.snap"), "", restore.ReasonCorruptSnapshot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			key := "p/ns/bao/x.snap"
			h.store.Add(key, tc.data, time.Now())
			r := h.restore(t, func(c *restore.ExecutorConfig) { c.Key, c.ExpectedSHA256 = key, tc.expect })
			if r.Reason != tc.want || h.bao.Restored != nil || h.sleeps != 0 || !strings.Contains(r.Error, "installed nothing") {
				t.Fatalf("report %+v, restored %d bytes, %d retries", r, len(h.bao.Restored), h.sleeps)
			}
		})
	}
}

func TestARefusalOfTheSealCheckedEndpointIsASealMismatch(t *testing.T) {
	h := newHarness(t)
	h.store.Add("p/ns/bao/x.snap", snapshotFixture(t, "with-data.snap"), time.Now())
	h.bao.RestoreErr = &openbao.StatusError{Op: openbao.SnapshotPath, Code: 400, Messages: []string{"could not verify hash file"}}
	r := h.restore(t, func(c *restore.ExecutorConfig) { c.Key = "p/ns/bao/x.snap" })
	if r.Reason != restore.ReasonSealMismatch || !strings.Contains(r.Error, "Nothing was changed") || h.sleeps != 0 {
		t.Fatalf("report %+v", r)
	}
	h.bao.RestoreErr = &openbao.TransportError{Op: openbao.SnapshotPath, Err: errors.New("connection reset")}
	r = h.restore(t, func(c *restore.ExecutorConfig) { c.Key, c.Force = "p/ns/bao/x.snap", true })
	if r.Reason != restore.ReasonRestoreFailed || h.sleeps != 0 {
		t.Fatalf("a failed post is never retried: %+v, %d retries", r, h.sleeps)
	}
}
