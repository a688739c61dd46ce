package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RestoreSource names the snapshot to restore: one object key, or the
// newest snapshot of this cluster.
// +kubebuilder:validation:XValidation:rule="(has(self.key) ? 1 : 0) + (has(self.latest) && self.latest ? 1 : 0) + (has(self.bootstrap) && self.bootstrap ? 1 : 0) == 1",message="set exactly one of source.key, source.latest: true and source.bootstrap: true"
// +kubebuilder:validation:XValidation:rule="!has(self.standby) || !self.standby || has(self.key)",message="source.standby: true needs source.key: the snapshot of the standby's source to restore"
type RestoreSource struct {
	// Key is the object key of the snapshot in the cluster's backup target
	// (status.key of an OpenBaoBackup), such as
	// team-a/bao/20260101T000000Z-0a1b2c3d.snap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(s, s == '.' || s == '..')",message="source.key must be a relative object key without . or .. segments"
	// +optional
	Key string `json:"key,omitempty"`
	// Latest restores the newest snapshot directly under this cluster's
	// prefix (<pathPrefix>/<namespace>/<cluster>/), never another
	// cluster's.
	// +optional
	Latest bool `json:"latest,omitempty"`
	// Bootstrap restores the snapshot the cluster's
	// spec.bootstrap.fromBackup names, from its store; the operator
	// creates this restore when the cluster first runs.
	// +optional
	Bootstrap bool `json:"bootstrap,omitempty"`
	// Standby reads source.key from the store of spec.bootstrap.fromBackup
	// of a standby cluster (spec.standby), under its source's prefix; the
	// operator creates these restores as the source's snapshots appear.
	// +optional
	Standby bool `json:"standby,omitempty"`
}

// OpenBaoRestoreSpec names the cluster and the snapshot. The store and the
// identity come from the cluster's spec.backup.
type OpenBaoRestoreSpec struct {
	// ClusterName is the OpenBaoCluster in this namespace.
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=40
	ClusterName string `json:"clusterName"`

	// Source is the snapshot.
	Source RestoreSource `json:"source"`

	// ExpectedSHA256 is the hex SHA-256 of the object (status.sha256 of the
	// OpenBaoBackup that wrote it). A snapshot with another digest is
	// refused before anything reaches OpenBao.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +optional
	ExpectedSHA256 string `json:"expectedSHA256,omitempty"`

	// Force restores through sys/storage/raft/snapshot-force, which skips
	// OpenBao's check that the snapshot was taken by a cluster with this
	// seal. Only for a snapshot of another cluster whose seal this cluster
	// can also open; otherwise the restored data cannot be unsealed.
	// OpenBao cannot check that beforehand, so force needs
	// preRestoreSnapshot true (except for source.bootstrap).
	// +optional
	Force bool `json:"force,omitempty"`

	// PreRestoreSnapshot takes a snapshot of the cluster as it is (an
	// OpenBaoBackup, status.preRestoreBackup) before the restore replaces
	// its data; the restore starts only once that snapshot is stored, and
	// status.preRestoreKey names it, so a wrong restore is undone by
	// restoring that key. A restore of source.bootstrap takes none: the
	// cluster holds nothing yet.
	// +kubebuilder:default=true
	// +optional
	PreRestoreSnapshot *bool `json:"preRestoreSnapshot,omitempty"`
}

// WantsPreRestoreSnapshot says whether the restore takes a snapshot of the
// cluster before replacing its data: spec.preRestoreSnapshot, true unless
// set false, and never for source.bootstrap.
func (r *OpenBaoRestore) WantsPreRestoreSnapshot() bool {
	return !r.Spec.Source.Bootstrap && !r.Spec.Source.Standby && (r.Spec.PreRestoreSnapshot == nil || *r.Spec.PreRestoreSnapshot)
}

// RestorePhase is where one restore is.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type RestorePhase string

// Restore phases.
const (
	RestorePending   RestorePhase = "Pending"
	RestoreRunning   RestorePhase = "Running"
	RestoreSucceeded RestorePhase = "Succeeded"
	RestoreFailed    RestorePhase = "Failed"
)

// Done says the restore has finished, one way or the other.
func (p RestorePhase) Done() bool { return p == RestoreSucceeded || p == RestoreFailed }

// RestoreStep is the step of a Running restore.
// +kubebuilder:validation:Enum=Restoring;Verifying
type RestoreStep string

// Restore steps.
const (
	// RestoreStepRestoring: the Job streams the snapshot into OpenBao.
	RestoreStepRestoring RestoreStep = "Restoring"
	// RestoreStepVerifying: the snapshot is installed; the operator waits
	// for every voter to be healthy and to serve the restored data.
	RestoreStepVerifying RestoreStep = "Verifying"
)

