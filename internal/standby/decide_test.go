package standby

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
)

const prefix = "dr/ns/bao/"

var t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

func snap(minutes int, id string) backup.Snapshot {
	at := t0.Add(time.Duration(minutes) * time.Minute)
	return backup.Snapshot{Key: backup.ObjectKey(prefix, at, id), At: at}
}

func cluster(promote bool) *v1alpha1.OpenBaoCluster {
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "standby", Namespace: "ns"}}
	c.Spec.Standby = &v1alpha1.StandbySpec{Promote: promote}
	return c
}

func formed(snaps ...backup.Snapshot) Observed {
	return Observed{Now: t0.Add(time.Hour), Formed: true, FormedKey: snap(0, "00000000").Key, Listed: true,
		Snapshots: snaps, Prefix: prefix, Cluster: cluster(false)}
}

func TestAStandbyThatHasNotFormedPostsNothing(t *testing.T) {
	o := formed(snap(5, "00000005"))
	o.Formed = false
	if d := Decide(o); d.Post != nil || d.Reason != ReasonForming {
		t.Fatalf("%+v", d)
	}
}

func TestAFormedStandbyPostsTheNewerSnapshotRecordingItFirst(t *testing.T) {
	d := Decide(formed(snap(10, "0000000a"), snap(5, "00000005")))
	if d.Post == nil || d.Post.Key != snap(10, "0000000a").Key || d.Status.RestoreKey != d.Post.Key || d.Status.Restore != d.Post.Name ||
		d.Post.Name != "standby-standby-0000000a" {
		t.Fatalf("%+v", d)
	}
	if d.Status.ServedKey != snap(0, "00000000").Key || d.Status.LagSeconds != 600 {
		t.Fatalf("served %s lag %d", d.Status.ServedKey, d.Status.LagSeconds)
	}
}

// canaryOf is a canary read from data that holds snapshot key.
func canaryOf(key string) *CanaryRead {
	return &CanaryRead{Canary: backup.Canary{Backup: "primary-b1", WrittenAt: "2026-01-01T10:00:00.5Z", Key: key}}
}

func TestAStandbyServingTheNewestSnapshotIsCurrentOnceItsCanaryNamesIt(t *testing.T) {
	o := formed(snap(0, "00000000"))
	d := Decide(o)
	if !d.ReadCanary || d.Value {
		t.Fatalf("before the canary was read: %+v", d)
	}
	o.Canary = canaryOf(snap(0, "00000000").Key)
	d = Decide(o)
	if d.Post != nil || d.ReadCanary || !d.Value || d.Reason != ReasonCurrent || d.Status.LagSeconds != 0 ||
		d.Status.Canary == nil || d.Status.Canary.ServedKey != snap(0, "00000000").Key || d.Status.Canary.Backup != "primary-b1" {
		t.Fatalf("%+v", d)
	}
	// Read once per served snapshot: the next pass reads nothing.
	next := formed(snap(0, "00000000"))
	next.Status = &d.Status
	if d := Decide(next); d.ReadCanary || !d.Value {
		t.Fatalf("the next pass: %+v", d)
	}
}

func TestAPollThatFindsNothingNewChangesNothingInStatus(t *testing.T) {
	o := formed(snap(0, "00000000"))
	o.Canary = canaryOf(snap(0, "00000000").Key)
	first := Decide(o)
	idle := formed(snap(0, "00000000"))
	idle.Now, idle.Status = idle.Now.Add(10*time.Minute), &first.Status
	if d := Decide(idle); !equality.Semantic.DeepEqual(d.Status, first.Status) || !d.Value {
		t.Fatalf("an idle poll changed status:\n%+v\n%+v", first.Status, d.Status)
	}
	// A newer snapshot moves polledAt with what it changes.
	newer := formed(snap(5, "00000005"), snap(0, "00000000"))
	newer.Now, newer.Status = idle.Now, &first.Status
	if d := Decide(newer); d.Status.PolledAt == nil || !d.Status.PolledAt.Time.Equal(newer.Now) || d.Post == nil {
		t.Fatalf("a newer snapshot: %+v", d.Status)
	}
}

