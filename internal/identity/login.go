package identity

import (
	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/baoconfig"
)

// Login is how a role of a cluster's identity is logged in to: a token of
// ServiceAccount, minted for Audience, presented to Role.
type Login struct {
	ServiceAccount, Audience, Role string
}

// Subject is the sub claim of a ServiceAccount's tokens.
func Subject(namespace, serviceAccount string) string {
	return "system:serviceaccount:" + namespace + ":" + serviceAccount
}

// ownLogin is role's login as revision 3 sets it up: its own
// ServiceAccount and audience; the drill role's is the idle one, which no
// token carries until a backup arms it (DrillArm).
func ownLogin(c *v1alpha1.OpenBaoCluster, role string) Login {
	sa := map[string]string{
		UpgradeRole: c.UpgradeServiceAccountName(), BackupRole: c.BackupServiceAccountName(),
		RestoreRole: c.RestoreServiceAccountName(), DrillRole: c.DrillServiceAccountName(),
	}[role]
	audience := c.RoleTokenAudience(role)
	if role == DrillRole {
		audience = c.DrillIdleAudience()
	}
	return Login{ServiceAccount: sa, Audience: audience, Role: role}
}

// LoginFor is how the operator's task purpose (UpgradeRole, BackupRole or
// RestoreRole) logs in to role of cluster c, as c's status records the
// identity in place. From revision 3 the task's own role takes its own
// ServiceAccount and audience; before, every role took the cluster's
// audience and the restore role the backup ServiceAccount. A role of the
// user's own (spec.upgrade.jwtAuthRole, spec.backup.jwtAuthRole naming
// another role) takes the task's ServiceAccount and the cluster's
// audience, as documented for it.
func LoginFor(c *v1alpha1.OpenBaoCluster, purpose, role string) Login {
	own := ownLogin(c, purpose)
	own.Role = role
	switch {
	case role != purpose:
		own.Audience = c.OperatorTokenAudience()
	case RecordedRevision(&c.Status) < PerRoleRevision:
		own.Audience = c.OperatorTokenAudience()
		if purpose == RestoreRole {
			own.ServiceAccount = c.BackupServiceAccountName()
		}
	}
	return own
}

// DrillLogin is how the operator logs in to a restore drill's copy of
// source restored from the snapshot at key: the source's drill role, with
// the audience the source's drill role held only while that snapshot was
// taken. The source itself refuses the token.
func DrillLogin(source *v1alpha1.OpenBaoCluster, key string) Login {
	return Login{ServiceAccount: source.DrillServiceAccountName(), Audience: source.DrillTokenAudience(key), Role: DrillRole}
}

// DrillArm is the request the backup executor sends just before the
// snapshot at key: the drill role accepts that snapshot's drill audience,
// and the snapshot holds it. DrillDisarm, sent once the snapshot is read,
// puts the idle audience back, so that this cluster refuses every drill
// token. Both are allowed to the backup policy and nothing more of the
// role.
func DrillArm(c *v1alpha1.OpenBaoCluster, key string) baoconfig.InitRequest {
	return drillAudienceRequest("operator-drill-arm", c.DrillTokenAudience(key))
}

// DrillDisarm puts the drill role's idle audience back.
func DrillDisarm(c *v1alpha1.OpenBaoCluster) baoconfig.InitRequest {
	return drillAudienceRequest("operator-drill-disarm", c.DrillIdleAudience())
}

func drillAudienceRequest(name, audience string) baoconfig.InitRequest {
	return baoconfig.InitRequest{Name: name, Operation: "update", Path: DrillRolePath,
		Data: map[string]any{"role_type": "jwt", "bound_audiences": audience}}
}
