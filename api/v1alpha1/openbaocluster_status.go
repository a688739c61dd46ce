package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ClusterPhase summarizes where a cluster is in its life, for people and
// printer columns; automation waits on the Ready condition instead.
// Pending: no pass has applied the children yet. Initializing: applied,
// not yet initialized with every server Ready and an active one.
// Running: serving. Upgrading: a rollout is under way. Restoring: an
// OpenBaoRestore holds the cluster (its Job is named and it has not
// ended): the data is being replaced. Degraded: a person must act (the
// Degraded condition says why); it stands where the design's Failed did,
// because the operator keeps retrying and a fixed cause clears it.
// Paused: spec.paused. A backup under way does not change the phase (it
// does not change what the cluster serves): the BackingUp condition and
// the OpenBaoBackup show it.
// +kubebuilder:validation:Enum=Pending;Initializing;Running;Upgrading;Restoring;Degraded;Paused
type ClusterPhase string

// Phases.
const (
	PhasePending      ClusterPhase = "Pending"
	PhaseInitializing ClusterPhase = "Initializing"
	PhaseRunning      ClusterPhase = "Running"
	PhaseUpgrading    ClusterPhase = "Upgrading"
	PhaseRestoring    ClusterPhase = "Restoring"
	PhaseDegraded     ClusterPhase = "Degraded"
	PhasePaused       ClusterPhase = "Paused"
)

// Serving says the cluster serves as it should and a Day-2 operation may
// start, as far as the phase can tell: Running, or Restoring, which the
// Day-2 lock, read fresher than the phase, decides on (a restore that
// just ended leaves Restoring behind until the next pass).
func (p ClusterPhase) Serving() bool { return p == PhaseRunning || p == PhaseRestoring }

// OpenBaoClusterStatus is the observed state of an OpenBao cluster.
type OpenBaoClusterStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarizes the conditions.
	// +optional
	Phase ClusterPhase `json:"phase,omitempty"`
	// ActiveLeader is the pod that is the active (leader) server.
	// +optional
	ActiveLeader string `json:"activeLeader,omitempty"`
	// ReadyReplicas is the number of ready servers.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// ReadyText is readyReplicas/spec.replicas, such as "2/3", for the
	// printer column (kubectl cannot join two fields).
	// +optional
	ReadyText string `json:"readyText,omitempty"`
	// CurrentVersion is the OpenBao version every server runs.
	// +optional
	CurrentVersion string `json:"currentVersion,omitempty"`
	// HighestVersion is the newest OpenBao version any server has reported
	// since the last rollout completed. During a rollout currentVersion is
	// empty (the servers run two versions), so a change of spec.version is
	// judged against the newer of the two: no server goes back to an older
	// release over data a newer one wrote unless
	// spec.upgrade.allowDowngrade says so. Once no rollout runs and every
	// server reports one version, it is that version.
	// +optional
	HighestVersion string `json:"highestVersion,omitempty"`
	// SettledGeneration is the metadata.generation of the cluster that
	// rendered the pod template every server ran when no rollout last ran
	// (the StatefulSet's openbao.org/rendered-generation annotation). A
	// rollout of a template rendered from this same generation was caused
	// by the operator (a new image or chart), not by the spec.
	// +optional
	SettledGeneration int64 `json:"settledGeneration,omitempty"`
	// Initialized is true once the cluster has been initialized; it never
	// returns to false.
	// +optional
	Initialized bool `json:"initialized,omitempty"`
	// SelfInitialized is true when the initialization was OpenBao's self-init.
	// +optional
	SelfInitialized bool `json:"selfInitialized,omitempty"`
	// InitializationStarted is when the operator called sys/init; it is
	// written before the call, so a restarted operator that finds OpenBao
	// initialized without a root-token Secret knows the token was lost
	// rather than mistaking the cluster for one initialized elsewhere.
	// +optional
	InitializationStarted *metav1.Time `json:"initializationStarted,omitempty"`
	// BootstrapReset records the one time the operator wiped pod-0 to
	// initialize again, after its sys/init call was cut off and the root
	// token reached no one.
	// +optional
	BootstrapReset *BootstrapReset `json:"bootstrapReset,omitempty"`
	// IdentityConfigured says the operator's own identity is in place in
	// OpenBao: the JWT auth method at openbao-operator and its roles and
	// policies, set up at initialization (identityRevision says which).
	// +optional
	IdentityConfigured bool `json:"identityConfigured,omitempty"`
	// RootToken says whether a root token of the cluster is stored, and
	// what recovery keys exist (spec.rootToken).
	// +optional
	RootToken *RootTokenStatus `json:"rootToken,omitempty"`
	// FromBackup is what became of spec.bootstrap.fromBackup.
	// +optional
	FromBackup *FromBackupStatus `json:"fromBackup,omitempty"`
	// Standby is what a standby cluster (spec.standby) serves, and its
	// promotion.
	// +optional
	Standby *StandbyStatus `json:"standby,omitempty"`
	// IdentityRevision is the revision of that identity in place: 1 the
	// auth method with the upgrade and backup roles; 2 adds the restore
	// role and the backup canary (the KV mount openbao-operator/ and the
	// backup role's right to write openbao-operator/canary). A status
	// written before revisions were recorded, with identityConfigured
	// true, is at revision 1. The operator brings an older revision up to
	// date with the stored root token; without one the IdentityCurrent
	// condition says what to add by hand.
	// +optional
	IdentityRevision int32 `json:"identityRevision,omitempty"`
	// Upgrade is the progress of a rollout under way.
	// +optional
	Upgrade *UpgradeStatus `json:"upgrade,omitempty"`
	// ImageVerification is the image last verified under
	// spec.imageVerification, and the digest the pod template pins.
	// +optional
	ImageVerification *ImageVerificationStatus `json:"imageVerification,omitempty"`
	// Backup is what the cluster's backups came to.
	// +optional
	Backup *BackupStatus `json:"backup,omitempty"`
	// StepDown is the outcome of the last spec.stepDownRequest handled.
	// +optional
	StepDown *StepDownStatus `json:"stepDown,omitempty"`
	// Restart is the last spec.restartRequest handled: the pod template
	// carries it, and completedTime says every server runs that template.
	// +optional
	Restart *RestartStatus `json:"restart,omitempty"`
	// Raft is the cluster's Raft membership as autopilot last reported it
	// to the operator, so that readers need no OpenBao token. It is
	// refreshed when a rollout or scale-down reads it anyway, else at most
	// once per resync period, and written only when it tells something
	// new; observedAt says since when it holds.
	// +optional
	Raft *RaftStatus `json:"raft,omitempty"`

	// TLS holds the expiry of the certificates the servers present and
	// trust, read from their public certificates, so that a user with only
	// the view role sees them without reading a Secret.
	// +optional
	TLS *TLSStatus `json:"tls,omitempty"`
	// Conditions: Degraded, Paused, those of the later steps, and Ready,
	// which sums them up (see ConditionReady).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// StepDownStatus is what the operator did about a step-down request.
