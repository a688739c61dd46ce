package identity

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/openbao/operator/api/v1alpha1"
)

// RecordedRevision is the revision of the identity a cluster's status says
// is in place. A status written before revisions were recorded, with
// identityConfigured true, is revision 1; zero means none.
func RecordedRevision(s *v1alpha1.OpenBaoClusterStatus) int32 {
	switch {
	case s.IdentityRevision > 0:
		return s.IdentityRevision
	case s.IdentityConfigured:
		return 1
	}
	return 0
}

// AcknowledgedRevision is the revision a user says, in the annotation
// openbao.org/identity-revision, they brought the identity up to by hand;
// zero when the annotation is absent or not a number.
func AcknowledgedRevision(c *v1alpha1.OpenBaoCluster) int32 {
	v, err := strconv.ParseInt(c.Annotations[v1alpha1.AnnotationIdentityRevision], 10, 32)
	if err != nil || v < 0 {
		return 0
	}
	return int32(v)
}

// Missing names what an identity at revision rev lacks of the current
// one, for a condition message; empty when nothing.
func Missing(rev int32) []string {
	var out []string
	if rev < 2 {
		out = append(out,
			"the role "+RestoreRole+" (policy "+RestorePolicy+") that restore Jobs log in with",
			"the backup canary: the KV version 1 mount "+CanaryMount+"/ and the right of policy "+
				BackupPolicy+" to create, update and read "+CanaryPath)
	}
	if rev < PerRoleRevision {
		out = append(out, "one ServiceAccount and audience per role, and the role "+DrillRole+
			" (policy "+DrillPolicy+") of restore drills")
	}
	return out
}

// OutdatedMessage says what a cluster at revision rev lacks and how to add
// it by hand, for the IdentityCurrent condition and its Event; it fits a
// condition message (1 KiB).
func OutdatedMessage(c *v1alpha1.OpenBaoCluster, rev int32) string {
	effect := "Restore drills are refused until it is added"
	if rev < 2 {
		effect = "Backups go on without a canary; restores and restore drills are refused until it is added"
	}
	how := "the policies and the roles"
	if rev < 2 {
		how = "`" + CanaryMountCommand() + "`, " + how
	}
	return fmt.Sprintf("the operator's identity in OpenBao is at revision %d of %d and the operator holds no root token "+
		"to update it; it lacks %s. %s. Add it with a token allowed to, as docs/operate.md (Restore) shows: %s for "+
		"ServiceAccounts %s, %s, %s, %s; then annotate the cluster %s=%d",
		rev, Revision, strings.Join(Missing(rev), ", and "), effect, how, c.UpgradeServiceAccountName(),
		c.BackupServiceAccountName(), c.RestoreServiceAccountName(), c.DrillServiceAccountName(),
		v1alpha1.AnnotationIdentityRevision, Revision)
}

// CanaryMountCommand enables the canary mount by hand.
func CanaryMountCommand() string {
	return "bao secrets enable -path=" + CanaryMount + " -version=1 kv"
}
