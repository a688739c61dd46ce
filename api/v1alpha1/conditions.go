package v1alpha1

// Condition types. Each has one owner: the reconcile step named beside it.
const (
	// ConditionDegraded (render and apply step) is True when the operator
	// cannot make the cluster match its spec.
	ConditionDegraded = "Degraded"
	// ConditionPaused (pause step) is True while spec.paused holds.
	ConditionPaused = "Paused"
	// ConditionTLSReady (TLS step) is True when the servers have a valid
	// certificate to serve.
	ConditionTLSReady = "TLSReady"
	// ConditionSealReady (seal step) is True when the servers have what
	// their seal needs: the static key Secret, or an external KMS.
	ConditionSealReady = "SealReady"
	// ConditionOpenBaoInitialized (bootstrap step) is True once the
	// cluster is initialized, by sys/init or self-init.
	ConditionOpenBaoInitialized = "OpenBaoInitialized"
	// ConditionAvailable (server observation) is True while an active
	// server is ready to answer clients.
	ConditionAvailable = "Available"
	// ConditionUpgrading (rollout step) is True while a pod-template change
	// is being rolled out.
	ConditionUpgrading = "Upgrading"
	// ConditionIdentityCurrent (identity step) is True when the operator's
	// identity in OpenBao is at this release's revision, False when it is
	// older and the operator cannot bring it up to date (no root token);
	// unset while the identity is not the operator's.
	ConditionIdentityCurrent = "IdentityCurrent"
	// ConditionImageVerified (image step) is True when the image's cosign
	// signature checked out and its digest is pinned; unset while
	// spec.imageVerification is off.
	ConditionImageVerified = "ImageVerified"
	// ConditionReady (status summary, after the last step; decided by
	// controllers.decideReady) is True when the cluster serves as its spec
	// asks and nothing is under way: it is initialized, every desired
	// server (spec.replicas) is Ready and none is sealed, an active server
	// answers (Available), it is not Degraded, not paused, no rollout is
	// in progress and no OpenBaoRestore holds it. Otherwise it is False, and its reason is the first of
	// these that fails (Degraded's own reason when Degraded). Its
	// observedGeneration is the spec generation the pass read, as is
	// status.observedGeneration, so `kubectl wait --for=condition=Ready`
	// and GitOps health checks (Argo CD, Flux's kstatus) wait for the
	// current spec.
	//
	// On an OpenBaoBackup or OpenBaoRestore (their reconcilers) Ready is
	// True once the one-shot operation Succeeded, False while it is
	// Pending or Running (reason status.reason, or the phase), and False
	// with the failure's reason once it Failed; a failed one also carries
	// Stalled=True, which kstatus reads as Failed rather than still in
	// progress.
	ConditionReady = "Ready"
	// ConditionStalled (OpenBaoBackup and OpenBaoRestore reconcilers) is
	// True once the operation Failed and will not be retried; unset before.
	ConditionStalled = "Stalled"
)

// Reasons of Ready. A False Ready otherwise takes the reason of what is
// in the way: Degraded's reason, PausedBySpec, UpgradeInProgress,
// RestoreInProgress, NoActiveServer.
const (
	// ReasonClusterReady: every desired server is Ready and unsealed, an
	// active server answers, and nothing is under way.
	ReasonClusterReady = "ClusterReady"
	// ReasonNotInitialized: the cluster has not been initialized yet.
	ReasonNotInitialized = "NotInitialized"
	// ReasonServersNotReady: fewer servers are Ready than spec.replicas.
	ReasonServersNotReady = "ServersNotReady"
	// ReasonServersSealed: a server's service-registration label says it
	// is sealed.
	ReasonServersSealed = "ServersSealed"
)

// Reasons of ImageVerified, and ImageVerificationFailed of Degraded.
const (
	ReasonVerified                = "Verified"
	ReasonImageVerificationFailed = "ImageVerificationFailed"
	// ReasonVerifiedEarlier: the registry could not be reached, and
	// the digest verified last for the same image and key stays pinned.
	ReasonVerifiedEarlier     = "VerifiedEarlier"
	ReasonUnsigned            = "Unsigned"
	ReasonSignatureInvalid    = "SignatureInvalid"
	ReasonRegistryUnreachable = "RegistryUnreachable"
	ReasonImageNotFound       = "ImageNotFound"
	ReasonInvalidPolicy       = "InvalidPolicy"
	// ReasonImageNotAllowed (Degraded, image-policy step): an image the
	// cluster names is not from a repository the platform's image policy
	// allows; nothing is applied until it is.
	ReasonImageNotAllowed = "ImageNotAllowed"
	// ReasonFieldNotAllowed (Degraded, delegated-fields step): without the
	// webhook, a scheduling field, Service or Ingress annotation or
	// Ingress class is outside the platform's allow-list; nothing is
	// applied until it is within.
	ReasonFieldNotAllowed = "FieldNotAllowed"
)

