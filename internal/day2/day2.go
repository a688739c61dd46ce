// Package day2 owns one question about a cluster's Day-2 operations
// (rollouts, backups, restores, restore drills): is one under way, and may
// this one start beside it? It answers from the objects as the cache shows
// them (an OpenBaoBackup or OpenBaoRestore whose Job is named and that has
// not ended, a rollout or drill in the cluster's status), so there is no
// persisted lock that can go stale, and from one in-memory Registry of the
// operations this process started and the cache does not show yet, which
// every reconciler shares: a start in one reconciler holds the others
// inside the window in which the cache lags its status write.
package day2

import (
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/openbao/operator/api/v1alpha1"
)

// Kind is a kind of Day-2 operation.
type Kind string

// The kinds of Day-2 operation.
const (
	// Rollout replaces the servers one by one (status.upgrade).
	Rollout Kind = "rollout"
	// Backup streams a snapshot out of the active server (an
	// OpenBaoBackup's Job).
	Backup Kind = "backup"
	// Restore posts a snapshot into the active server, replacing the Raft
	// store (an OpenBaoRestore's Job).
	Restore Kind = "restore"
	// Drill restores a stored backup into a throwaway copy of the cluster
	// (status.backup.verifying): it reads the backup target and writes
	// only the copy, never the cluster's own servers.
	Drill Kind = "drill"
)

// Kinds lists every kind, in the order a verdict names them.
var Kinds = []Kind{Restore, Rollout, Backup, Drill}

// Ref names one operation: its kind and the name of its object (the
// OpenBaoBackup's, the OpenBaoRestore's, the backup under drill; "" for
// the rollout, of which a cluster has at most one).
type Ref struct {
	Kind Kind
	Name string
}

func (r Ref) String() string {
	if r.Name == "" {
		return "a " + string(r.Kind)
	}
	return string(r.Kind) + " " + r.Name
}

// Op is one operation of a cluster.
type Op struct {
	Ref
	// UID is the object's, when the operation is an object's (a backup, a
	// restore): one deleted and made again under its name is another.
	UID types.UID
	// Of names the operation this one is a step of: a rollout's
	// pre-upgrade snapshot, a restore's pre-restore snapshot. A step and
	// its operation never hold each other.
	Of *Ref
}

// Reasons a start waits, CamelCase for conditions and events; each names
// the kind of operation in the way.
const (
	ReasonRestoreInProgress = v1alpha1.ReasonRestoreInProgress
	ReasonUpgradeInProgress = v1alpha1.ReasonUpgradeInProgress
	ReasonBackupInProgress  = "BackupInProgress"
	ReasonDrillInProgress   = "DrillInProgress"
)

var reasons = map[Kind]string{
	Restore: ReasonRestoreInProgress, Rollout: ReasonUpgradeInProgress,
	Backup: ReasonBackupInProgress, Drill: ReasonDrillInProgress,
}

// Verdict says whether an operation may start. The zero Verdict lets it.
type Verdict struct {
	// In is the operation in the way; nil: it may start.
	In *Op
	// Reason is In's kind's reason; Message names every operation of that
	// kind in the way and says when the wanted one starts.
	Reason, Message string
}

// OK says the operation may start.
func (v Verdict) OK() bool { return v.In == nil }

// waitsFor[want][running] says an operation of kind want does not start
// while one of kind running is under way. The cluster's own servers are
// touched by three kinds: a restore replaces the Raft store, a rollout
// restarts the servers and moves leadership, a backup streams a snapshot
// from the leader. Any two of them at once is unsafe (a snapshot of a
// store being replaced or of servers of two versions holds neither state;
// a restore beside a rollout can post to a server being replaced), so each
// of them waits for every other, one of a kind included: two backups race
// for the same leader and for retention, two restores would post two
// snapshots. A drill touches only a copy and the backup target, so it
// holds nothing and nothing holds it, but one drill runs at a time (its
// copy has one name).
var waitsFor = map[Kind]map[Kind]bool{
	Restore: {Restore: true, Rollout: true, Backup: true},
	Rollout: {Restore: true, Rollout: true, Backup: true},
	Backup:  {Restore: true, Rollout: true, Backup: true},
	Drill:   {Drill: true},
}

// Waits says whether want waits for running by kind alone.
func Waits(want, running Kind) bool { return waitsFor[want][running] }

// Decide says whether want may start beside the operations under way, or
// names the kind of operation in the way (restores first, then a
// rollout, then backups, then a drill), and every one of that kind. An
// operation never waits for itself, for a step of itself, or for the
// operation it is a step of.
func Decide(want Op, running []Op) Verdict {
	in := map[Kind][]Op{}
	for _, r := range running {
		if holds(want, r) {
			in[r.Kind] = append(in[r.Kind], r)
		}
	}
	for _, k := range Kinds {
		ops := in[k]
		if len(ops) == 0 {
			continue
		}
		sort.Slice(ops, func(i, j int) bool { return ops[i].Name < ops[j].Name })
		first := ops[0]
		return Verdict{In: &first, Reason: reasons[k], Message: message(want, ops)}
	}
	return Verdict{}
}

// holds says running holds want.
func holds(want, running Op) bool {
	switch {
	case running.Ref == want.Ref:
		return false
	case running.Of != nil && *running.Of == want.Ref, want.Of != nil && *want.Of == running.Ref:
		return false
	}
	return Waits(want.Kind, running.Kind)
}

func message(want Op, ops []Op) string {
	names := make([]string, 0, len(ops))
	for _, o := range ops {
		if o.Name != "" && (len(names) == 0 || names[len(names)-1] != o.Name) {
			names = append(names, o.Name)
		}
	}
	what := "a " + string(ops[0].Kind)
	if len(names) > 0 {
		what = string(ops[0].Kind) + " " + strings.Join(names, ", ")
	}
	return what + " of this cluster is under way; the " + string(want.Kind) + " starts once it has finished"
}
