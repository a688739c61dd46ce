package executor_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/openbao/operator/internal/backup"
)

// seedSnapshots adds three earlier snapshots of ns/bao (1, 2 and 3 days
// old), another cluster's and a file that is no snapshot; it returns the
// three, oldest first.
func seedSnapshots(h *harness) []string {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	var ours []string
	for _, days := range []int{3, 2, 1} {
		key := signer("bao").SignedObjectKey("p/ns/bao/", now.Add(-time.Duration(days)*24*time.Hour), "0000000"+string(rune('0'+days)))
		h.store.Add(key, []byte("old"), now)
		ours = append(ours, key)
	}
	h.store.Add(signer("bao-2").SignedObjectKey("p/ns/bao-2/", now.Add(-72*time.Hour), "00000009"), []byte("another cluster's"), now)
	h.store.Add("p/ns/bao/README", []byte("not a snapshot"), now)
	return ours
}

// TestTheExecutorAppliesTheRetentionItIsGivenAfterItsUpload: a target
// without credentials (the Job's own identity) and a retention of two:
// after the verified upload the two oldest of the cluster's snapshots go,
// the new one and the newest old one stay, nothing else is touched, and
// the report says what went.
func TestTheExecutorAppliesTheRetentionItIsGivenAfterItsUpload(t *testing.T) {
	h := newHarness(t)
	h.cfg.CredentialsDir = ""
	h.cfg.Retention = backup.Retention{MaxCount: 2}
	ours := seedSnapshots(h)
	r := h.run(t)
	if r.Failed() {
		t.Fatalf("%s: %s", r.Reason, r.Error)
	}
	if len(h.storeCfgs) != 1 || !h.storeCfgs[0].AmbientIdentity || h.storeCfgs[0].Credentials != nil {
		t.Errorf("the store was opened with %+v: want the Job's ambient identity", h.storeCfgs)
	}
	if r.Retention == nil || r.Retention.DeletedCount != 2 || !slices.Equal(r.Retention.Deleted, ours[:2]) || r.Retention.Error != "" {
		t.Fatalf("retention report %+v, want %v", r.Retention, ours[:2])
	}
	if !slices.Equal(h.store.Deleted, ours[:2]) {
		t.Errorf("deleted %v", h.store.Deleted)
	}
	if keys := h.store.Keys(); len(keys) != 4 || !slices.Contains(keys, r.Key) || !slices.Contains(keys, ours[2]) {
		t.Errorf("left %v", keys)
	}
	got, err := backup.ParseReport(string(r.Encode()))
	if err != nil || got.Retention == nil || !slices.Equal(got.Retention.Deleted, ours[:2]) {
		t.Errorf("the termination message carries %+v (%v)", got.Retention, err)
	}
}

// TestAnAgeRetentionKeepsTheSnapshotJustWritten: a retention of one
// hour deletes every earlier snapshot, never the new one.
func TestAnAgeRetentionKeepsTheSnapshotJustWritten(t *testing.T) {
	h := newHarness(t)
	h.cfg.CredentialsDir = ""
	h.cfg.Retention = backup.Retention{MaxAge: time.Hour}
	ours := seedSnapshots(h)
	r := h.run(t)
	if r.Failed() || r.Retention == nil || !slices.Equal(r.Retention.Deleted, ours) || h.store.Data(r.Key) == nil {
		t.Fatalf("report %+v, retention %+v", r, r.Retention)
	}
}

// TestWithoutARetentionTheExecutorDeletesNothing: the operator passes no
// retention when it applies it itself (credentials) or there is none.
func TestWithoutARetentionTheExecutorDeletesNothing(t *testing.T) {
	h := newHarness(t)
	seedSnapshots(h)
	r := h.run(t)
	if r.Failed() || r.Retention != nil || len(h.store.Deleted) != 0 {
		t.Fatalf("report %+v, deleted %v", r, h.store.Deleted)
	}
	if len(h.storeCfgs) != 1 || h.storeCfgs[0].AmbientIdentity {
		t.Errorf("with credentials the store was opened with %+v: want no ambient identity", h.storeCfgs)
	}
}

// TestAFailedRetentionLeavesTheBackupSucceeded: a store that refuses to
// delete fails the retention, which the report says; the backup stands.
func TestAFailedRetentionLeavesTheBackupSucceeded(t *testing.T) {
	h := newHarness(t)
	h.cfg.CredentialsDir = ""
	h.cfg.Retention = backup.Retention{MaxCount: 1}
	seedSnapshots(h)
	h.store.DeleteErr = errors.New("AccessDenied")
	r := h.run(t)
	if r.Failed() || r.Key == "" || r.Retention == nil || r.Retention.DeletedCount != 0 || r.Retention.Error == "" {
		t.Fatalf("report %+v, retention %+v", r, r.Retention)
	}
}

// planted is the attack under ns/bao's prefix: a far-future name in
// the executor's form, which anyone who may write to the prefix can choose.
const planted = "p/ns/bao/99991231T000000Z-xxxxxxxx.snap"

// forgedCopy is planted's variant that carries the tag of a real name
// (real), as one who copied that object under a far-future time would.
func forgedCopy(real string) string {
	return "p/ns/bao/99991231T000000Z-" + real[len("p/ns/bao/20250301T050607Z-"):]
}

// TestRetentionKeepsRealSnapshotsBesideAPlantedFarFutureName injects the
// fault retention guards against: 99991231T000000Z-xxxxxxxx.snap and a
// forged copy carrying a real name's tag, in the store beside the real
// snapshots. With maxCount 2 they neither take a place among the kept
// (the new snapshot and the newest real one stay) nor get deleted; the
// report counts them and names one.
func TestRetentionKeepsRealSnapshotsBesideAPlantedFarFutureName(t *testing.T) {
	h := newHarness(t)
	h.cfg.CredentialsDir = ""
	h.cfg.Retention = backup.Retention{MaxCount: 2}
	ours := seedSnapshots(h)
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	forged := forgedCopy(ours[2])
	h.store.Add(planted, []byte("planted"), now)
	h.store.Add(forged, []byte("old"), now)
	r := h.run(t)
	if r.Failed() {
		t.Fatalf("%s: %s", r.Reason, r.Error)
	}
	if !slices.Equal(h.store.Deleted, ours[:2]) {
		t.Errorf("deleted %v, want the two oldest real ones %v", h.store.Deleted, ours[:2])
	}
	for _, k := range []string{r.Key, ours[2], planted, forged} {
		if h.store.Data(k) == nil {
			t.Errorf("%s is gone", k)
		}
	}
	// README and the two planted names.
	if r.Unproven == nil || r.Unproven.Count != 3 || r.Unproven.Example == "" {
		t.Errorf("unproven %+v, want 3 reported", r.Unproven)
	}
}