type StepDownStatus struct {
	// Request is the spec.stepDownRequest value handled.
	Request string `json:"request"`
	// Time is when it was handled.
	Time metav1.Time `json:"time"`
	// Server is the pod that was asked to step down; empty when none was
	// active.
	// +optional
	Server string `json:"server,omitempty"`
	// Result is StepDownRequested or NoActiveServer.
	Result string `json:"result"`
}

// Results of a step-down request.
const (
	StepDownRequested      = "StepDownRequested"
	StepDownNoActiveServer = "NoActiveServer"
)

// RestartStatus is what the operator did about a restart request.
type RestartStatus struct {
	// Request is the spec.restartRequest value the pod template carries.
	Request string `json:"request"`
	// Time is when the template first carried it.
	Time metav1.Time `json:"time"`
	// Generation is the cluster generation whose pod template first
	// carried it: the restart is complete once every server runs a
	// template of this generation or a later one (status.settledGeneration).
	Generation int64 `json:"generation"`
	// CompletedTime is when every server was found running it; unset while
	// the rollout runs.
	// +optional
	CompletedTime *metav1.Time `json:"completedTime,omitempty"`
}

// TLSStatus is when the certificates of the cluster expire. It changes
// only when a certificate does (a rotation, a renewed external Secret).
type TLSStatus struct {
	// ServerNotAfter is when the server certificate expires.
	// +optional
	ServerNotAfter *metav1.Time `json:"serverNotAfter,omitempty"`
	// CANotAfter is when the CA certificate that clients trust expires.
	// +optional
	CANotAfter *metav1.Time `json:"caNotAfter,omitempty"`
	// RotateRequest is the last spec.tls.rotateRequest handled: the server
	// certificate was reissued for it at RotatedAt.
	// +optional
	RotateRequest string `json:"rotateRequest,omitempty"`
	// RotatedAt is when the server certificate was reissued for
	// RotateRequest.
	// +optional
	RotatedAt *metav1.Time `json:"rotatedAt,omitempty"`
}