// Reasons of IdentityCurrent.
const (
	ReasonIdentityUpToDate = "IdentityUpToDate"
	ReasonIdentityOutdated = "IdentityOutdated"
)

// AnnotationIdentityRevision, set by hand on an OpenBaoCluster, says the
// operator's identity was brought up to that revision by hand (on a
// self-initialized cluster, whose root token the operator never held).
const AnnotationIdentityRevision = "openbao.org/identity-revision"

// AnnotationRenderedGeneration, on the StatefulSet's own metadata (never
// its pod template, which it would roll), is the cluster's
// metadata.generation the StatefulSet was last rendered from. The same
// apply writes it and the template, so the two always agree.
const AnnotationRenderedGeneration = "openbao.org/rendered-generation"

// AnnotationRestartRequest, on the pod template, is the spec.restartRequest
// the operator handled (status.restart.request): a new value changes the
// template, which rolls every server through the rollout.
const AnnotationRestartRequest = "openbao.org/restart-request"

// Events of the imperative requests (spec.restartRequest).
const (
	EventRestartRequested = "RestartRequested"
	EventRestartCompleted = "RestartCompleted"
)

// Condition reasons, CamelCase as metav1.Condition requires.
const (
	ReasonRenderFailed  = "RenderFailed"
	ReasonApplyFailed   = "ApplyFailed"
	ReasonPruneFailed   = "PruneFailed"
	ReasonReconciled    = "Reconciled"
	ReasonPausedBySpec  = "PausedBySpec"
	ReasonNotPaused     = "NotPaused"
	ReasonInvalidValues = "InvalidValues"
	ReasonMissingKind   = "MissingKind"
	// ReasonChildNameTaken (Degraded): an object that is not the
	// cluster's stands where a child of it goes; nothing is applied
	// until it is gone.
	ReasonChildNameTaken = "ChildNameTaken"

	ReasonCertificatesReady         = "CertificatesReady"
	ReasonTLSIssueFailed            = "TLSIssueFailed"
	ReasonWaitingForExternalSecrets = "WaitingForExternalSecrets"
	ReasonInvalidExternalSecrets    = "InvalidExternalSecrets"
	ReasonExternalSecretsReady      = "ExternalSecretsReady"
	// ReasonExternalSecretWithoutCA (TLSReady, Degraded): the External
	// server Secret has no ca.crt, as cert-manager's ACME issuers write it.
	ReasonExternalSecretWithoutCA = "ExternalSecretWithoutCA"
	ReasonACMEByOpenBao           = "ACMEByOpenBao"

	ReasonStaticKeyReady      = "StaticKeyReady"
	ReasonStaticKeyInvalid    = "StaticKeyInvalid"
	ReasonStaticKeyNotAdopted = "StaticKeyNotAdopted"
	// ReasonSourceKeyMissing and ReasonSourceKeyInvalid: the Secret named
	// by spec.bootstrap.fromBackup.unsealKeySecretRef is missing or holds
	// no valid key.
	ReasonSourceKeyMissing = "SourceKeyMissing"
	ReasonSourceKeyInvalid = "SourceKeyInvalid"

	ReasonSelfInitSecretNotOwned = "SelfInitSecretNotOwned"
	ReasonExternalSeal           = "ExternalSeal"

	ReasonActiveServerReady = "ActiveServerReady"
	ReasonNoActiveServer    = "NoActiveServer"

	ReasonUpToDate          = "UpToDate"
	ReasonUpgradeInProgress = "UpgradeInProgress"
	ReasonRestoreInProgress = "RestoreInProgress"
	ReasonUpgradeComplete   = "UpgradeComplete"
	ReasonUpgradeHalted     = "UpgradeHalted"
	// ReasonWaitingForRolloutSlot (Upgrading False): an operator-caused
	// rollout is due, but --max-concurrent-rollouts other clusters hold
	// the rollout slots; it starts once one frees. Not Degraded.
	ReasonWaitingForRolloutSlot = "WaitingForRolloutSlot"
	ReasonStepDownTimeout       = "StepDownTimeout"
	ReasonPodReadyTimeout       = "PodReadyTimeout"
	ReasonHealthCheckTimeout    = "HealthCheckTimeout"
	ReasonRaftSyncTimeout       = "RaftSyncTimeout"
	// ReasonPeerNotReadyTimeout: a server other than the next to roll
	// stayed not Ready, sealed, unhealthy or behind for podReadyTimeout,
	// so the rollout did not release another pod (that could cost quorum).
	ReasonPeerNotReadyTimeout = "PeerNotReadyTimeout"
	ReasonDowngradeBlocked    = "DowngradeBlocked"
	ReasonPreflightFailed     = "PreflightFailed"
	ReasonScaleDownBlocked    = "ScaleDownBlocked"
	// ReasonScaleUpBlocked (Degraded): a volume at a new ordinal cannot be
	// checked, or holds data older than the cluster's own Raft
	// configuration, so the operator neither deletes it nor starts a
	// server on it.
	ReasonScaleUpBlocked = "ScaleUpBlocked"
)

