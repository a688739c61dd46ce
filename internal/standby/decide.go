// Package standby decides what a disaster-recovery standby cluster
// (spec.standby) does on each pass: which of its source's snapshots to
// post, when to bind the operator's identity in restored data, and when
// it is promoted. Posting a snapshot replaces all of the cluster's data:
// the restore's name and key are recorded in status before the restore
// is created, and a key is posted only when it is newer than every key
// recorded before, or, while its last restore failed or disappeared,
// again under a new name, up to maxPosts times. A standby takes no
// writes (its Services select no pod), so a second post of one snapshot
// leaves the data the first would have: a restore whose outcome was lost
// (its Job gone) costs the standby no snapshot. After each
// restore the backup canary is read from the standby's data: the served
// snapshot is reported current only when the canary names it.
package standby

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
)

// Reasons of condition Standby.
const (
	ReasonForming               = "Forming"
	ReasonFollowing             = "Following"
	ReasonCurrent               = "Current"
	ReasonSourceUnreadable      = "SourceUnreadable"
	ReasonStandbyRestoreFailed  = "StandbyRestoreFailed"
	ReasonStandbyRestoreMissing = "StandbyRestoreMissing"
	ReasonPromotionWaiting      = "PromotionWaiting"
	ReasonPromoted              = "Promoted"
	ReasonStandbyMisconfigured  = "StandbyMisconfigured"
	// ReasonStandbyCanaryUnreadable: the canary could not be read from
	// the served data (yet); it is read again on the next pass.
	ReasonStandbyCanaryUnreadable = "StandbyCanaryUnreadable"
	// ReasonStandbyCanaryMismatch: the canary read from the served data
	// names another snapshot, or none.
	ReasonStandbyCanaryMismatch = "StandbyCanaryMismatch"
	// ReasonStandbyCleanupFailed (a Warning event): restores the standby
	// posted and that ended could not be deleted; it keeps following.
	ReasonStandbyCleanupFailed = "StandbyCleanupFailed"
)

// maxPosts bounds the posts of one snapshot; after the last has failed
// the standby waits for the source's next snapshot.
const maxPosts = 3

// repostAfter is how long after a restore failed its snapshot is posted
// again: a store or a server that failed a moment ago may be back.
const repostAfter = 30 * time.Second

// canaryRetry is how soon a canary that could not be read is read again:
// the servers may still be starting after the restore.
const canaryRetry = 10 * time.Second

// CanaryRead is what reading the backup canary from the standby's own
// data returned: the canary, or why it could not be read.
type CanaryRead struct {
	Canary backup.Canary
	Err    string
}

// Restore is what was observed of the restore status.standby.restore
// names.
type Restore struct {
	// Found says it exists (read around the cache).
	Found bool
	Phase v1alpha1.RestorePhase
	// Installed says OpenBao accepted the snapshot (status.restoredAt).
	Installed bool
	// Key and SHA256 are the snapshot as the restore read it.
	Key, SHA256, Reason string
	// EndedAt is when it ended (status.completionTime).
	EndedAt time.Time
}

// Observed is everything Decide looks at.
type Observed struct {
	Now time.Time
	// Promote is spec.standby.promote.
	Promote bool
	// Formed says the cluster holds its source's data: status.fromBackup
	// completed, with FormedKey the snapshot it formed from.
	Formed    bool
	FormedKey string
	// Status is status.standby as it is (nil: never written).
	Status *v1alpha1.StandbyStatus
	// Snapshots are the source's snapshots whose names its provenance key
	// proves, newest first (backup.Proven); Listed false when the listing
	// failed, with Problem saying why.
	Snapshots []backup.Snapshot
	Listed    bool
	Problem   string
	// NotDue says the poll interval has not passed since the last listing
	// (kept in the operator's memory): Snapshots is the last listing's
	// newest, as status records it, and polledAt stays.
	NotDue bool
	// Restore is the restore status.standby.restore names; nil when none
	// is named.
	Restore *Restore
	// OtherRestoreRunning says a restore of this cluster other than that
	// one has not ended (the forming restore, or one a user created).
	OtherRestoreRunning bool
	// Ended names the standby's earlier restores (source.standby,
	// controlled by the cluster) that have ended, other than Restore.
	Ended []string
	// EndedUID is each ended restore's UID, for the deletion's
	// precondition; Decide does not read it.
	EndedUID map[string]types.UID
	// Prefix is the source's object prefix, to read the id of a key.
	Prefix string
	// Cluster names the restores.
	Cluster *v1alpha1.OpenBaoCluster
	// Canary is the canary read from this cluster's data, once a
	// decision asked for it (ReadCanary); nil when not read.
	Canary *CanaryRead
}

