package backup

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/openbao/operator/api/v1alpha1"
)

// Reasons a backup does not start, CamelCase for conditions and events.
const (
	ReasonNotConfigured     = "BackupNotConfigured"
	ReasonClusterPaused     = "ClusterPaused"
	ReasonClusterNotRunning = "ClusterNotRunning"
	ReasonUpgradeInProgress = "UpgradeInProgress"
	ReasonBackupInProgress  = "BackupInProgress"
	ReasonAuthNotConfigured = "AuthNotConfigured"
	ReasonIdentityPending   = "IdentityPending"
	ReasonRestoreInProgress = "RestoreInProgress"
)

// Observed is what the preflight looks at.
type Observed struct {
	Cluster *v1alpha1.OpenBaoCluster
	// Status is the cluster's status as the caller knows it (the pass's,
	// or the stored one).
	Status *v1alpha1.OpenBaoClusterStatus
	// Running names the cluster's other backups that have not finished.
	Running []string
	// PreUpgrade says the backup is a rollout's pre-upgrade snapshot: the
	// rollout holds every pod until it succeeds, so Upgrading does not
	// stop it.
	PreUpgrade bool
	// Restores names the cluster's OpenBaoRestores under way: a snapshot
	// taken while one installs would hold neither the old data nor the new.
	Restores []string
}

// Check is the preflight's verdict.
type Check struct {
	OK              bool
	Reason, Message string
}

// Preflight says whether a backup may start now, the first failing rule
// naming why: backups configured with a target and an identity, the
// cluster not paused, Running, not upgrading, the operator's identity set
// up for a JWT role, and no other backup of it under way.
func Preflight(o Observed) Check {
	c := o.Cluster
	if check := Configured(c); !check.OK {
		return check
	}
	b := c.Spec.Backup
	switch {
	case c.Spec.Paused:
		return refuse(ReasonClusterPaused, "the cluster is paused")
	case !o.PreUpgrade && meta.IsStatusConditionTrue(o.Status.Conditions, v1alpha1.ConditionUpgrading):
		return refuse(ReasonUpgradeInProgress, "an upgrade is under way; a snapshot now could catch servers of two versions")
	case o.Status.Phase != v1alpha1.PhaseRunning && !(o.PreUpgrade && o.Status.Phase == v1alpha1.PhaseUpgrading):
		return refuse(ReasonClusterNotRunning, "the cluster is %s, not Running", phaseOr(o.Status.Phase))
	case b.JWTAuthRole != "" && !o.Status.IdentityConfigured:
		return refuse(ReasonIdentityPending, "spec.backup.jwtAuthRole needs the operator's OpenBao identity, which is set up once the cluster is initialized (status.identityConfigured)")
	case len(o.Restores) > 0:
		return refuse(ReasonRestoreInProgress, "restore %s of this cluster is under way", strings.Join(o.Restores, ", "))
	case len(o.Running) > 0:
		return refuse(ReasonBackupInProgress, "backup %s of this cluster is still running", strings.Join(o.Running, ", "))
	}
	return Check{OK: true}
}

// Configured says whether the cluster can be backed up at all: spec.backup
// set, with an identity. Waiting never changes its answer, so the admission
// webhook refuses an OpenBaoBackup of a cluster it fails.
func Configured(c *v1alpha1.OpenBaoCluster) Check {
	b := c.Spec.Backup
	switch {
	case b == nil:
		return refuse(ReasonNotConfigured, "spec.backup of OpenBaoCluster %s is not set", c.Name)
	case b.JWTAuthRole == "" && b.TokenSecretRef == nil:
		return refuse(ReasonAuthNotConfigured, "spec.backup names neither jwtAuthRole nor tokenSecretRef")
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