func TestAServedSnapshotWhoseCanaryDoesNotNameItIsNotCurrent(t *testing.T) {
	served := snap(0, "00000000").Key
	for _, tc := range []struct {
		what     string
		read     *CanaryRead
		reason   string
		degraded bool
		recorded bool
	}{
		{"a canary naming another snapshot", canaryOf(snap(-5, "0000000f").Key), ReasonStandbyCanaryMismatch, true, true},
		{"a canary naming no snapshot (an earlier release's backup)", canaryOf(""), ReasonStandbyCanaryMismatch, false, true},
		{"a canary that could not be read", &CanaryRead{Err: "read openbao-operator/canary from bao: not found"},
			ReasonStandbyCanaryUnreadable, false, false},
	} {
		t.Run(tc.what, func(t *testing.T) {
			o := formed(snap(0, "00000000"))
			o.Canary = tc.read
			d := Decide(o)
			if d.Value || d.Reason != tc.reason || d.Degraded != tc.degraded || d.Status.Proven() ||
				(d.Status.Canary != nil) != tc.recorded || !strings.Contains(d.Message, served) {
				t.Fatalf("%+v", d)
			}
			// The next pass reads again only what could not be read, and
			// still does not call the data current.
			next := formed(snap(0, "00000000"))
			next.Status = &d.Status
			if d := Decide(next); d.ReadCanary == tc.recorded || d.Value {
				t.Fatalf("the next pass: %+v", d)
			}
		})
	}
}

func TestTheCanaryIsNotReadWhileARestoreRunsOrTheIdentityIsNotBound(t *testing.T) {
	first := Decide(formed(snap(10, "0000000a")))
	o := formed(snap(10, "0000000a"))
	o.Status, o.Restore = &first.Status, &Restore{Found: true, Phase: v1alpha1.RestoreRunning}
	if d := Decide(o); d.ReadCanary {
		t.Fatalf("read while the restore runs: %+v", d)
	}
	o.Restore = &Restore{Found: true, Phase: v1alpha1.RestoreRunning, Installed: true}
	if d := Decide(o); d.ReadCanary || !d.BindIdentity {
		t.Fatalf("read before the identity was bound: %+v", d)
	}
	bound := first.Status
	bound.IdentityBoundKey = bound.RestoreKey
	o.Status, o.Restore = &bound, &Restore{Found: true, Phase: v1alpha1.RestoreSucceeded, Installed: true}
	if d := Decide(o); !d.ReadCanary || d.Status.ServedKey != snap(10, "0000000a").Key {
		t.Fatalf("the succeeded restore's canary is not read: %+v", d)
	}
}

func TestASnapshotWhoseRestoreIsGoneIsPostedAgainUnderANewNameUpToThreeTimes(t *testing.T) {
	first := Decide(formed(snap(10, "0000000a")))
	status := first.Status
	names := map[string]bool{first.Post.Name: true}
	for n := int32(2); n <= maxPosts; n++ {
		o := formed(snap(10, "0000000a"))
		o.Status, o.Restore = &status, &Restore{Found: false}
		d := Decide(o)
		if d.Post == nil || d.Post.Key != snap(10, "0000000a").Key || names[d.Post.Name] || d.Status.Restore != d.Post.Name ||
			d.Status.Posts() != n || d.Degraded {
			t.Fatalf("post %d of a snapshot whose restore is gone: %+v", n, d)
		}
		if !strings.Contains(d.Message, fmt.Sprintf("post %d of 3", n)) || !strings.Contains(d.Message, status.Restore+" of "+status.RestoreKey+" is gone") {
			t.Fatalf("the message does not say why it posts again: %s", d.Message)
		}
		names[d.Post.Name], status = true, d.Status
	}
	o := formed(snap(10, "0000000a"))
	o.Status, o.Restore = &status, &Restore{Found: false}
	if d := Decide(o); d.Post != nil || d.Reason != ReasonStandbyRestoreMissing || !strings.Contains(d.Message, "posted 3 times") {
		t.Fatalf("a snapshot was posted a fourth time: %+v", d)
	}
	// The source's next snapshot is posted as a first post.
	o = formed(snap(20, "00000014"), snap(10, "0000000a"))
	o.Status, o.Restore = &status, &Restore{Found: false}
	if d := Decide(o); d.Post == nil || d.Post.Key != snap(20, "00000014").Key || d.Status.Posts() != 1 || d.Status.RestoreAttempt != 0 {
		t.Fatalf("the next snapshot after three lost posts: %+v", d)
	}
}