// Post asks for the OpenBaoRestore Name of snapshot Key; the decision's
// Status already records both (and which post of Key it is).
type Post struct{ Name, Key string }

// Decision is what the standby step does.
type Decision struct {
	Status v1alpha1.StandbyStatus
	// Post creates one OpenBaoRestore, after Status is written.
	Post *Post
	// BindIdentity binds the operator's identity in the data of
	// Status.Restore to this cluster; on success the caller sets
	// Status.IdentityBoundKey to Status.RestoreKey.
	BindIdentity bool
	// Delete names ended restores of earlier snapshots to delete, so that
	// one restore per snapshot does not pile up; what was posted is
	// recorded in Status, not in them.
	Delete []string
	// Promoted says this pass promotes the cluster (an Event after the
	// status write).
	Promoted bool
	// ReadCanary asks for the canary of the served snapshot: the caller
	// reads it from this cluster's data into Observed.Canary and decides
	// again.
	ReadCanary bool
	// Condition Standby.
	Value           bool
	Reason, Message string
	// Degraded marks the cluster Degraded with Reason and Message.
	Degraded bool
	Requeue  time.Duration
}

// Decide takes one step of a standby: before it formed, it waits for the
// fromBackup step; then it follows, posting the source's newest proven
// snapshot when it is newer than every snapshot posted before and no
// restore runs; promotion, refused while a restore runs, ends following
// for good.
func Decide(o Observed) Decision {
	d := Decision{Requeue: o.Cluster.Spec.Standby.Poll()}
	if o.Status != nil {
		d.Status = *o.Status.DeepCopy()
	}
	s := &d.Status
	if s.PromotedAt != nil {
		d.Reason, d.Message, d.Requeue = ReasonPromoted, "promoted at "+s.PromotedAt.UTC().Format(time.RFC3339)+"; this cluster follows no source", 0
		return d
	}
	if !o.Formed {
		d.Reason, d.Message = ReasonForming, "forming from the source's newest snapshot (condition RestoredFromBackup)"
		return d
	}
	if s.RestoreKey == "" && s.ServedKey == "" {
		s.ServedKey, s.RestoreKey = o.FormedKey, o.FormedKey // the forming restore counts as posted
		s.ServedTakenAt = takenAt(o.Prefix, o.FormedKey)
	}
	running := o.OtherRestoreRunning || (o.Restore != nil && o.Restore.Found && !o.Restore.Phase.Done())
	if o.Promote {
		d.promote(o, running)
		return d
	}
	d.observeRestore(o)
	for _, name := range o.Ended {
		if name != s.Restore {
			d.Delete = append(d.Delete, name)
		}
	}
	if !o.Listed {
		s.PolledAt = nil
		d.Reason, d.Message = ReasonSourceUnreadable, "the source's snapshots could not be listed: "+o.Problem
		return d
	}
	if !o.NotDue && (s.PolledAt == nil || len(o.Snapshots) > 0 && o.Snapshots[0].Key != s.NewestKey) {
		// Only a listing that changed what status shows moves polledAt: an
		// idle poll writes nothing (the caller paces polls in memory).
		now := metav1.NewTime(o.Now)
		s.PolledAt = &now
	}
	if len(o.Snapshots) > 0 {
		newest := o.Snapshots[0]
		s.NewestKey, s.NewestTakenAt = newest.Key, ptrTime(newest.At)
		switch {
		case running || d.BindIdentity:
		case newer(newest, s.RestoreKey, o.Prefix):
			d.post(o, newest, 1)
		case newest.Key == s.RestoreKey && lost(o) && s.Posts() < maxPosts:
			d.repost(o, newest)
		}
	}
	if !running && !d.BindIdentity && d.Post == nil {
		d.checkCanary(o)
	}
	d.lag()
	if d.Reason == "" {
		// Current only with the canary read from the served data naming it.
		d.Value, d.Reason = (s.NewestKey == "" || s.ServedKey == s.NewestKey) && s.Proven(), ReasonCurrent
		d.Message = fmt.Sprintf("serves %s, taken %s; the source's newest is %s", s.ServedKey, orUnknown(s.ServedTakenAt), orNone(s.NewestKey))
		if s.Proven() {
			d.Message += fmt.Sprintf("; the canary read from its data names it (backup %s, written %s)", s.Canary.Backup, s.Canary.WrittenAt)
		}
		if !d.Value {
			d.Reason = ReasonFollowing
		}
	}
	return d
}

