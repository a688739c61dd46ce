package restore

import (
	"fmt"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/day2"
	"github.com/openbao/operator/internal/identity"
)

// Reasons a restore does not start, besides backup's (BackupNotConfigured,
// ClusterPaused, ClusterNotRunning, UpgradeInProgress,
// BackupInProgress, IdentityPending).
const (
	ReasonRestoreInProgress = day2.ReasonRestoreInProgress
	ReasonNoBootstrapSource = "NoBootstrapSource"
	// ReasonForceWithoutPreRestoreSnapshot: force: true with preRestoreSnapshot: false.
	ReasonForceWithoutPreRestoreSnapshot = "ForceWithoutPreRestoreSnapshot"
)

// ForceWithoutUndoMessage is the refusal of ForceNeedsUndo.
const ForceWithoutUndoMessage = "spec.force: true needs spec.preRestoreSnapshot: true (its default): a forced restore " +
	"skips OpenBao's seal check, and a snapshot whose keyring this cluster's seal cannot open leaves the cluster unable to " +
	"unseal; the pre-restore snapshot is the only way back. Remove spec.preRestoreSnapshot: false, or drop spec.force"

// PreflightInput is what the preflight looks at.
type PreflightInput struct {
	Cluster *v1alpha1.OpenBaoCluster
	Restore *v1alpha1.OpenBaoRestore
	// Lock is day2's verdict on the restore beside the cluster's other
	// operations.
	Lock day2.Verdict
}

// Check is the preflight's verdict. Permanent says waiting cannot help
// (the cluster has no backup target or identity): the restore fails
// instead of waiting.
type Check struct {
	OK, Permanent   bool
	Reason, Message string
}

// Preflight says whether a restore may start now, the first failing rule
// naming why: spec.backup with an identity, the cluster not paused (a
// paused cluster holds a restore that has not started), no rollout under
// way, Running, the operator's identity set up for a JWT role, and no
// operation in the way (day2: a rollout, a backup, another restore).
func Preflight(in PreflightInput) Check {
	if check := Configured(in.Cluster, in.Restore); !check.OK {
		return check
	}
	c := ViewFor(in.Cluster, in.Restore)
	b := c.Spec.Backup
	switch {
	case c.Spec.Paused:
		return hold(backup.ReasonClusterPaused, "the cluster is paused (spec.paused); the restore starts once it is resumed")
	case !in.Lock.OK():
		return hold(in.Lock.Reason, in.Lock.Message)
	case !c.Status.Phase.Serving():
		return hold(backup.ReasonClusterNotRunning, fmt.Sprintf("the cluster is %s, not Running", orNone(string(c.Status.Phase))))
	case b.LoginRole() != "" && !c.Status.IdentityConfigured:
		return hold(backup.ReasonIdentityPending, "the operator's OpenBao identity is not set up yet (status.identityConfigured)")
	case b.LoginRole() != "" && identity.RecordedRevision(&c.Status) < restoreRoleRevision:
		// An identity of an earlier release has no restore role; the
		// operator adds it when it holds the root token.
		return hold(v1alpha1.ReasonIdentityOutdated, identity.OutdatedMessage(c, identity.RecordedRevision(&c.Status)))
	}
	return Check{OK: true}
}

// Configured says whether restore r of cluster c can ever run: a source
// the cluster has (spec.bootstrap.fromBackup for source.bootstrap) and
// spec.backup with an identity. Its refusals are permanent, so the
// admission webhook refuses an OpenBaoRestore that fails it.
func Configured(c *v1alpha1.OpenBaoCluster, r *v1alpha1.OpenBaoRestore) Check {
	if check := ForceNeedsUndo(r); !check.OK {
		return check
	}
	view := ViewFor(c, r)
	if view == nil && r.Spec.Source.Standby {
		return Check{Permanent: true, Reason: ReasonNoBootstrapSource,
			Message: fmt.Sprintf("OpenBaoCluster %s has no spec.standby (with spec.bootstrap.fromBackup) for source.standby to restore from", c.Name)}
	}
	if view == nil {
		return Check{Permanent: true, Reason: ReasonNoBootstrapSource,
			Message: fmt.Sprintf("OpenBaoCluster %s has no spec.bootstrap.fromBackup for source.bootstrap to restore", c.Name)}
	}
	if view.Spec.Backup == nil {
		return Check{Permanent: true, Reason: backup.ReasonBackupNotConfigured,
			Message: fmt.Sprintf("OpenBaoCluster %s has no spec.backup: a restore reads the snapshot from its backup target with its backup identity", c.Name)}
	}
	return Check{OK: true}
}

// ForceNeedsUndo is the rule for spec.force: a forced restore must take
// the pre-restore snapshot. OpenBao 2.4 cannot check beforehand that this
// cluster's seal opens a snapshot's keyring: sys/storage/raft/snapshot
// verifies the snapshot's sealed checksums with the running seal and, if
// they open, installs it in the same call (no dry run); snapshot-force
// drops the seal access and verifies nothing (vault/logical_system_raft.go,
// handleStorageRaftSnapshotWrite). A forced snapshot of a cluster with
// another seal installs fine and then cannot be unsealed, so the copy of
// the data it replaced must exist first. A bootstrap restore is exempt:
// the cluster holds nothing yet, and takes no pre-restore snapshot. The
// webhook (through Configured) and the controller (Preflight) both call it.
func ForceNeedsUndo(r *v1alpha1.OpenBaoRestore) Check {
	if r == nil || !r.Spec.Force || r.Spec.Source.Bootstrap || r.WantsPreRestoreSnapshot() {
		return Check{OK: true}
	}
	return Check{Permanent: true, Reason: ReasonForceWithoutPreRestoreSnapshot, Message: ForceWithoutUndoMessage}
}

// restoreRoleRevision is the identity revision that brought the restore
// role.
const restoreRoleRevision = 2

func hold(reason, msg string) Check { return Check{Reason: reason, Message: msg} }

func orNone(s string) string {
	if s == "" {
		return "without a phase yet"
	}
	return s
}