// A restore that failed (or whose outcome was lost: its Job gone) is
// posted again 30 s after it ended, with the identity bound again after
// that post's install; a newer snapshot goes first; a failure with posts
// left does not degrade the cluster, the last one does.
func TestAFailedRestoreIsPostedAgainAfterAWaitAndItsIdentityBoundAgain(t *testing.T) {
	first := Decide(formed(snap(10, "0000000a")))
	status := first.Status
	status.IdentityBoundKey = snap(10, "0000000a").Key // an earlier post installed and was bound, then failed
	ended := t0.Add(time.Hour).Add(-10 * time.Second)
	o := formed(snap(10, "0000000a"))
	o.Status, o.Restore = &status, &Restore{Found: true, Phase: v1alpha1.RestoreFailed, Reason: "OutcomeUnknown", EndedAt: ended}
	d := Decide(o)
	if d.Post != nil || d.Reason != ReasonStandbyRestoreFailed || d.Degraded || d.Requeue != 20*time.Second {
		t.Fatalf("posted again within 30 s of the failure, or degraded: %+v", d)
	}
	o.Now = ended.Add(repostAfter)
	d = Decide(o)
	if d.Post == nil || d.Post.Key != snap(10, "0000000a").Key || d.Status.IdentityBoundKey != "" || d.Degraded ||
		!strings.Contains(d.Message, "OutcomeUnknown") {
		t.Fatalf("the failed restore's snapshot was not posted again, its binding kept: %+v", d)
	}
	o.Status, o.Restore = &d.Status, &Restore{Found: true, Phase: v1alpha1.RestoreRunning, Installed: true}
	if d := Decide(o); !d.BindIdentity {
		t.Fatalf("the second post's install is not bound: %+v", d)
	}
	// A newer snapshot is posted instead of a failed one.
	o = formed(snap(20, "00000014"), snap(10, "0000000a"))
	o.Status, o.Restore = &status, &Restore{Found: true, Phase: v1alpha1.RestoreFailed, EndedAt: ended}
	if d := Decide(o); d.Post == nil || d.Post.Key != snap(20, "00000014").Key || d.Degraded {
		t.Fatalf("%+v", d)
	}
	// The third post failed: Degraded, nothing more.
	status.RestoreAttempt = maxPosts
	o = formed(snap(10, "0000000a"))
	o.Now = ended.Add(time.Hour)
	o.Status, o.Restore = &status, &Restore{Found: true, Phase: v1alpha1.RestoreFailed, EndedAt: ended}
	if d := Decide(o); d.Post != nil || !d.Degraded || d.Reason != ReasonStandbyRestoreFailed {
		t.Fatalf("%+v", d)
	}
}

