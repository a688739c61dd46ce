package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StandbySpec makes the cluster a disaster-recovery standby: it follows
// the snapshots of the source that spec.bootstrap.fromBackup names (its
// store, pathPrefix and sourceCluster; latest: true), restoring each newer
// one as it appears, and takes no client writes until promoted.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.promote) || !oldSelf.promote || (has(self.promote) && self.promote)",message="standby.promote cannot be taken back: a promoted cluster has taken writes of its own; create a new standby to follow a source again"
type StandbySpec struct {
	// PollInterval is how often the operator lists the source's snapshots:
	// from 30s to 1h. Unset is 1m.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s') && duration(self) <= duration('1h')",message="standby.pollInterval must be from 30s to 1h"
	// +optional
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`

	// Promote ends standing by, once and for good: the operator restores
	// nothing further, opens the client Service, and spec.backup (which
	// must name another prefix than the source's) takes this cluster's own
	// backups. It waits while a restore runs.
	// +optional
	Promote bool `json:"promote,omitempty"`
}

// Bounds and default of spec.standby.pollInterval (the CEL rule says the
// same bounds).
const (
	StandbyPollMin     = 30 * time.Second
	StandbyPollMax     = time.Hour
	StandbyPollDefault = time.Minute
)

// Poll is spec.standby.pollInterval held within its bounds.
func (s *StandbySpec) Poll() time.Duration {
	if s == nil || s.PollInterval == nil {
		return StandbyPollDefault
	}
	return min(max(s.PollInterval.Duration, StandbyPollMin), StandbyPollMax)
}

// StandbyStatus is what a standby serves and how far it trails its source.
type StandbyStatus struct {
	// Restore is the OpenBaoRestore of the newest snapshot posted: its
	// name and key are recorded here before it is created. A key is
	// posted again only while its last restore failed or disappeared,
	// under a new name, and at most 3 times in all (restoreAttempt): a
	// standby takes no writes, so a second post of one snapshot leaves
	// the data the first would have.
	// +optional
	Restore string `json:"restore,omitempty"`
	// RestoreKey is the snapshot that restore posts.
	// +optional
	RestoreKey string `json:"restoreKey,omitempty"`
	// RestoreAttempt is which post of RestoreKey restore is: 2 and 3 post
	// it again after a restore of it failed or disappeared (unset: 1).
	// +optional
	RestoreAttempt int32 `json:"restoreAttempt,omitempty"`
	// ServedKey and ServedSHA256 are the snapshot the cluster holds, as
	// its restore read and checked it.
	// +optional
	ServedKey string `json:"servedKey,omitempty"`
	// +optional
	ServedSHA256 string `json:"servedSHA256,omitempty"`
	// ServedTakenAt is when the served snapshot was taken (the time in
	// its name): the age of the data this cluster holds.
	// +optional
	ServedTakenAt *metav1.Time `json:"servedTakenAt,omitempty"`
	// NewestKey and NewestTakenAt are the source's newest proven snapshot
	// at the last poll.
	// +optional
	NewestKey string `json:"newestKey,omitempty"`
	// +optional
	NewestTakenAt *metav1.Time `json:"newestTakenAt,omitempty"`
	// LagSeconds is how much older the served snapshot is than the
	// source's newest.
	// +optional
	LagSeconds int64 `json:"lagSeconds,omitempty"`
	// IdentityBoundKey is the snapshot in whose data the operator's
	// identity was last bound to this cluster.
	// +optional
	IdentityBoundKey string `json:"identityBoundKey,omitempty"`
	// PolledAt is when a listing of the source's snapshots last changed
	// what this status shows (the first one, or one that found a newer
	// snapshot). The operator lists every pollInterval; a listing that
	// finds nothing new writes nothing.
	// +optional
	PolledAt *metav1.Time `json:"polledAt,omitempty"`
	// PromotedAt is when the cluster stopped standing by.
	// +optional
	PromotedAt *metav1.Time `json:"promotedAt,omitempty"`
	// Canary is the backup canary last read from this cluster's data,
	// after a restore: the served snapshot is proven only while the
	// canary was read for it and names it.
	// +optional
	Canary *StandbyCanary `json:"canary,omitempty"`
}

// StandbyCanary is the canary read from a standby's data: what the
// source's backup executor wrote just before it took the snapshot.
type StandbyCanary struct {
	// ServedKey is status.standby.servedKey when the canary was read.
	ServedKey string `json:"servedKey"`
	// Key is the snapshot the canary names; it matches when it is
	// ServedKey. Empty for a snapshot whose backup wrote no key (an
	// operator release before the standby's canary).
	// +optional
	Key string `json:"key,omitempty"`
	// Backup is the source's OpenBaoBackup that wrote it.
	// +optional
	Backup string `json:"backup,omitempty"`
	// WrittenAt is when it was written, just before the snapshot.
	// +optional
	WrittenAt string `json:"writtenAt,omitempty"`
}

// Proven says the canary was read from the data of the served snapshot
// and names it.
func (s *StandbyStatus) Proven() bool {
	return s != nil && s.ServedKey != "" && s.Canary != nil && s.Canary.ServedKey == s.ServedKey && s.Canary.Key == s.ServedKey
}

// StandingBy says the cluster follows a source and takes no client
// writes: spec.standby is set and it has not been promoted yet.
func (c *OpenBaoCluster) StandingBy() bool {
	return c.Spec.Standby != nil && (c.Status.Standby == nil || c.Status.Standby.PromotedAt == nil)
}

// StandbyRestoreName names the OpenBaoRestore that posts snapshot id (the
// eight-digit id in its name) to standby c.
func (c *OpenBaoCluster) StandbyRestoreName(id string) string {
	return boundedName(c.Name+"-standby-"+id, maxLabelValue)
}

// Posts is how many times RestoreKey was posted (RestoreAttempt; 1 when
// unset and a restore is recorded).
func (s *StandbyStatus) Posts() int32 {
	switch {
	case s == nil || s.Restore == "":
		return 0
	case s.RestoreAttempt < 1:
		return 1
	}
	return s.RestoreAttempt
}