// promote records the promotion once no restore runs.
func (d *Decision) promote(o Observed, running bool) {
	if running {
		d.Reason, d.Message = ReasonPromotionWaiting, "spec.standby.promote waits: a restore of this cluster is running; "+
			"promotion follows once it has ended"
		d.Requeue = 10 * time.Second
		return
	}
	t := metav1.NewTime(o.Now)
	// The chart rendered before this step: the next pass, soon, opens the
	// client Service from the status this one writes.
	d.Status.PromotedAt, d.Promoted, d.Requeue = &t, true, time.Second
	d.Reason, d.Message = ReasonPromoted, fmt.Sprintf("promoted: serves %s and follows no source; the client Service is open "+
		"and spec.backup takes this cluster's own backups", orNone(d.Status.ServedKey))
}

// observeRestore takes in the outcome of the restore last posted.
func (d *Decision) observeRestore(o Observed) {
	s, r := &d.Status, o.Restore
	if r == nil || s.Restore == "" {
		return
	}
	switch {
	case !r.Found && s.ServedKey != s.RestoreKey:
		// Recorded but gone: never created (the operator stopped first),
		// or deleted. It may have posted its key: posted again (repost)
		// while posts are left, else the next newer snapshot is.
		d.Reason, d.Message = ReasonStandbyRestoreMissing, lossOf(s, r)+"; "+d.afterLoss()
	case r.Found && r.Installed && s.IdentityBoundKey != s.RestoreKey:
		d.BindIdentity = true
		d.Reason, d.Message = ReasonFollowing, "OpenBao installed "+s.RestoreKey+"; binding the operator's identity in it to this cluster"
	case r.Found && r.Phase == v1alpha1.RestoreSucceeded:
		s.ServedKey, s.ServedSHA256, s.ServedTakenAt = s.RestoreKey, r.SHA256, takenAt(o.Prefix, s.RestoreKey)
	case r.Found && r.Phase == v1alpha1.RestoreFailed:
		d.Reason, d.Degraded = ReasonStandbyRestoreFailed, s.Posts() >= maxPosts
		d.Message = lossOf(s, r) + "; " + d.afterLoss()
	case r.Found:
		d.Reason, d.Message = ReasonFollowing, "OpenBaoRestore "+s.Restore+" restores "+s.RestoreKey
	}
}

// checkCanary asks for the canary of the served snapshot once per served
// snapshot, records what was read, and says when it does not name the
// served snapshot. A reason set before (a failed or missing restore)
// outranks it. Nothing restored is undone: the data stays, not proven.
func (d *Decision) checkCanary(o Observed) {
	s := &d.Status
	if s.ServedKey == "" {
		return
	}
	if s.Canary == nil || s.Canary.ServedKey != s.ServedKey {
		switch {
		case o.Canary == nil:
			d.ReadCanary = true
			return
		case o.Canary.Err != "":
			if d.Reason == "" {
				d.Reason, d.Requeue = ReasonStandbyCanaryUnreadable, min(d.Requeue, canaryRetry)
				d.Message = "the backup canary could not be read from the data of " + s.ServedKey + ", so it is not proven yet: " + o.Canary.Err
			}
			return
		}
		c := o.Canary.Canary
		s.Canary = &v1alpha1.StandbyCanary{ServedKey: s.ServedKey, Key: c.Key, Backup: c.Backup, WrittenAt: c.WrittenAt}
	}
	if c := s.Canary; c.Key != s.ServedKey && d.Reason == "" {
		d.Reason, d.Degraded = ReasonStandbyCanaryMismatch, c.Key != ""
		d.Message = fmt.Sprintf("the backup canary read from this cluster's data (backup %s, written %s) names snapshot %s, "+
			"not the served %s: the data is not that snapshot's", orNone(c.Backup), orNone(c.WrittenAt), orNone(c.Key), s.ServedKey)
		if c.Key == "" {
			d.Message = fmt.Sprintf("the backup canary read from this cluster's data (backup %s, written %s) names no snapshot: "+
				"the source's operator release writes none, so %s is not proven", orNone(c.Backup), orNone(c.WrittenAt), s.ServedKey)
		}
	}
}