// Labels and annotations the operator sets on what it manages.
const (
	// LabelCluster names the OpenBaoCluster a child belongs to; pruning
	// selects by it.
	LabelCluster = "openbao.org/cluster"
	// LabelManagedBy marks children applied by this operator.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is LabelManagedBy's value.
	ManagedByValue = "openbao-operator"
	// FieldManager is the one server-side apply field manager of the operator.
	FieldManager = "openbao-operator"
	// BreakGlassGroup is the group whose members may change what the
	// operator manages by hand, past the admission policy that locks it
	// to the operator (config/admission/managed-objects.yaml).
	BreakGlassGroup = "openbao-operator:break-glass"
)

// Conditions of the backup step.
const (
	// ConditionBackingUp (backup step) is True while a backup of the
	// cluster runs.
	ConditionBackingUp = "BackingUp"
	// ConditionRestoredFromBackup (fromBackup step) is True once a
	// cluster of spec.bootstrap.fromBackup holds its snapshot, False while
	// it is restored, after the restore failed, or while the spec cannot
	// be bound after a restore (BootstrapMisconfigured).
	ConditionRestoredFromBackup = "RestoredFromBackup"
	// ConditionStandby (standby step) is True while a standby cluster
	// (spec.standby) serves its source's newest snapshot and the canary
	// read from its data names it, False while it forms, trails, waits,
	// failed to follow, its canary does not prove the data, or once
	// promoted (reason Promoted).
	ConditionStandby = "Standby"
)

// Reasons of BackingUp.
const (
	ReasonBackupRunning   = "BackupRunning"
	ReasonNoBackupRunning = "NoBackupRunning"
	ReasonBackupsDisabled = "BackupsDisabled"
	ReasonInvalidSchedule = "InvalidSchedule"
)

// Conditions of the volumes step.
const (
	// ConditionVolumesGrown (volumes step) is True when every server's
	// claim requests and holds spec.storage.size, False while one grows,
	// waits for its pod to restart, or may not grow; unset while the size
	// is the one the StatefulSet was created with.
	ConditionVolumesGrown = "VolumesGrown"
)

// Reasons of VolumesGrown.
const (
	ReasonVolumesGrown = "VolumesGrown"
	// ReasonVolumesGrowing: the claims ask for the size; the volume
	// plugin has not reported it yet.
	ReasonVolumesGrowing = "VolumesGrowing"
	// ReasonFileSystemResizePending: a volume grew and its file system
	// grows when its server's pod restarts.
	ReasonFileSystemResizePending = "FileSystemResizePending"
	// ReasonVolumeGrowthRefused: a claim would shrink, or its class does
	// not allow expansion (volumes.Refusal).
	ReasonVolumeGrowthRefused = "VolumeGrowthRefused"
)

// Reasons of the events of the drain guard (the webhook on pods/eviction);
// no condition carries them.
const (
	// ReasonDrainStepDown: an eviction targeted the active server's pod;
	// the operator asked that server to step down and answers 429 until
	// another server is active and this one is a caught-up standby.
	ReasonDrainStepDown = "DrainStepDown"
	// ReasonDrainTimeBoundReached: a pod the guard refused was let through
	// after the guard's bound, though leadership had not moved or another
	// server had not caught up with the leader.
	ReasonDrainTimeBoundReached = "DrainTimeBoundReached"
)
