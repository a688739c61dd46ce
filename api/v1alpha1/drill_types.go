package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupVerify is the restore drill: proof that a backup restores, and
// restores the data it was taken from.
type BackupVerify struct {
	// Enabled restores the newest successful backup, once, into a
	// throwaway one-server cluster <cluster>-drill in this namespace (the
	// same version, storage and seal, formed through
	// spec.bootstrap.fromBackup), reads back the canary the backup wrote
	// just before its snapshot, and deletes the copy. Each new successful
	// backup is drilled in turn.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Timeout bounds one drill, from the copy's creation to the canary
	// read.
	// +kubebuilder:default="20m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+h)?([0-9]+m)?([0-9]+s)?$') && self != '' && duration(self) >= duration('2m') && duration(self) <= duration('6h')",message="backup.verify.timeout must be a duration between 2m and 6h in h, m and s, such as 20m"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// DrillResult is how a restore drill ended.
// +kubebuilder:validation:Enum=Passed;Failed
type DrillResult string

// Drill results.
const (
	DrillPassed DrillResult = "Passed"
	DrillFailed DrillResult = "Failed"
)

// BackupVerification is one restore drill.
type BackupVerification struct {
	// Backup is the OpenBaoBackup drilled; Key its object.
	Backup string `json:"backup"`
	// +optional
	Key string `json:"key,omitempty"`
	// Copy is the throwaway cluster the backup is restored into.
	// +optional
	Copy string `json:"copy,omitempty"`
	// StartTime is when the copy was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the drill ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Result is Passed or Failed once the drill ended.
	// +optional
	Result DrillResult `json:"result,omitempty"`
	// Reason is a CamelCase word for the result; Message explains it.
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// DrillCopyName names the throwaway cluster of c's restore drills.
func (c *OpenBaoCluster) DrillCopyName() string {
	return boundedName(c.Name+"-drill", maxClusterName)
}

// maxClusterName is the longest OpenBaoCluster name the API accepts.
const maxClusterName = 40

// LabelDrillOf marks a drill's copy with the cluster it verifies.
const LabelDrillOf = "openbao.org/drill-of"

// ConditionBackupVerified (drill step) is True when the newest restore
// drill passed, False when it failed.
const ConditionBackupVerified = "BackupVerified"

// DrillSource is the cluster whose restore drill c is the copy of, as
// DrillCopyFor makes one: labelled with it, controlled by it, formed from
// its snapshot keeping its identity. Empty for any other cluster. The
// operator logs in to such a copy with the source's drill role only, never
// with a token the source itself accepts.
func (c *OpenBaoCluster) DrillSource() string {
	src, fb, owner := c.Labels[LabelDrillOf], c.FromBackup(), metav1.GetControllerOf(c)
	if src == "" || fb == nil || !fb.KeepSourceIdentity || fb.SourceCluster != src || fb.Key == "" ||
		owner == nil || owner.Kind != Kind || owner.Name != src {
		return ""
	}
	return src
}
