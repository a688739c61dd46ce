package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupSpec takes Raft snapshots of the cluster and streams them to an
// S3-compatible object store: on a schedule, and on demand through
// OpenBaoBackup resources. Each backup runs as a Job whose executor
// authenticates to OpenBao with jwtAuthRole (by default the role "backup"
// the operator creates) or tokenSecretRef (never the root token), takes the snapshot from the active server, checks it while
// it streams and verifies the stored object.
// The schedule's rules are added by crdgen from internal/backup, so that the
// API server and the operator's parser give the same reasons.
// +kubebuilder:validation:XValidation:rule="!(has(self.jwtAuthRole) && has(self.tokenSecretRef))",message="set backup.jwtAuthRole or backup.tokenSecretRef, not both: the backup executor logs in with one of them (by default the role backup), never with the root token"
type BackupSpec struct {
	// Schedule is a cron expression in UTC: five fields (minute hour
	// day-of-month month day-of-week) or one of @yearly, @annually,
	// @monthly, @weekly, @daily, @midnight, @hourly. Empty takes backups on
	// demand only. A slot is taken at most once; slots missed while the
	// operator was down are caught up with one backup, not one each.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Schedule string `json:"schedule,omitempty"`

	// Target is the object store the snapshots are written to.
	Target BackupTarget `json:"target"`

	// JWTAuthRole is the role of the operator's JWT auth mount
	// (auth/openbao-operator) the executor logs in with, using a projected
	// service-account token of <cluster>-backup-serviceaccount whose
	// audience is openbao-operator:<namespace>/<cluster>:backup for the
	// role "backup" of an identity at revision 3 or later
	// (status.identityRevision), else openbao-operator:<namespace>/<cluster>.
	// Default (with no tokenSecretRef): the role "backup" that the
	// operator creates when it initializes the cluster.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.-]*$`
	// +kubebuilder:validation:MaxLength=128
	// +optional
	JWTAuthRole string `json:"jwtAuthRole,omitempty"`

	// TokenSecretRef names a Secret holding an OpenBao token allowed to read
	// sys/storage/raft/snapshot (key "token" unless set). It is mounted as a
	// file into the backup pod, never passed in the environment.
	// +optional
	TokenSecretRef *SecretKeyRef `json:"tokenSecretRef,omitempty"`

	// Retention deletes older snapshots of this cluster after each
	// successful backup. Without it every snapshot is kept.
	// +optional
	Retention *BackupRetention `json:"retention,omitempty"`

	// ExecutorImage runs the backup Job; empty uses the operator's own
	// image, whose binary holds the executor.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	// +optional
	ExecutorImage string `json:"executorImage,omitempty"`

	// Timeout bounds one backup Job (its activeDeadlineSeconds).
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+h)?([0-9]+m)?([0-9]+s)?$') && self != '' && duration(self) >= duration('1m') && duration(self) <= duration('24h')",message="backup.timeout must be a duration between 1m and 24h in h, m and s, such as 1h or 90m"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// HistoryLimit is how many completed scheduled OpenBaoBackups of the
	// cluster are kept as its history; older ones are deleted (their
	// snapshots are not: retention decides about those).
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	HistoryLimit *int32 `json:"historyLimit,omitempty"`

	// ServiceAccount is what the operator sets on the ServiceAccounts of the
	// backup and restore Jobs (<cluster>-backup-serviceaccount and
	// <cluster>-restore-serviceaccount): annotations for a cloud workload
	// identity, which the executor uses for the store when the target
	// names no credentialsSecretRef. The same keys as the servers'
	// spec.serviceAccount.annotations are allowed.
	// +optional
	ServiceAccount ServiceAccountSpec `json:"serviceAccount,omitempty"`

	// Verify runs a restore drill after each successful backup.
	// +optional
	Verify *BackupVerify `json:"verify,omitempty"`
}

