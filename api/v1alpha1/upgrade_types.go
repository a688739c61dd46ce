package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpgradeSpec configures how the operator rolls the servers when their pod
// template changes (a new version, image, config.hcl, resources,
// annotations): one pod at a time from the highest ordinal, the active
// server stepped down before its pod restarts, each pod Ready, unsealed and
// caught up with the Raft log before the next.
// +kubebuilder:validation:XValidation:rule="!(has(self.jwtAuthRole) && has(self.tokenSecretRef))",message="set upgrade.jwtAuthRole or upgrade.tokenSecretRef, not both"
type UpgradeSpec struct {
	// JWTAuthRole is a role of the JWT auth method at JWTAuthPath that the
	// operator logs in with, using a short-lived token of ServiceAccount
	// <cluster>-upgrade-serviceaccount (audience
	// openbao-operator:<namespace>/<cluster>:upgrade for the role "upgrade"
	// of an identity at revision 3 or later, status.identityRevision; else
	// openbao-operator:<namespace>/<cluster>). Default: the role "upgrade"
	// that the operator creates when it initializes the cluster.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]+$`
	// +optional
	JWTAuthRole string `json:"jwtAuthRole,omitempty"`
	// JWTAuthPath is the mount path of that JWT auth method.
	// +kubebuilder:default=openbao-operator
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._/-]+$`
	// +optional
	JWTAuthPath string `json:"jwtAuthPath,omitempty"`
	// TokenSecretRef names a Secret in the cluster's namespace holding an
	// OpenBao token with the upgrade policy (key "token" unless set); it
	// replaces the JWT login. Never the root token.
	// +optional
	TokenSecretRef *SecretKeyRef `json:"tokenSecretRef,omitempty"`

	// PreUpgradeSnapshot takes a backup (spec.backup) before the first pod
	// is rolled, and rolls nothing until it succeeded.
	// +optional
	PreUpgradeSnapshot bool `json:"preUpgradeSnapshot,omitempty"`
	// AllowDowngrade lets spec.version move to an older release. Raft data
	// written by a newer release may not be readable by an older one.
	// +optional
	AllowDowngrade bool `json:"allowDowngrade,omitempty"`

	// StepDownTimeout bounds the wait for another server to become active
	// after the active one stepped down.
	// +kubebuilder:default="30s"
	// +optional
	StepDownTimeout *metav1.Duration `json:"stepDownTimeout,omitempty"`
	// PodReadyTimeout bounds the wait for a rolled pod to be Ready, and the
	// wait before the next pod is released for every other server to be
	// Ready, unsealed, healthy and caught up (PeerNotReadyTimeout).
	// +kubebuilder:default="5m"
	// +optional
	PodReadyTimeout *metav1.Duration `json:"podReadyTimeout,omitempty"`
	// HealthCheckTimeout bounds the wait for a rolled server to answer
	// sys/health initialized and unsealed.
	// +kubebuilder:default="2m"
	// +optional
	HealthCheckTimeout *metav1.Duration `json:"healthCheckTimeout,omitempty"`
	// RaftSyncTimeout bounds the wait for a rolled server's Raft log to come
	// within MaxRaftLag entries of the leader's.
	// +kubebuilder:default="2m"
	// +optional
	RaftSyncTimeout *metav1.Duration `json:"raftSyncTimeout,omitempty"`
	// MaxRaftLag is how many Raft entries a server may trail the leader by
	// and count as caught up.
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxRaftLag *int64 `json:"maxRaftLag,omitempty"`

	// ResumeRequest resumes a rollout that halted on a timeout: set it to a
	// value it has not had (a date, a counter) once the cause is fixed. The
	// operator resumes once per new value and never by itself.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	ResumeRequest string `json:"resumeRequest,omitempty"`
}

// LoginRole is the JWT auth role the operator logs in with for rollouts:
// none when tokenSecretRef names a token, else jwtAuthRole, by default
// UpgradeJWTRole.
func (u *UpgradeSpec) LoginRole() string {
	switch {
	case u.TokenSecretRef != nil:
		return ""
	case u.JWTAuthRole != "":
		return u.JWTAuthRole
	}
	return UpgradeJWTRole
}

// RolloutCause is what made a rollout due.
// +kubebuilder:validation:Enum=Spec;Operator
type RolloutCause string

// The causes of a rollout.
const (
	// RolloutCauseSpec: the spec changed since the servers last settled
	// on one template. Such a rollout never waits for other clusters.
	RolloutCauseSpec RolloutCause = "Spec"
	// RolloutCauseOperator: the template changed while the spec did not;
	// the operator's own image or chart changed it.
	RolloutCauseOperator RolloutCause = "Operator"
)

// UpgradeStatus is the progress of a rollout; it lives only while one is
// under way, and a restarted operator resumes from it.
type UpgradeStatus struct {
	// TargetVersion is spec.version when the rollout started.
	TargetVersion string `json:"targetVersion"`
	// FromVersion is the version the servers ran before.
	// +optional
	FromVersion string `json:"fromVersion,omitempty"`
	// TargetRevision is the StatefulSet revision being rolled out.
	TargetRevision string `json:"targetRevision"`
	// StartedAt is when the rollout started.
	StartedAt metav1.Time `json:"startedAt"`
	// CurrentPartition is the StatefulSet partition: pods with a lower
	// ordinal still run the old template.
	CurrentPartition int32 `json:"currentPartition"`
	// CompletedPods are the pods rolled and verified, in order.
	// +optional
	CompletedPods []string `json:"completedPods,omitempty"`
	// LastStepDownTime is when the operator last asked the active server
	// to step down.
	// +optional
	LastStepDownTime *metav1.Time `json:"lastStepDownTime,omitempty"`
	// Step is the wait the rollout is in: ReadReplicas (at the start, the
	// read replicas roll first), StepDown (the active server is asked to
	// step down), PodReady, HealthCheck, RaftSync; empty between pods.
	// +optional
	Step string `json:"step,omitempty"`
	// StepStartedAt is when the current wait began; its timeout counts
	// from here.
	// +optional
	StepStartedAt *metav1.Time `json:"stepStartedAt,omitempty"`
	// Halted is the reason the rollout stopped (a timeout); it resumes
	// when spec.upgrade.resumeRequest changes.
	// +optional
	Halted string `json:"halted,omitempty"`
	// ResumeRequest is the spec.upgrade.resumeRequest this rollout has
	// seen; a different one resumes a halted rollout.
	// +optional
	ResumeRequest string `json:"resumeRequest,omitempty"`
	// Cause is what made the rollout due: Spec (the cluster's spec
	// changed) or Operator (only the operator changed the template, as an
	// operator upgrade does). Operator-caused rollouts run a bounded number
	// at a time across the operator's clusters (--max-concurrent-rollouts).
	// +optional
	Cause RolloutCause `json:"cause,omitempty"`
}

// OperatorTokenAudience is the audience of the service-account tokens the
// operator requests to log in to this cluster when its identity in
// OpenBao predates revision 3, or is a role of the user's own
// (status.identityRevision below 3): a token for one cluster is refused by
// every other. From revision 3 each role has its own audience
// (RoleTokenAudience).
func (c *OpenBaoCluster) OperatorTokenAudience() string {
	return "openbao-operator:" + c.Namespace + "/" + c.Name
}

// RoleTokenAudience is the audience of the tokens that log in to one role
// of the operator's identity (revision 3 on): a token minted for one role
// is refused by every other role and every other cluster. Cluster names
// hold no colon, so no audience of one cluster is another's.
func (c *OpenBaoCluster) RoleTokenAudience(role string) string {
	return c.OperatorTokenAudience() + ":" + role
}

// DrillTokenAudience is the audience of the token the operator logs in to
// a restore drill's copy with: one per snapshot (its object key, hashed),
// which this cluster's drill role accepts only while the backup executor
// takes that snapshot, so the snapshot holds it and the cluster itself no
// longer does once the backup is over.
func (c *OpenBaoCluster) DrillTokenAudience(key string) string {
	sum := sha256.Sum256([]byte(key))
	return c.DrillAudiencePrefix() + hex.EncodeToString(sum[:16])
}

// DrillAudiencePrefix begins every drill audience of this cluster.
func (c *OpenBaoCluster) DrillAudiencePrefix() string {
	return c.RoleTokenAudience("drill") + ":"
}

// DrillIdleAudience is the drill role's audience between backups: no token
// is ever minted for it (drill audiences end in hex digits).
func (c *OpenBaoCluster) DrillIdleAudience() string { return c.DrillAudiencePrefix() + "idle" }

// UpgradeServiceAccountName is the identity the operator logs in to
// OpenBao with for rollouts, peer removal and autopilot.
func (c *OpenBaoCluster) UpgradeServiceAccountName() string {
	return c.Name + SuffixUpgradeServiceAccount
}

// BackupServiceAccountName is the identity backup Jobs log in with (and,
// before identity revision 3, restore Jobs).
func (c *OpenBaoCluster) BackupServiceAccountName() string {
	return c.Name + SuffixBackupServiceAccount
}

// RestoreServiceAccountName is the identity restore Jobs log in with, from
// identity revision 3: a backup Job's token cannot install a snapshot.
func (c *OpenBaoCluster) RestoreServiceAccountName() string {
	return c.Name + SuffixRestoreServiceAccount
}

// DrillServiceAccountName is the identity the operator logs in to a
// restore drill's copy with (a TokenRequest; no pod runs as it).
func (c *OpenBaoCluster) DrillServiceAccountName() string { return c.Name + SuffixDrillServiceAccount }