// post records the restore of snap, its n-th post, before it is
// created. A post supersedes a failure observed before it.
func (d *Decision) post(o Observed, snap backup.Snapshot, n int32) {
	id, attempt := idOf(o.Prefix, snap.Key), int32(0) // a first post leaves the attempt unset (read as 1)
	if n > 1 {
		id, attempt = fmt.Sprintf("%s-%d", id, n), n
	}
	name := o.Cluster.StandbyRestoreName(id)
	d.Status.Restore, d.Status.RestoreKey, d.Status.RestoreAttempt = name, snap.Key, attempt
	d.Post = &Post{Name: name, Key: snap.Key}
	d.Degraded = false
	d.Reason, d.Message = ReasonFollowing, "OpenBaoRestore "+name+" restores the source's newer snapshot "+snap.Key
}

// repost posts the recorded snapshot again once repostAfter has passed
// since its restore failed (at once when it is gone). The identity bound
// in the data of an earlier post does not outlive this one's install.
func (d *Decision) repost(o Observed, snap backup.Snapshot) {
	if !o.Restore.EndedAt.IsZero() {
		if wait := o.Restore.EndedAt.Add(repostAfter).Sub(o.Now); wait > 0 {
			d.Requeue = min(d.Requeue, wait)
			return
		}
	}
	loss := lossOf(&d.Status, o.Restore)
	if d.Status.IdentityBoundKey == snap.Key {
		d.Status.IdentityBoundKey = ""
	}
	n := d.Status.Posts() + 1
	d.post(o, snap, n)
	d.Message = fmt.Sprintf("%s; OpenBaoRestore %s posts it again (post %d of %d): a standby takes no writes, so another post "+
		"leaves the data the first would have", loss, d.Status.Restore, n, maxPosts)
}

// lossOf says how the recorded restore was lost.
func lossOf(s *v1alpha1.StandbyStatus, r *Restore) string {
	if !r.Found {
		return "OpenBaoRestore " + s.Restore + " of " + s.RestoreKey + " is gone (it may have posted it)"
	}
	return fmt.Sprintf("OpenBaoRestore %s of %s failed (%s)", s.Restore, s.RestoreKey, r.Reason)
}

// lost says the recorded restore ended without its snapshot served:
// failed, or gone before it succeeded.
func lost(o Observed) bool {
	r, s := o.Restore, o.Status
	return r != nil && s != nil && s.Restore != "" && s.ServedKey != s.RestoreKey &&
		(!r.Found || r.Phase == v1alpha1.RestoreFailed)
}

// afterLoss says what follows a lost restore of the recorded snapshot.
func (d *Decision) afterLoss() string {
	if n := d.Status.Posts(); n < maxPosts {
		return fmt.Sprintf("it is posted again (posted %d of %d times)", n, maxPosts)
	}
	return fmt.Sprintf("posted %d times, it is not posted again; the next newer snapshot of the source is", maxPosts)
}

func (d *Decision) lag() {
	s := &d.Status
	s.LagSeconds = 0
	if s.ServedTakenAt != nil && s.NewestTakenAt != nil && s.NewestTakenAt.After(s.ServedTakenAt.Time) {
		s.LagSeconds = int64(s.NewestTakenAt.Sub(s.ServedTakenAt.Time) / time.Second)
	}
}

// newer says snap comes after the key last posted, in the order of
// backup.Proven (the time in the name, then the key); nothing recorded
// is older than any snapshot.
func newer(snap backup.Snapshot, posted, prefix string) bool {
	if posted == "" {
		return true
	}
	at, ok := backup.ParseObjectKey(prefix, posted)
	if !ok {
		return false // an unreadable record: post nothing rather than guess
	}
	return snap.At.After(at) || (snap.At.Equal(at) && snap.Key > posted)
}

// idOf is the id in a snapshot's name; the restore's name carries it.
func idOf(prefix, key string) string {
	name, _ := strings.CutPrefix(key, prefix)
	if len(name) >= 25 {
		return name[17:25] // <YYYYMMDDThhmmssZ>-<id>...
	}
	return "x"
}

func takenAt(prefix, key string) *metav1.Time {
	t, ok := backup.ParseObjectKey(prefix, key)
	if !ok {
		return nil
	}
	return ptrTime(t)
}

func ptrTime(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}

func orUnknown(t *metav1.Time) string {
	if t == nil {
		return "at an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}