// BackupTarget is a bucket of S3 or an S3-compatible store, of Google
// Cloud Storage, or a container of Azure Blob Storage.
// +kubebuilder:validation:XValidation:rule="(has(self.provider) && self.provider != 'S3') || has(self.endpoint)",message="backup.target.endpoint is required for provider S3 (optional for GCS and Azure)"
// +kubebuilder:validation:XValidation:rule="!has(self.provider) || self.provider != 'Azure' || has(self.credentialsSecretRef)",message="backup.target.credentialsSecretRef is required for provider Azure: a Secret with accountName and accountKey or sasToken"
// +kubebuilder:validation:XValidation:rule="!has(self.provider) || self.provider == 'S3' || !has(self.region) || size(self.region) == 0",message="backup.target.region is allowed only for provider S3"
// +kubebuilder:validation:XValidation:rule="!has(self.provider) || self.provider != 'GCS' || !has(self.usePathStyle) || !self.usePathStyle",message="backup.target.usePathStyle is allowed only for providers S3 and Azure"
type BackupTarget struct {
	// Provider is the kind of store: S3 (AWS S3 or any S3-compatible
	// store), GCS (Google Cloud Storage, JSON API) or Azure (Azure Blob
	// Storage; bucket names the container).
	// +kubebuilder:validation:Enum=S3;GCS;Azure
	// +kubebuilder:default=S3
	// +optional
	Provider string `json:"provider,omitempty"`

	// Endpoint is the store's URL, for example https://s3.eu-west-1.amazonaws.com
	// or https://minio.storage.svc:9000. Required for S3. For GCS, empty
	// is https://storage.googleapis.com; set it for an emulator or a
	// private endpoint. For Azure, empty is
	// https://<accountName>.blob.core.windows.net; with usePathStyle the
	// account name is put in the path (<endpoint>/<accountName>), as the
	// Azurite emulator and some private endpoints want.
	// +kubebuilder:validation:Pattern=`^https?://[^\s/?#]+/?$`
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// Bucket holds the snapshots: the S3 or GCS bucket, or the Azure
	// container.
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`
	Bucket string `json:"bucket"`

	// Region of the bucket; empty lets the client discover it.
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]*$`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Region string `json:"region,omitempty"`

	// PathPrefix is put before <namespace>/<cluster>/ in every object key.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!_.*'()-]+(/[A-Za-z0-9!_.*'()-]+)*$`
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '.' || s == '..')",message="backup.target.pathPrefix must not hold . or .. segments"
	// +kubebuilder:validation:MaxLength=512
	// +optional
	PathPrefix string `json:"pathPrefix,omitempty"`

	// UsePathStyle addresses the bucket as <endpoint>/<bucket> instead of
	// <bucket>.<host>; most self-hosted stores need it. False lets the
	// client choose: virtual-hosted for AWS and Google, path style
	// otherwise. For Azure it puts the account name in the endpoint's
	// path; GCS does not use it.
	// +optional
	UsePathStyle bool `json:"usePathStyle,omitempty"`

	// CASecretRef names a Secret with the PEM CA bundle that verifies a
	// private endpoint (key "ca.crt" unless set). Without it the system
	// roots apply.
	// +optional
	CASecretRef *SecretKeyRef `json:"caSecretRef,omitempty"`

	// CredentialsSecretRef names a Secret with the store's credentials.
	// It is mounted as files into the backup pod and read by the operator
	// for retention (with only these credentials). Without it, the backup
	// and restore Jobs use their pod's cloud identity (the cluster's
	// backup ServiceAccount: IRSA, EKS Pod Identity, GKE Workload Identity
	// or instance metadata) and retention runs in the backup Job: the
	// operator never uses its own cloud identity for a store. Its keys
	// depend on the provider:
	//   - S3: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and
	//     AWS_SESSION_TOKEN if needed).
	//   - GCS: credentials.json, a service account's JSON key (the same
	//     key as unseal.credentialsSecretRef's for gcpckms).
	//   - Azure (required): accountName, and either accountKey (shared
	//     key) or sasToken (a SAS token, without the leading "?").
	// +optional
	CredentialsSecretRef *corev1.LocalObjectReference `json:"credentialsSecretRef,omitempty"`
}