func TestNothingIsPostedWhileARestoreRuns(t *testing.T) {
	first := Decide(formed(snap(10, "0000000a")))
	o := formed(snap(20, "00000014"), snap(10, "0000000a"))
	o.Status, o.Restore = &first.Status, &Restore{Found: true, Phase: v1alpha1.RestoreRunning}
	if d := Decide(o); d.Post != nil {
		t.Fatalf("posted beside a running restore: %+v", d)
	}
	o.Restore, o.OtherRestoreRunning = nil, true
	if d := Decide(o); d.Post != nil {
		t.Fatalf("posted beside another restore: %+v", d)
	}
}

func TestAnInstalledSnapshotIsBoundThenServed(t *testing.T) {
	first := Decide(formed(snap(10, "0000000a")))
	o := formed(snap(20, "00000014"), snap(10, "0000000a"))
	o.Status, o.Restore = &first.Status, &Restore{Found: true, Phase: v1alpha1.RestoreRunning, Installed: true}
	d := Decide(o)
	if !d.BindIdentity || d.Post != nil {
		t.Fatalf("%+v", d)
	}
	d.Status.IdentityBoundKey = d.Status.RestoreKey
	o.Status, o.Restore = &d.Status, &Restore{Found: true, Phase: v1alpha1.RestoreSucceeded, Installed: true, SHA256: "ab"}
	d = Decide(o)
	if d.Status.ServedKey != snap(10, "0000000a").Key || d.Status.ServedSHA256 != "ab" || d.Post == nil || d.Post.Key != snap(20, "00000014").Key {
		t.Fatalf("%+v", d)
	}
}

func TestPromotionWaitsForARunningRestoreThenStopsFollowing(t *testing.T) {
	first := Decide(formed(snap(10, "0000000a")))
	o := formed(snap(20, "00000014"))
	o.Cluster, o.Promote = cluster(true), true
	o.Status, o.Restore = &first.Status, &Restore{Found: true, Phase: v1alpha1.RestoreRunning}
	if d := Decide(o); d.Promoted || d.Status.PromotedAt != nil || d.Reason != ReasonPromotionWaiting || d.Post != nil {
		t.Fatalf("%+v", d)
	}
	o.Restore.Phase = v1alpha1.RestoreSucceeded
	d := Decide(o)
	if !d.Promoted || d.Status.PromotedAt == nil || d.Post != nil {
		t.Fatalf("%+v", d)
	}
	o.Status = &d.Status
	if d := Decide(o); d.Promoted || d.Post != nil || d.Reason != ReasonPromoted {
		t.Fatalf("promotion is not idempotent: %+v", d)
	}
}

func TestAnUnreadableSourcePostsNothing(t *testing.T) {
	o := formed(snap(10, "0000000a"))
	o.Listed, o.Problem = false, "access denied"
	if d := Decide(o); d.Post != nil || d.Reason != ReasonSourceUnreadable {
		t.Fatalf("%+v", d)
	}
}

