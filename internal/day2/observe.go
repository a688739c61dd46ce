package day2

import (
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/openbao/operator/api/v1alpha1"
)

// Observation is what the cache shows of one cluster's operations.
type Observation struct {
	// Running are the operations under way: the only meaning of "running"
	// in the operator.
	Running []Op
	// Queued are the backups and restores that exist, are not being
	// deleted, and have neither started nor ended.
	Queued []Op
	// Ended are the operations kept in the cluster's status that ended
	// (the last drill): an entry of the Registry for one is done.
	Ended []Op
}

// Observe reads the operations of cluster c from objects: c's status
// (status, when given, is the one the caller is building: the pass's),
// and the OpenBaoBackups and OpenBaoRestores of its namespace (those of
// other clusters are skipped).
//
// A backup or restore runs from the pass that names its Job until it
// ends, also while it is being deleted (its Job may still be streaming a
// snapshot; a restore's finalizer keeps it until the outcome is known).
// A rollout runs while status.upgrade is set or Upgrading is True (which
// it is while the pre-upgrade snapshot is taken). A drill runs while
// status.backup.verifying is set.
func Observe(c *v1alpha1.OpenBaoCluster, status *v1alpha1.OpenBaoClusterStatus, backups []v1alpha1.OpenBaoBackup,
	restores []v1alpha1.OpenBaoRestore) Observation {
	if status == nil {
		status = &c.Status
	}
	var o Observation
	if status.Upgrade != nil || meta.IsStatusConditionTrue(status.Conditions, v1alpha1.ConditionUpgrading) {
		o.Running = append(o.Running, RolloutOp())
	}
	if b := status.Backup; b != nil && b.Verifying != nil {
		o.Running = append(o.Running, DrillOp(b.Verifying.Backup))
	}
	if b := status.Backup; b != nil && b.LastVerified != nil {
		o.Ended = append(o.Ended, DrillOp(b.LastVerified.Backup))
	}
	for i := range backups {
		b := &backups[i]
		if b.Spec.ClusterName == c.Name {
			o.add(BackupOp(b), b.Status.JobName != "", b.Status.Phase.Done(), !b.DeletionTimestamp.IsZero())
		}
	}
	for i := range restores {
		r := &restores[i]
		if r.Spec.ClusterName == c.Name {
			o.add(RestoreOp(r), r.Status.JobName != "", r.Status.Phase.Done(), !r.DeletionTimestamp.IsZero())
		}
	}
	return o
}

func (o *Observation) add(op Op, started, ended, deleting bool) {
	switch {
	case ended:
	case started:
		o.Running = append(o.Running, op)
	case !deleting: // one deleted before it started never starts
		o.Queued = append(o.Queued, op)
	}
}

// Names lists, sorted, the names of the operations of kind k in ops.
func Names(ops []Op, k Kind) []string {
	var out []string
	for _, op := range ops {
		if op.Kind == k {
			out = append(out, op.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Unfinished lists, sorted, the backups or restores that have not ended:
// running or queued.
func (o Observation) Unfinished(k Kind) []string {
	return append(Names(o.Running, k), Names(o.Queued, k)...)
}

// RolloutOp is the cluster's rollout.
func RolloutOp() Op { return Op{Ref: Ref{Kind: Rollout}} }

// DrillOp is the drill of backup.
func DrillOp(backup string) Op { return Op{Ref: Ref{Kind: Drill, Name: backup}} }

// BackupOp is OpenBaoBackup b; its trigger label says whose step it is.
func BackupOp(b *v1alpha1.OpenBaoBackup) Op {
	op := Op{Ref: Ref{Kind: Backup, Name: b.Name}, UID: b.UID}
	switch b.Labels[v1alpha1.LabelBackupTrigger] {
	case v1alpha1.BackupTriggerPreUpgrade:
		op.Of = &Ref{Kind: Rollout}
	case v1alpha1.BackupTriggerPreRestore:
		if r := b.Labels[v1alpha1.LabelRestore]; r != "" {
			op.Of = &Ref{Kind: Restore, Name: r}
		}
	}
	return op
}

// RestoreOp is OpenBaoRestore r.
func RestoreOp(r *v1alpha1.OpenBaoRestore) Op {
	return Op{Ref: Ref{Kind: Restore, Name: r.Name}, UID: r.UID}
}

func (o Observation) shows(list []Op, e Op) bool {
	for _, op := range list {
		if op.Ref == e.Ref && (op.UID == "" || e.UID == "" || op.UID == e.UID) {
			return true
		}
	}
	return false
}

// lags says the cache does not show the start of e, which this process
// recorded: the object is there and has not started (a backup or
// restore), or the status does not name it (a rollout or drill). A backup
// or restore the cache no longer has is gone, so it lags no more.
func (o Observation) lags(e Op) bool {
	if o.shows(o.Running, e) || o.shows(o.Ended, e) {
		return false
	}
	if e.Kind == Backup || e.Kind == Restore {
		return o.shows(o.Queued, e)
	}
	return true
}