// SecretKeyRef names one key of a Secret in the cluster's namespace. Every
// field of the API that names a Secret for one value is one (a Secret
// whose several keys are documented is a LocalObjectReference).
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key in the Secret; each field says its default.
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Key string `json:"key,omitempty"`
}

// KeyOr is the key named, or def (the field's documented default) when
// none is.
func (r *SecretKeyRef) KeyOr(def string) string {
	if r == nil || r.Key == "" {
		return def
	}
	return r.Key
}

// Default keys of SecretKeyRef fields.
const (
	// DefaultTokenKey is the key of every tokenSecretRef.
	DefaultTokenKey = "token"
	// DefaultCAKey is the key of every caSecretRef.
	DefaultCAKey = "ca.crt"
	// DefaultUnsealKeyKey is the key of bootstrap.fromBackup.unsealKeySecretRef,
	// as of the operator's own <cluster>-unseal-key.
	DefaultUnsealKeyKey = "key"
	// GCPCredentialsKey is the key of a Google service account's JSON key
	// file in a credentialsSecretRef: the GCS backup target's and the
	// gcpckms seal's.
	GCPCredentialsKey = "credentials.json"
)

// The roles the operator creates in its JWT auth method for its own tasks:
// spec.upgrade.jwtAuthRole and spec.backup.jwtAuthRole default to them.
const (
	UpgradeJWTRole = "upgrade"
	BackupJWTRole  = "backup"
)

// LoginRole is the JWT auth role the backup executor logs in with: none
// when tokenSecretRef names a token, else jwtAuthRole, by default
// BackupJWTRole. Every reader of spec.backup's identity asks it.
func (b *BackupSpec) LoginRole() string {
	switch {
	case b.TokenSecretRef != nil:
		return ""
	case b.JWTAuthRole != "":
		return b.JWTAuthRole
	}
	return BackupJWTRole
}