// FuzzDecide drives a standby through passes over random observations and
// holds the invariants of posting: never a snapshot older than one posted
// before, the same one again only while its last restore failed or is
// gone and at most maxPosts times in all, each post under a name never
// used before, never one that is not proven (not in the listing), never
// while a restore runs, never after promotion.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{200, 3, 0, 17, 90, 4, 4, 4, 250, 1})
	f.Fuzz(func(t *testing.T, steps []byte) {
		var status *v1alpha1.StandbyStatus
		posted := map[string]int32{snap(0, "00000000").Key: 1}
		names := map[string]bool{}
		last := snap(0, "00000000")
		restore := (*Restore)(nil)
		promoted := false
		// named says, per served snapshot, which canary reads named it.
		named := map[string]bool{}
		var pool []backup.Snapshot
		for i, b := range steps {
			if b%3 == 0 || len(pool) == 0 {
				m := int(b) - 40 // may be older than what was posted
				pool = append([]backup.Snapshot{snap(m, fmt.Sprintf("%08x", i))}, pool...)
			}
			listed := proven(pool)
			running := b%5 == 1
			o := formed(listed...)
			o.Status, o.Restore, o.OtherRestoreRunning = status, restore, b%7 == 3
			if status != nil && status.NewestTakenAt != nil && b%6 == 4 {
				// Not due: the last listing's newest stands in for the listing.
				o.NotDue, o.Snapshots = true, []backup.Snapshot{{Key: status.NewestKey, At: status.NewestTakenAt.Time}}
				listed = o.Snapshots
			}
			if status != nil && b%4 == 2 {
				o.Ended = []string{status.Restore, "earlier"}
			}
			o.Promote, o.Cluster = b%11 == 10 || promoted, cluster(b%11 == 10 || promoted)
			if restore != nil && running {
				restore.Phase = v1alpha1.RestoreRunning
			}
			d := Decide(o)
			busy := o.OtherRestoreRunning || (restore != nil && restore.Found && !restore.Phase.Done())
			if d.ReadCanary {
				if busy || d.BindIdentity || d.Post != nil || d.Status.PromotedAt != nil {
					t.Fatalf("step %d reads the canary while its data may change: %+v", i, d)
				}
				// The data holds the served snapshot, or (a fault) another.
				read := canaryOf(d.Status.ServedKey)
				switch b % 4 {
				case 0:
					read = &CanaryRead{Err: "refused"}
				case 1:
					read = canaryOf(snap(-99, "deadbeef").Key)
				default:
					named[d.Status.ServedKey] = true
				}
				o.Canary = read
				if d = Decide(o); d.ReadCanary {
					t.Fatalf("step %d asks for the canary it was given", i)
				}
			}
			if d.Value && (!d.Status.Proven() || !named[d.Status.ServedKey]) {
				t.Fatalf("step %d reports %s current without a canary read naming it: %+v", i, d.Status.ServedKey, d.Status)
			}
			for _, name := range d.Delete {
				if name == d.Status.Restore || (status != nil && name == status.Restore) || !contains(o.Ended, name) {
					t.Fatalf("step %d deletes %s, the restore recorded (%s) or one not ended", i, name, d.Status.Restore)
				}
			}
			if d.Post != nil {
				again := posted[d.Post.Key] > 0
				lostLast := restore != nil && (!restore.Found || restore.Phase == v1alpha1.RestoreFailed)
				switch {
				case again && (d.Post.Key != last.Key || !lostLast):
					t.Fatalf("step %d posted %s again, not the last posted (%s) with its restore lost (%+v)", i, d.Post.Key, last.Key, restore)
				case posted[d.Post.Key] >= maxPosts:
					t.Fatalf("step %d posted %s a %d-th time", i, d.Post.Key, posted[d.Post.Key]+1)
				case names[d.Post.Name]:
					t.Fatalf("step %d reuses the restore name %s", i, d.Post.Name)
				case d.Status.Posts() != posted[d.Post.Key]+1:
					t.Fatalf("step %d records post %d of %s, the %d-th", i, d.Status.Posts(), d.Post.Key, posted[d.Post.Key]+1)
				case again && d.Status.IdentityBoundKey == d.Post.Key:
					t.Fatalf("step %d posts %s again and keeps an earlier post's binding", i, d.Post.Key)
				case busy:
					t.Fatalf("step %d posted while a restore runs", i)
				case promoted || d.Status.PromotedAt != nil:
					t.Fatalf("step %d posted after promotion", i)
				case !in(listed, d.Post.Key):
					t.Fatalf("step %d posted %s, which the listing did not prove", i, d.Post.Key)
				case !again && !newer(backup.Snapshot{Key: d.Post.Key, At: atOf(d.Post.Key)}, last.Key, prefix):
					t.Fatalf("step %d posted %s, not newer than %s", i, d.Post.Key, last.Key)
				case d.Status.RestoreKey != d.Post.Key:
					t.Fatalf("step %d posted %s without recording it", i, d.Post.Key)
				}
				posted[d.Post.Key]++
				names[d.Post.Name], last = true, backup.Snapshot{Key: d.Post.Key, At: atOf(d.Post.Key)}
				restore = &Restore{Found: b%13 != 0, Phase: v1alpha1.RestorePending}
			} else if restore != nil && restore.Found && !restore.Phase.Done() {
				switch b % 8 {
				case 0, 2, 4:
					restore.Phase, restore.Installed = v1alpha1.RestoreSucceeded, true
				case 6:
					restore.Phase, restore.Installed = v1alpha1.RestoreFailed, b%16 == 6
					restore.EndedAt = o.Now.Add(-time.Duration(b) * time.Second)
				}
			}
			if d.BindIdentity {
				d.Status.IdentityBoundKey = d.Status.RestoreKey
			}
			promoted = promoted || d.Status.PromotedAt != nil
			status = &d.Status
		}
	})
}

