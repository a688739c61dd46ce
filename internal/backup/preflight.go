package backup

import (
	"fmt"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/day2"
)

// Reasons a backup does not start, CamelCase for conditions and events.
const (
	ReasonBackupNotConfigured = "BackupNotConfigured"
	ReasonClusterPaused       = "ClusterPaused"
	ReasonClusterNotRunning   = "ClusterNotRunning"
	ReasonIdentityPending     = "IdentityPending"
	// The operation in the way (package day2 decides).
	ReasonUpgradeInProgress = day2.ReasonUpgradeInProgress
	ReasonBackupInProgress  = day2.ReasonBackupInProgress
	ReasonRestoreInProgress = day2.ReasonRestoreInProgress
)

// PreflightInput is what the preflight looks at.
type PreflightInput struct {
	Cluster *v1alpha1.OpenBaoCluster
	// Status is the cluster's status as the caller knows it (the pass's,
	// or the stored one).
	Status *v1alpha1.OpenBaoClusterStatus
	// PreUpgrade says the backup is a rollout's pre-upgrade snapshot: the
	// rollout holds every pod until it succeeds, so the cluster's
	// Upgrading phase does not stop it (nor, in Lock, the rollout).
	PreUpgrade bool
	// Lock is day2's verdict on the backup beside the cluster's other
	// operations.
	Lock day2.Verdict
}

// Check is the preflight's verdict. Wait says another operation is in
// the way: the backup waits for it instead of failing.
type Check struct {
	OK, Wait        bool
	Reason, Message string
}

// Preflight says whether a backup may start now, the first failing rule
// naming why: backups configured with a target and an identity, the
// cluster not paused, no operation in the way (day2), Running, and the
// operator's identity set up for a JWT role, and not a standby.
func Preflight(o PreflightInput) Check {
	c := o.Cluster
	if check := Configured(c); !check.OK {
		return check
	}
	b := c.Spec.Backup
	switch {
	case c.Spec.Paused:
		return refuse(ReasonClusterPaused, "the cluster is paused")
	case c.StandingBy():
		return refuse(ReasonStandingBy, "the cluster is a standby (spec.standby) that has not been promoted: it takes no backups of its own")
	case !o.Lock.OK():
		return Check{Wait: true, Reason: o.Lock.Reason, Message: o.Lock.Message}
	case !o.Status.Phase.Serving() && !(o.PreUpgrade && o.Status.Phase == v1alpha1.PhaseUpgrading):
		return refuse(ReasonClusterNotRunning, "the cluster is %s, not Running", phaseOr(o.Status.Phase))
	case b.LoginRole() != "" && !o.Status.IdentityConfigured:
		return refuse(ReasonIdentityPending, "the backup logs in as JWT role %s (spec.backup.jwtAuthRole), which needs the operator's OpenBao identity, set up once the cluster is initialized (status.identityConfigured)", b.LoginRole())
	}
	return Check{OK: true}
}

// ReasonStandingBy: the cluster is a standby that has not been promoted.
const ReasonStandingBy = "StandingBy"

// Configured says whether the cluster can be backed up at all: spec.backup
// set (its identity always is: a token, or a JWT role that defaults to the
// operator's). Waiting never changes its answer, so the admission webhook
// refuses an OpenBaoBackup of a cluster it fails.
func Configured(c *v1alpha1.OpenBaoCluster) Check {
	if c.Spec.Backup == nil {
		return refuse(ReasonBackupNotConfigured, "spec.backup of OpenBaoCluster %s is not set", c.Name)
	}
	return Check{OK: true}
}

func refuse(reason, format string, args ...any) Check {
	return Check{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func phaseOr(p v1alpha1.ClusterPhase) string {
	if p == "" {
		return "without a phase yet"
	}
	return string(p)
}