// BackupRetention bounds the snapshots kept under the cluster's prefix.
// Only objects named as the executor names them, directly under
// <pathPrefix>/<namespace>/<cluster>/, are ever deleted, and never the one
// just written.
// +kubebuilder:validation:XValidation:rule="has(self.maxCount) || has(self.maxAge)",message="backup.retention needs maxCount, maxAge or both"
type BackupRetention struct {
	// MaxCount keeps this many newest snapshots.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxCount *int32 `json:"maxCount,omitempty"`
	// MaxAge deletes snapshots older than this, by the time in their name.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+h)?([0-9]+m)?([0-9]+s)?$') && self != '' && duration(self) >= duration('1m')",message="backup.retention.maxAge must be a duration of at least 1m in h, m and s, such as 720h (days are not a unit)"
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// BackupStatus is what the backups of a cluster came to. It is folded from
// the cluster's OpenBaoBackups by the operator, in the order they completed.
type BackupStatus struct {
	// LastBackupTime is when the newest successful backup completed.
	// +optional
	LastBackupTime *metav1.Time `json:"lastBackupTime,omitempty"`
	// LastBackupKey is the object key of the newest successful backup.
	// +optional
	LastBackupKey string `json:"lastBackupKey,omitempty"`
	// LastBackupSize is its size in bytes.
	// +optional
	LastBackupSize int64 `json:"lastBackupSize,omitempty"`
	// LastBackupName is the OpenBaoBackup that took it.
	// +optional
	LastBackupName string `json:"lastBackupName,omitempty"`
	// NextScheduledBackup is the next slot of the schedule.
	// +optional
	NextScheduledBackup *metav1.Time `json:"nextScheduledBackup,omitempty"`
	// ConsecutiveFailures counts the backups that failed since the last
	// success.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`
	// LastFailureReason says why the newest failed backup failed.
	// +optional
	LastFailureReason string `json:"lastFailureReason,omitempty"`
	// LastFailureTime is when it failed.
	// +optional
	LastFailureTime *metav1.Time `json:"lastFailureTime,omitempty"`
	// LastCompletionTime is the completion time of the newest OpenBaoBackup
	// counted into this status; a backup is counted once.
	// +optional
	LastCompletionTime *metav1.MicroTime `json:"lastCompletionTime,omitempty"`
	// Verifying is the restore drill under way.
	// +optional
	Verifying *BackupVerification `json:"verifying,omitempty"`
	// LastVerified is the newest restore drill that ended.
	// +optional
	LastVerified *BackupVerification `json:"lastVerified,omitempty"`
	// LastVerifiedSuccess is when a drill last passed.
	// +optional
	LastVerifiedSuccess *metav1.Time `json:"lastVerifiedSuccess,omitempty"`
}

// BackupPhase is where one backup is.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type BackupPhase string

// Backup phases.
const (
	BackupPending   BackupPhase = "Pending"
	BackupRunning   BackupPhase = "Running"
	BackupSucceeded BackupPhase = "Succeeded"
	BackupFailed    BackupPhase = "Failed"
)

// Done says the backup has finished, one way or the other.
func (p BackupPhase) Done() bool { return p == BackupSucceeded || p == BackupFailed }

// OpenBaoBackupSpec names the cluster to back up; where to and how come
// from the cluster's spec.backup.
type OpenBaoBackupSpec struct {
	// ClusterName is the OpenBaoCluster in this namespace.
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=40
	ClusterName string `json:"clusterName"`
}

// OpenBaoBackupStatus is the outcome of one backup.
type OpenBaoBackupStatus struct {
	// Phase is Pending, Running, Succeeded or Failed.
	// +optional
	Phase BackupPhase `json:"phase,omitempty"`
	// JobName is the Job that runs the executor.
	// +optional
	JobName string `json:"jobName,omitempty"`
	// Key is the object key of the snapshot.
	// +optional
	Key string `json:"key,omitempty"`
	// Size of the snapshot in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`
	// SizeText is size for people, in binary units ("1.2 GiB").
	// +optional
	SizeText string `json:"sizeText,omitempty"`
	// SHA256 is the hex SHA-256 digest of the stored object.
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// Duration is how long the executor took, from login to the verified
	// object.
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
	// StartTime is when the Job was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the backup finished.
	// +optional
	CompletionTime *metav1.MicroTime `json:"completionTime,omitempty"`
	// Canary is the writtenAt value (RFC 3339, UTC) of the canary the
	// executor wrote at openbao-operator/canary just before the snapshot,
	// as {"backup": <this backup's name>, "writtenAt": <canary>}: a
	// restored copy of this snapshot holds exactly that value. Empty when
	// the cluster has no canary mount or the backup role may not write it
	// (the message says so). It is a timestamp, not a secret.
	// +optional
	Canary string `json:"canary,omitempty"`
	// Reason is a CamelCase word for the phase: why it waits or failed.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains Reason. It never holds secret material.
	// +optional
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (True once Succeeded) and Stalled (True once
	// Failed); see ConditionReady.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// OpenBaoBackup is one Raft snapshot of an OpenBaoCluster, written to the
// cluster's backup target. Create one to take a backup now; the schedule
// creates them too, so the list is the history.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=baobackup,categories=openbao
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.status.key`
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.status.sizeText`
// +kubebuilder:printcolumn:name="Duration",type=string,JSONPath=`.status.duration`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63",message="metadata.name must be a DNS label"
type OpenBaoBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: create another OpenBaoBackup"
	Spec   OpenBaoBackupSpec   `json:"spec"`
	Status OpenBaoBackupStatus `json:"status,omitempty"`
}

// OpenBaoBackupList is a list of OpenBaoBackups.
// +kubebuilder:object:root=true
type OpenBaoBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenBaoBackup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&OpenBaoBackup{}, &OpenBaoBackupList{})
}