// OpenBaoRestoreStatus is the progress and outcome of one restore; all of
// the progress is here, so an operator restart resumes where it was.
type OpenBaoRestoreStatus struct {
	// Phase is Pending, Running, Succeeded or Failed.
	// +optional
	Phase RestorePhase `json:"phase,omitempty"`
	// Step is Restoring or Verifying while Running.
	// +optional
	Step RestoreStep `json:"step,omitempty"`
	// PreRestoreBackup is the OpenBaoBackup that takes the pre-restore
	// snapshot (spec.preRestoreSnapshot).
	// +optional
	PreRestoreBackup string `json:"preRestoreBackup,omitempty"`
	// PreRestoreKey is the object key of the pre-restore snapshot, stored
	// before anything was posted to OpenBao: restoring it undoes this
	// restore.
	// +optional
	PreRestoreKey string `json:"preRestoreKey,omitempty"`
	// JobName is the Job that runs the executor. It is recorded before the
	// Job is created, and a Job of that name that is gone is never created
	// again: it may have posted the snapshot.
	// +optional
	JobName string `json:"jobName,omitempty"`
	// Key is the object key restored (resolved from source.latest).
	// +optional
	Key string `json:"key,omitempty"`
	// Size of the snapshot in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`
	// SHA256 is the hex SHA-256 of the snapshot as read.
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// RaftIndex is the Raft index the snapshot was taken at.
	// +optional
	RaftIndex uint64 `json:"raftIndex,omitempty"`
	// RestoredAt is when OpenBao accepted the snapshot.
	// +optional
	RestoredAt *metav1.Time `json:"restoredAt,omitempty"`
	// RestartedPods are the server pods restarted because they did not
	// serve the restored data.
	// +optional
	RestartedPods []string `json:"restartedPods,omitempty"`
	// StartTime is when the Job was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the restore finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Reason is a CamelCase word for the phase: why it waits or failed.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains Reason and says what state the cluster is in. It
	// never holds secret material.
	// +optional
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Complete, Ready (True once Succeeded) and Stalled (True
	// once Failed); see ConditionReady.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// OpenBaoRestore restores one Raft snapshot from the cluster's backup
// target into a running OpenBaoCluster, replacing all of its data. It
// holds the cluster's rollouts and backups while it runs.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=baorestore,categories=openbao
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.step`
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.status.key`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.size`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63",message="metadata.name must be a DNS label"
type OpenBaoRestore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: create another OpenBaoRestore"
	Spec   OpenBaoRestoreSpec   `json:"spec"`
	Status OpenBaoRestoreStatus `json:"status,omitempty"`
}

// OpenBaoRestoreList is a list of OpenBaoRestores.
// +kubebuilder:object:root=true
type OpenBaoRestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenBaoRestore `json:"items"`
}

func init() {
	SchemeBuilder.Register(&OpenBaoRestore{}, &OpenBaoRestoreList{})
}

// RestoreKind is the API kind of OpenBaoRestore.
const RestoreKind = "OpenBaoRestore"

// ControllerReference makes r the controller of its Job.
func (r *OpenBaoRestore) ControllerReference() metav1.OwnerReference {
	return *metav1.NewControllerRef(r, GroupVersion.WithKind(RestoreKind))
}

// RestoreJobName names the Job of restore r of cluster c.
func (c *OpenBaoCluster) RestoreJobName(r *OpenBaoRestore) string {
	return boundedName("restore-"+c.Name+"-"+r.Name, maxLabelValue)
}

// PreRestoreBackupName is the OpenBaoBackup that takes restore r's
// pre-restore snapshot: one per restore object (its UID), so a restore
// created again under the same name takes its own.
func (r *OpenBaoRestore) PreRestoreBackupName() string {
	uid := strings.ReplaceAll(string(r.UID), "-", "")
	if len(uid) > 8 {
		uid = uid[:8]
	}
	name := r.Name + "-pre-restore"
	if uid != "" {
		name += "-" + uid
	}
	return boundedName(name, maxLabelValue)
}

// BackupTriggerPreRestore marks the snapshot a restore takes of the
// cluster before replacing its data (spec.preRestoreSnapshot).
const BackupTriggerPreRestore = "pre-restore"

// RestoreFinalizer holds an OpenBaoRestore that has not ended: deleting it
// mid-restore does not lift its holds on the cluster's backups and
// rollouts while OpenBao may still be installing the snapshot.
const RestoreFinalizer = "openbao.org/restore-outcome"

// LabelRestore names the OpenBaoRestore a Job and its pod belong to.
const LabelRestore = "openbao.org/restore"

// ConditionRestoreComplete (OpenBaoRestore reconciler) is True once the
// restore succeeded, False once it failed or while it runs.
const ConditionRestoreComplete = "Complete"