// RaftStatus is the Raft membership and autopilot's verdict on it.
type RaftStatus struct {
	// ObservedAt is when the operator read what this copy shows. A
	// settled cluster is read again every resync period, and the copy is
	// rewritten only when more than its Raft indexes and contacts changed,
	// so on a settled cluster it is when that state was first seen.
	ObservedAt metav1.Time `json:"observedAt"`
	// Leader is the node id (pod name) of the Raft leader.
	// +optional
	Leader string `json:"leader,omitempty"`
	// Healthy is autopilot's verdict on the whole cluster.
	Healthy bool `json:"healthy"`
	// FailureTolerance is how many voters the cluster can lose and keep
	// its quorum.
	FailureTolerance int32 `json:"failureTolerance"`
	// Voters are the node ids of the voters (the leader included), which
	// make up the quorum.
	// +optional
	Voters []string `json:"voters,omitempty"`
	// NonVoters are the node ids of the non-voters: the read replicas,
	// and a new server autopilot has not promoted yet.
	// +optional
	NonVoters []string `json:"nonVoters,omitempty"`
	// Servers are the Raft peers, by node id.
	// +listType=map
	// +listMapKey=id
	// +optional
	Servers []RaftServer `json:"servers,omitempty"`
}

// RaftServer is one Raft peer as autopilot reports it.
type RaftServer struct {
	// ID is the node id, which is the pod name.
	ID string `json:"id"`
	// Voter is true for voters and the leader.
	Voter bool `json:"voter"`
	// Healthy is autopilot's verdict on the server.
	Healthy bool `json:"healthy"`
	// LastIndex is the last Raft log index the server holds.
	// +optional
	LastIndex int64 `json:"lastIndex,omitempty"`
	// Lag is how many entries the server trails the leader's committed index.
	// +optional
	Lag int64 `json:"lag,omitempty"`
	// LastContact is how long before observedAt the leader last heard from it.
	// +optional
	LastContact *metav1.Duration `json:"lastContact,omitempty"`
}

// OpenBaoCluster is an OpenBao cluster run by the operator.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=baocluster;baoc,categories=openbao
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.readyText`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.currentVersion`
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.activeLeader`
// +kubebuilder:printcolumn:name="Last Backup",type=date,JSONPath=`.status.backup.lastBackupTime`,priority=1
// +kubebuilder:printcolumn:name="Upgrading To",type=string,JSONPath=`.status.upgrade.targetVersion`
// +kubebuilder:printcolumn:name="Partition",type=integer,JSONPath=`.status.upgrade.currentPartition`,priority=1
// +kubebuilder:printcolumn:name="Tolerance",type=integer,JSONPath=`.status.raft.failureTolerance`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.bootstrap) || !has(self.spec.bootstrap.fromBackup) || !has(self.spec.bootstrap.fromBackup.sourceCluster) || self.spec.bootstrap.fromBackup.sourceCluster == self.metadata.name || has(self.spec.bootstrap.fromBackup.tokenSecretRef) || (has(self.spec.bootstrap.fromBackup.keepSourceIdentity) && self.spec.bootstrap.fromBackup.keepSourceIdentity)",message="bootstrap.fromBackup.sourceCluster names another cluster: set bootstrap.fromBackup.tokenSecretRef (a token of the source that may write auth/openbao-operator, such as its root token) so the operator can bind its identity to this cluster, or keepSourceIdentity: true"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 40",message="metadata.name must be a DNS label of at most 40 characters starting with a letter, so that every child object's name stays valid"
type OpenBaoCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   OpenBaoClusterSpec   `json:"spec"`
	Status OpenBaoClusterStatus `json:"status,omitempty"`
}

// OpenBaoClusterList is a list of OpenBaoClusters.
// +kubebuilder:object:root=true
type OpenBaoClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenBaoCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&OpenBaoCluster{}, &OpenBaoClusterList{})
}

// BootstrapReset is the record of the operator wiping pod-0 after a lost
// initialization: no credential existed, so no data could have been
// written. It is written before anything is deleted and stays, so that a
// cluster is reset at most once.
type BootstrapReset struct {
	// LostInitializationStarted is when the sys/init call whose root token
	// was lost began.
	// +optional
	LostInitializationStarted *metav1.Time `json:"lostInitializationStarted,omitempty"`
	// Started is when the operator began the reset.
	Started metav1.Time `json:"started"`
	// PodUID and ClaimUID name the pod and the data volume claim that held
	// the lost initialization; the reset is under way while either exists.
	// +optional
	PodUID types.UID `json:"podUID,omitempty"`
	// +optional
	ClaimUID types.UID `json:"claimUID,omitempty"`
}
