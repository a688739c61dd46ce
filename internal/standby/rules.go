package standby

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
)

// Refused is the rule a standby's own backups are held to: spec.backup
// must not write under its source's prefix (the same store, and one
// prefix within the other), or its first backup after promotion would mix
// with the source's snapshots, and a standby following that prefix would
// restore them. The admission webhook and the controller, which holds
// promotion while it fails, both call it.
func Refused(c *v1alpha1.OpenBaoCluster) field.ErrorList {
	fb := c.FromBackup()
	if c.Spec.Standby == nil || c.Spec.Backup == nil || fb == nil {
		return nil
	}
	src, own := fb.Target, c.Spec.Backup.Target
	if src.Provider != own.Provider || strings.TrimRight(src.Endpoint, "/") != strings.TrimRight(own.Endpoint, "/") || src.Bucket != own.Bucket {
		return nil
	}
	srcPrefix := SourcePrefix(c)
	ownPrefix := backup.ObjectPrefix(own.PathPrefix, c.Namespace, c.Name)
	if !strings.HasPrefix(srcPrefix, ownPrefix) && !strings.HasPrefix(ownPrefix, srcPrefix) {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "backup", "target", "pathPrefix"), own.PathPrefix, fmt.Sprintf(
		"a standby's own backups would be written under %s, within its source's prefix %s in the same bucket: set another "+
			"spec.backup.target.pathPrefix (or bucket) than spec.bootstrap.fromBackup.target's", ownPrefix, srcPrefix))}
}

// SourcePrefix is where the standby's source writes its snapshots.
func SourcePrefix(c *v1alpha1.OpenBaoCluster) string {
	fb := c.FromBackup()
	return backup.ObjectPrefix(fb.Target.PathPrefix, fb.SourceNamespaceName(c.Namespace), fb.SourceClusterName(c.Name))
}