// proven drops the snapshots whose id says the store holds them unproven
// (an id ending in 7), and orders the rest newest first.
func proven(pool []backup.Snapshot) []backup.Snapshot {
	var out []backup.Snapshot
	for _, s := range pool {
		if s.Key[len(s.Key)-6] != '7' {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.After(out[j].At)
		}
		return out[i].Key > out[j].Key
	})
	return out
}

func in(list []backup.Snapshot, key string) bool {
	for _, s := range list {
		if s.Key == key {
			return true
		}
	}
	return false
}

func atOf(key string) time.Time { t, _ := backup.ParseObjectKey(prefix, key); return t }

func TestAStandbyWhoseOwnBackupsWouldLandInTheSourcesPrefixIsRefused(t *testing.T) {
	c := cluster(false)
	target := v1alpha1.BackupTarget{Endpoint: "https://s3.example.com", Bucket: "dr", PathPrefix: "site-a"}
	c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{FromBackup: &v1alpha1.BackupBootstrap{Target: target, Latest: true}}
	c.Spec.Backup = &v1alpha1.BackupSpec{Target: target}
	errs := Refused(c)
	if len(errs) != 1 || errs[0].Field != "spec.backup.target.pathPrefix" {
		t.Fatalf("same name, same prefix: %v", errs)
	}
	c.Spec.Backup.Target.PathPrefix = "site-b"
	if errs := Refused(c); len(errs) != 0 {
		t.Fatalf("another prefix: %v", errs)
	}
	c.Spec.Backup.Target.PathPrefix = "site-a"
	c.Spec.Bootstrap.FromBackup.SourceCluster = "primary"
	if errs := Refused(c); len(errs) != 0 {
		t.Fatalf("another source cluster's prefix: %v", errs)
	}
	c.Spec.Backup.Target.PathPrefix = "site-a/ns/primary"
	if errs := Refused(c); len(errs) != 1 {
		t.Fatalf("a prefix within the source's: %v", errs)
	}
	// A source that ran in a namespace of another name writes under it.
	c.Spec.Bootstrap.FromBackup.SourceNamespace = "prod"
	if errs := Refused(c); len(errs) != 0 {
		t.Fatalf("this namespace's prefix, the source in prod: %v", errs)
	}
	c.Spec.Backup.Target.PathPrefix = "site-a/prod/primary"
	if errs := Refused(c); len(errs) != 1 {
		t.Fatalf("a prefix within the source's in prod: %v", errs)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestEndedRestoresOfEarlierSnapshotsAreDeletedButNotTheRecordedOne(t *testing.T) {
	first := Decide(formed(snap(10, "0000000a")))
	o := formed(snap(10, "0000000a"))
	o.Status, o.Restore = &first.Status, &Restore{Found: true, Phase: v1alpha1.RestoreSucceeded}
	o.Ended = []string{"standby-standby-00000005", first.Status.Restore}
	if d := Decide(o); len(d.Delete) != 1 || d.Delete[0] != "standby-standby-00000005" {
		t.Fatalf("deletes %v", d.Delete)
	}
}
