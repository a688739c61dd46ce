package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// OpenBaoClusterSpec is the desired state of an OpenBao cluster.
// +kubebuilder:validation:XValidation:rule="!has(self.imagePullSecrets) || !has(self.values) || !has(self.values.imagePullSecrets)",message="spec.imagePullSecrets and spec.values.imagePullSecrets are both set: set spec.imagePullSecrets only (spec.values is for chart values the spec does not cover)"
// +kubebuilder:validation:XValidation:rule="!has(self.podDisruptionBudget) || !has(self.values) || !has(self.values.podDisruptionBudget)",message="spec.podDisruptionBudget and spec.values.podDisruptionBudget are both set: set spec.podDisruptionBudget only (spec.values is for chart values the spec does not cover)"
// +kubebuilder:validation:XValidation:rule="!has(self.monitoring) || !has(self.values) || !has(self.values.serviceMonitor)",message="spec.monitoring and spec.values.serviceMonitor are both set: set spec.monitoring only (spec.values is for chart values the spec does not cover)"
// +kubebuilder:validation:XValidation:rule="!has(self.selfInit) || !self.selfInit.enabled || size(self.selfInit.requests) > 0",message="selfInit.requests must hold at least one request when selfInit.enabled is true"
// +kubebuilder:validation:XValidation:rule="has(self.standby) == has(oldSelf.standby)",message="standby is set when a cluster is created and cannot be added or removed afterwards (promote with standby.promote: true)"
// +kubebuilder:validation:XValidation:rule="!has(self.standby) || (has(self.bootstrap) && has(self.bootstrap.fromBackup) && has(self.bootstrap.fromBackup.latest) && self.bootstrap.fromBackup.latest && has(self.bootstrap.fromBackup.tokenSecretRef))",message="standby follows the source of bootstrap.fromBackup: set bootstrap.fromBackup with latest: true and tokenSecretRef (a token of the source that may write auth/openbao-operator), which the operator uses after each restore"
// +kubebuilder:validation:XValidation:rule="has(self.bootstrap) == has(oldSelf.bootstrap)",message="bootstrap is set when a cluster is created and cannot be added or removed afterwards"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || !has(self.bootstrap.fromBackup) || self.unseal.type != 'static' || has(self.bootstrap.fromBackup.unsealKeySecretRef)",message="bootstrap.fromBackup.unsealKeySecretRef is required with unseal.type static: name the Secret holding the source cluster's static seal key"
// +kubebuilder:validation:XValidation:rule="!has(self.rootToken) || !has(self.rootToken.recoveryKeys) || !has(self.selfInit) || !self.selfInit.enabled",message="rootToken.recoveryKeys apply to the operator's sys/init: with selfInit enabled OpenBao initializes itself and the operator holds no root token"
// +kubebuilder:validation:XValidation:rule="!has(self.rootToken) || !has(self.rootToken.recoveryKeys) || !has(self.bootstrap) || !has(self.bootstrap.fromBackup)",message="rootToken.recoveryKeys cannot be used with bootstrap.fromBackup: the restored snapshot replaces the recovery keys (and the root token) of the cluster's own initialization with the source's"
// +kubebuilder:validation:XValidation:rule="!has(self.readReplicas) || !has(self.tls) || !has(self.tls.mode) || self.tls.mode != 'ACME'",message="readReplicas cannot be used with tls.mode ACME: each read replica would order the ACME certificate of the cluster's domains itself, and the challenge reaches the active server only"
// +kubebuilder:validation:XValidation:rule="self.replicas >= 3 || oldSelf.replicas < 3",message="replicas cannot go below 3 once a cluster has 3 or more servers: fewer than 3 Raft voters tolerate no failure. To run fewer servers, bootstrap a new cluster from a backup"
type OpenBaoClusterSpec struct {
	// Version is the OpenBao release to run, as semantic version X.Y.Z; it is
	// the image tag.
	// +kubebuilder:validation:Pattern=`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version"`

	// Image is the OpenBao image repository, without tag or digest; the tag is
	// spec.version. An operator-wide registry mirror may be set in watches.yaml.
	// +kubebuilder:default="quay.io/openbao/openbao"
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$`
	// +kubebuilder:validation:MaxLength=255
	// +optional
	Image string `json:"image,omitempty"`

	// Replicas is the number of OpenBao servers (Raft peers) once the cluster
	// is initialized; until then the operator runs one. Odd counts tolerate
	// the same failures as the next even count, with fewer peers.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=11
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Paused stops the operator from changing anything of this cluster; the
	// running pods are left as they are.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// StepDownRequest asks the operator, once per new value, to have the
	// active server give up leadership (a Raft election follows); `kubectl
	// openbao step-down` writes the current time. The operator acts with its
	// own OpenBao identity, so the requester needs no token, only the right
	// to patch the OpenBaoCluster; status.stepDown records the value it
	// handled. A request waits while a rollout runs or the cluster is paused.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	StepDownRequest string `json:"stepDownRequest,omitempty"`

	// RestartRequest asks the operator, once per new value, to restart every
	// server through the Raft-aware rollout (one server at a time, the
	// active one last after it stepped down, each released only once it is
	// ready, unsealed and caught up); `kubectl openbao restart` writes the
	// current time. The pod template carries the value handled (annotation
	// openbao.org/restart-request), so the rollout is the spec's own, never
	// held by --max-concurrent-rollouts; status.restart records it and when
	// every server ran it. Clearing the field restarts nothing.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	RestartRequest string `json:"restartRequest,omitempty"`

	// TLS configures the certificates OpenBao serves and Raft peers verify.
	// +kubebuilder:default={mode: OperatorManaged}
	// +optional
	TLS TLSSpec `json:"tls,omitempty"`

	// Storage is the Raft data volume of each server. Its size may grow
	// when the StorageClass allows volume expansion (the operator patches
	// each server's claim); it may not shrink, and the class cannot change.
	// +kubebuilder:default={}
	// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",message="storage.storageClassName is immutable: the servers' volumes keep their class"
	// +optional
	Storage StorageSpec `json:"storage,omitempty"`

	// Unseal chooses how servers unseal: a static key the operator generates,
	// or an external KMS.
	// +kubebuilder:default={type: static}
	// +kubebuilder:validation:XValidation:rule="self.type == oldSelf.type",message="unseal.type is immutable: seal migration is not supported by the operator"
	// +optional
	Unseal UnsealSpec `json:"unseal,omitempty"`

	// Bootstrap chooses what a new cluster starts from: empty (unset), or
	// a snapshot in object storage (fromBackup). It cannot change after
	// creation.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="bootstrap is immutable: it applies once, when the cluster forms"
	// +optional
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`

	// Standby makes the cluster a disaster-recovery standby of the source
	// that spec.bootstrap.fromBackup names: it forms from the source's
	// newest snapshot, restores each newer one, and its client Service
	// has no endpoints until spec.standby.promote. It is set when the
	// cluster is created and stays (promotion is recorded in
	// status.standby).
	// +optional
	Standby *StandbySpec `json:"standby,omitempty"`

	// SelfInit initializes the cluster with OpenBao's declarative self-init
	// requests instead of sys/init; the operator then holds no root token.
	// +optional
	SelfInit *SelfInitSpec `json:"selfInit,omitempty"`

	// RootToken decides what becomes of the root token of the operator's
	// sys/init (Secret <cluster>-root-token). Unset is policy Keep, with no
	// recovery keys.
	// +optional
	RootToken *RootTokenSpec `json:"rootToken,omitempty"`

	// Configuration holds the operator-rendered knobs of config.hcl.
	// +kubebuilder:default={}
	// +optional
	Configuration ConfigurationSpec `json:"configuration,omitempty"`

	// Config holds extra top-level config.hcl keys (for example
	// default_lease_ttl): strings, numbers, booleans, lists of those, or
	// objects for blocks such as audit. Keys the operator renders (listener,
	// storage, seal, ...) are rejected at admission; see ProtectedConfigKeys.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Config map[string]apiextensionsv1.JSON `json:"config,omitempty"`

	// Service is the client Service, which routes to every unsealed server
	// ready to serve clients: the active one, and standbys, which forward
	// requests to it (to the active server only with tls.mode ACME, and from
	// OpenBao 2.5, whose standbys answer reads from their own store).
	// +kubebuilder:default={}
	// +optional
	Service ServiceSpec `json:"service,omitempty"`

	// ServiceAccount is what the operator sets on the servers'
	// ServiceAccount (named as the cluster): annotations for a
	// cloud workload identity.
	// +optional
	ServiceAccount ServiceAccountSpec `json:"serviceAccount,omitempty"`

	// Ingress exposes the client Service through an Ingress.
	// +optional
	Ingress *IngressSpec `json:"ingress,omitempty"`

	// Gateway exposes the client Service through a Gateway API TLSRoute
	// (TLS passthrough: OpenBao terminates TLS itself).
	// +optional
	Gateway *GatewaySpec `json:"gateway,omitempty"`

	// NetworkPolicy restricts traffic to the servers.
	// +kubebuilder:default={}
	// +optional
	NetworkPolicy NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// Resources of the OpenBao container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// Affinity of the OpenBao pods. Without it the chart spreads servers
	// across nodes by preference.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Tolerations of the OpenBao pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// NodeSelector of the OpenBao pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// TopologySpreadConstraints of the OpenBao pods.
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// PriorityClassName of the OpenBao pods.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// ReadReplicas are OpenBao servers that join Raft as non-voters, behind
	// the Service <name>-read: they replicate the data without counting
	// toward quorum or autopilot's failure tolerance, and never become
	// active. They start once the cluster is initialized.
	// +optional
	ReadReplicas *ReadReplicasSpec `json:"readReplicas,omitempty"`

	// Upgrade configures how pod-template changes (version, image,
	// config.hcl, resources) are rolled out.
	// +kubebuilder:default={}
	// +optional
	Upgrade UpgradeSpec `json:"upgrade,omitempty"`

	// ImagePullSecrets are the Secrets the OpenBao pods pull their image
	// with; image verification uses them too. The author must be able to
	// read each one.
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// PodDisruptionBudget limits how many servers voluntary disruptions
	// (node drains) take at once. Without it the chart renders one with
	// maxUnavailable 1.
	// +optional
	PodDisruptionBudget *PodDisruptionBudgetSpec `json:"podDisruptionBudget,omitempty"`

	// Monitoring renders a Prometheus Operator ServiceMonitor and
	// PrometheusRule for the servers (their CRDs must be installed).
	// +optional
	Monitoring *MonitoringSpec `json:"monitoring,omitempty"`

	// Values overrides chart values that the spec does not cover (see the
	// chart's values.yaml: podAnnotations, podLabels, commonLabels,
	// terminationGracePeriodSeconds). Keys the operator derives from the spec
	// are rejected at admission, and so are imagePullSecrets,
	// podDisruptionBudget and serviceMonitor when the typed field
	// (spec.imagePullSecrets, spec.podDisruptionBudget, spec.monitoring) is
	// set too.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Values *apiextensionsv1.JSON `json:"values,omitempty"`

	// Backup takes Raft snapshots to object storage on a schedule and on
	// demand (OpenBaoBackup).
	// +optional
	Backup *BackupSpec `json:"backup,omitempty"`

	// DeletionPolicy decides what outlives the OpenBaoCluster when it is
	// deleted; the policy at the time of deletion applies to everything.
	// Retain keeps the Raft volumes, the static seal key, the root token,
	// the encrypted recovery keys and the CA, so that a cluster of the same
	// name adopts them; DeletePVCs also deletes the volumes and the CA;
	// DeleteAll also the seal key, the root token and the recovery keys.
	// The servers stop before anything goes,
	// and backups in object storage are never deleted.
	// +kubebuilder:default=Retain
	// +kubebuilder:validation:Enum=Retain;DeletePVCs;DeleteAll
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// ImageVerification checks the OpenBao image's cosign signature before
	// the StatefulSet is created or changed, and pins the verified digest.
	// Registry credentials come from spec.imagePullSecrets.
	// +optional
	ImageVerification *ImageVerificationSpec `json:"imageVerification,omitempty"`
}

// PodDisruptionBudgetSpec is the servers' PodDisruptionBudget.
type PodDisruptionBudgetSpec struct {
	// Enabled renders the PodDisruptionBudget; true when unset.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// MaxUnavailable servers during voluntary disruptions, a count or a
	// percentage (rounded up); 1 when unset. More than Raft can lose and
	// keep quorum ((replicas-1)/2) is refused.
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// MonitoringSpec is the servers' Prometheus Operator monitoring.
type MonitoringSpec struct {
	// ServiceMonitor scrapes OpenBao's metrics from a listener on port
	// 8204 that serves /v1/sys/metrics without a token. Turning it on or
	// off changes config.hcl and rolls the servers.
	// +optional
	ServiceMonitor ServiceMonitorSpec `json:"serviceMonitor,omitempty"`
	// PrometheusRule renders this cluster's alerts on the operator's
	// metrics, with the ServiceMonitor's labels; only with
	// serviceMonitor.enabled.
	// +optional
	PrometheusRule PrometheusRuleSpec `json:"prometheusRule,omitempty"`
	// Scrapers are the NetworkPolicy peers admitted to the metrics port
	// 8204; empty admits whom the API port admits.
	// +optional
	Scrapers []networkingv1.NetworkPolicyPeer `json:"scrapers,omitempty"`
}

// ServiceMonitorSpec is the servers' ServiceMonitor.
type ServiceMonitorSpec struct {
	// Enabled renders the ServiceMonitor and the metrics listener.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Interval between scrapes, a Prometheus duration; 30s when unset.
	// +kubebuilder:validation:Pattern=`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`
	// +optional
	Interval string `json:"interval,omitempty"`
	// Labels of the ServiceMonitor and the PrometheusRule, for
	// Prometheus' selectors.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// PrometheusRuleSpec is the cluster's PrometheusRule.
type PrometheusRuleSpec struct {
	// Enabled renders the PrometheusRule with the ServiceMonitor; true
	// when unset.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// BackupMaxAgeSeconds is how old the newest successful backup may get
	// before OpenBaoBackupMissing fires; 93600 (a day and a bit) when unset.
	// +kubebuilder:validation:Minimum=1
	// +optional
	BackupMaxAgeSeconds *int64 `json:"backupMaxAgeSeconds,omitempty"`
	// RunbookBaseURL is where each alert's runbook_url points
	// (<runbookBaseURL>/<AlertName>.md); the repository's docs/runbooks
	// when unset.
	// +optional
	RunbookBaseURL string `json:"runbookBaseURL,omitempty"`
}

// DeletionPolicy is what happens to a cluster's data when it is deleted.
type DeletionPolicy string

// Deletion policies.
const (
	DeletionPolicyRetain     DeletionPolicy = "Retain"
	DeletionPolicyDeletePVCs DeletionPolicy = "DeletePVCs"
	DeletionPolicyDeleteAll  DeletionPolicy = "DeleteAll"
)

// DeletesVolumes says the policy deletes the Raft volumes.
func (p DeletionPolicy) DeletesVolumes() bool {
	return p == DeletionPolicyDeletePVCs || p == DeletionPolicyDeleteAll
}

// Finalizer holds an OpenBaoCluster until the operator has carried out its
// deletion policy in order.
const Finalizer = "openbao.org/deletion-policy"

// TLSMode is who provides the servers' certificates.
type TLSMode string

// TLS modes.
const (
	TLSModeOperatorManaged TLSMode = "OperatorManaged"
	TLSModeExternal        TLSMode = "External"
	TLSModeACME            TLSMode = "ACME"
)

// TLSSpec configures TLS for clients and Raft peers.
// +kubebuilder:validation:XValidation:rule="self.mode == 'ACME' ? has(self.acme) : !has(self.acme)",message="tls.acme is required when tls.mode is ACME and not allowed otherwise"
// +kubebuilder:validation:XValidation:rule="self.mode != 'External' || !has(self.rotationPeriod)",message="tls.rotationPeriod applies only to certificates the operator issues: tls.mode OperatorManaged, or ACME's internal listener"
// +kubebuilder:validation:XValidation:rule="self.mode != 'External' || !has(self.rotateRequest)",message="tls.rotateRequest applies only to certificates the operator issues: tls.mode OperatorManaged, or ACME's internal listener; with External, renew the Secret named by tls.external.serverSecretRef"
// +kubebuilder:validation:XValidation:rule="self.mode == 'External' ? has(self.external) : !has(self.external)",message="tls.external is required when tls.mode is External and not allowed otherwise"
type TLSSpec struct {
	// Mode is OperatorManaged (the operator runs a private CA), External
	// (the Secret named by tls.external.serverSecretRef is provided, for
	// example by a cert-manager Certificate) or ACME (OpenBao obtains
	// certificates itself).
	// +kubebuilder:default=OperatorManaged
	// +kubebuilder:validation:Enum=OperatorManaged;External;ACME
	// +optional
	Mode TLSMode `json:"mode,omitempty"`

	// RotationPeriod is the validity of an operator-issued server
	// certificate (with ACME, the internal listener's); it is reissued
	// before it ends. At least 1h.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h')",message="tls.rotationPeriod must be at least 1h"
	// +optional
	RotationPeriod *metav1.Duration `json:"rotationPeriod,omitempty"`

	// RotateRequest asks the operator, once per new value, to reissue the
	// server certificate it issues now (with ACME, the internal listener's);
	// `kubectl openbao rotate-certs` writes the current time. The servers
	// reload it without a restart, as on a scheduled rotation;
	// status.tls.rotateRequest records the value handled.
	//
	// The CA is not reissued: a new CA must sit in the trust bundle that
	// clients and peers copy for the propagation delay before it signs
	// (see the rotation policy), so an immediate swap would break every
	// client holding the current bundle, and no request can shorten that
	// delay safely. A CA renewal follows its own schedule.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	RotateRequest string `json:"rotateRequest,omitempty"`

	// ExtraSANs are further DNS names or IP addresses for the server
	// certificate.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$|^[0-9a-fA-F:.]+$`
	// +listType=set
	// +optional
	ExtraSANs []string `json:"extraSANs,omitempty"`

	// External names the Secret the servers serve (mode External only).
	// +optional
	External *ExternalTLSSpec `json:"external,omitempty"`

	// ACME configures certificates from an ACME directory (mode ACME only).
	// +optional
	ACME *ACMESpec `json:"acme,omitempty"`
}

// ExternalTLSSpec is the certificate a user provides (tls.mode External).
type ExternalTLSSpec struct {
	// ServerSecretRef names a Secret of type kubernetes.io/tls in the
	// cluster's namespace holding what a cert-manager Certificate writes:
	// tls.crt (the server certificate, then its chain), tls.key and ca.crt
	// (the issuing CA, which the operator, the servers and the backup Jobs
	// trust). Its certificate must name every server and the client Service
	// (<cluster>-<ordinal>.<cluster>-internal.<namespace>.svc and
	// <cluster>.<namespace>.svc). The operator only reads it: it never
	// labels, owns or deletes it, and a renewal reaches the servers without
	// a restart. A Secret without ca.crt (cert-manager's ACME issuers leave
	// it empty) is refused: no public ACME CA issues the .svc names above.
	ServerSecretRef TLSSecretRef `json:"serverSecretRef"`
}

// TLSSecretRef names a Secret in the object's namespace whose keys are
// fixed by the field that holds it.
type TLSSecretRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ACMESpec configures OpenBao's built-in ACME client.
type ACMESpec struct {
	// Directory is the ACME directory URL.
	// +kubebuilder:validation:Pattern=`^https://`
	// +kubebuilder:validation:MaxLength=2048
	Directory string `json:"directory"`
	// Domains are the names to obtain a certificate for.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`
	// +listType=set
	Domains []string `json:"domains"`
	// Email is the ACME account contact.
	// +kubebuilder:validation:Pattern=`^[^@\s"\\]+@[^@\s"\\]+$`
	// +optional
	Email string `json:"email,omitempty"`
	// CASecretRef names a Secret with the PEM CA that verifies a private
	// directory's HTTPS certificate (key "ca.crt" unless set), such as
	// step-ca or Pebble; without it the image's system roots apply.
	// +optional
	CASecretRef *SecretKeyRef `json:"caSecretRef,omitempty"`
}

// StorageSpec is the Raft data volume.
type StorageSpec struct {
	// Size of each server's data volume.
	// +kubebuilder:default="10Gi"
	// +optional
	Size resource.Quantity `json:"size,omitempty"`
	// StorageClassName of the data volumes; empty uses the default class.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// UnsealType is the seal OpenBao uses.
type UnsealType string

// Unseal types.
const (
	UnsealStatic        UnsealType = "static"
	UnsealAWSKMS        UnsealType = "awskms"
	UnsealGCPCKMS       UnsealType = "gcpckms"
	UnsealAzureKeyVault UnsealType = "azurekeyvault"
	UnsealTransit       UnsealType = "transit"
)

// UnsealSpec chooses the seal.
// +kubebuilder:validation:XValidation:rule="self.type != 'static' || (!has(self.options) && !has(self.credentialsSecretRef))",message="unseal.options and unseal.credentialsSecretRef apply only to external KMS seals, not to static"
// +kubebuilder:validation:XValidation:rule="!has(self.options) || !self.options.exists(k, k in ['access_key', 'secret_key', 'session_token', 'client_secret', 'token', 'credentials'])",messageExpression="'unseal.options.' + self.options.filter(k, k in ['access_key', 'secret_key', 'session_token', 'client_secret', 'token', 'credentials'])[0] + ' is a credential: put it in the Secret named by unseal.credentialsSecretRef'"
type UnsealSpec struct {
	// Type is static (a 32-byte key the operator generates and keeps in the
	// Secret <cluster>-unseal-key) or an external KMS: awskms, gcpckms,
	// azurekeyvault, transit. OpenBao's own name for the seal, as written
	// in config.hcl (seal "<type>"), so lower case.
	// +kubebuilder:default=static
	// +kubebuilder:validation:Enum=static;awskms;gcpckms;azurekeyvault;transit
	// +optional
	Type UnsealType `json:"type,omitempty"`
	// Options are the attributes of OpenBao's seal stanza for the KMS type,
	// for example region and kms_key_id for awskms. No credentials here.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z][a-z0-9_]*$'))",message="unseal.options keys are seal stanza attributes: lower-case letters, digits and underscores"
	// +optional
	Options map[string]string `json:"options,omitempty"`
	// CredentialsSecretRef names a Secret mounted at /etc/bao/seal-creds for
	// the KMS client. The variables the client reads come from its keys of
	// the same names, and no other key: AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN (awskms); AZURE_TENANT_ID,
	// AZURE_CLIENT_ID, AZURE_CLIENT_SECRET (azurekeyvault); BAO_TOKEN
	// (transit). For gcpckms its key credentials.json is the key file
	// (GOOGLE_APPLICATION_CREDENTIALS), the same key as the GCS backup
	// target's. Without it, the pod's cloud identity
	// applies.
	// +optional
	CredentialsSecretRef *corev1.LocalObjectReference `json:"credentialsSecretRef,omitempty"`
}

// SelfInitSpec is OpenBao's declarative self-initialization.
type SelfInitSpec struct {
	// Enabled initializes through the requests below instead of sys/init.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Requests run once, in order, when the first server initializes.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	Requests []SelfInitRequest `json:"requests,omitempty"`
}

// SelfInitRequest is one API request run at self-initialization.
type SelfInitRequest struct {
	// Name identifies the request.
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_-]*$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Operation is the request's operation: OpenBao's own name for it, as
	// written in config.hcl (initialize request operation), so lower case.
	// +kubebuilder:validation:Enum=create;read;update;patch;delete;list
	Operation string `json:"operation"`
	// Path is the API path, without /v1/, for example sys/auth/kubernetes.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.+-]+)*$`
	// +kubebuilder:validation:MaxLength=512
	Path string `json:"path"`
	// Data is the request body. A value that is an object with eval_source
	// and eval_type is read by OpenBao as a reference (for example to an
	// environment variable), which keeps secrets out of the resource.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Data *apiextensionsv1.JSON `json:"data,omitempty"`
	// AllowFailure lets initialization go on when this request fails.
	// +optional
	AllowFailure bool `json:"allowFailure,omitempty"`
}

// ConfigurationSpec holds the config.hcl knobs the operator renders.
type ConfigurationSpec struct {
	// Raft tunes the integrated storage.
	// +kubebuilder:default={}
	// +optional
	Raft RaftConfiguration `json:"raft,omitempty"`
	// Listener tunes the TCP listener.
	// +kubebuilder:default={}
	// +optional
	Listener ListenerConfiguration `json:"listener,omitempty"`
	// Logging sets the server log level and format.
	// +kubebuilder:default={}
	// +optional
	Logging LoggingConfiguration `json:"logging,omitempty"`
}

// RaftConfiguration tunes Raft timers. Defaults are production-sound.
type RaftConfiguration struct {
	// PerformanceMultiplier scales Raft timers; 1 is fastest, higher values
	// tolerate slower networks. OpenBao's own default is 5.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +optional
	PerformanceMultiplier *int32 `json:"performanceMultiplier,omitempty"`
	// AutopilotReconcileInterval is how often autopilot acts on server
	// health (promotion, cleanup). OpenBao's default is 10s.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('10m')",message="configuration.raft.autopilotReconcileInterval must be between 1s and 10m"
	// +optional
	AutopilotReconcileInterval *metav1.Duration `json:"autopilotReconcileInterval,omitempty"`
	// AutopilotUpdateInterval is how often autopilot gathers server state.
	// OpenBao's default is 2s.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('10m')",message="configuration.raft.autopilotUpdateInterval must be between 1s and 10m"
	// +optional
	AutopilotUpdateInterval *metav1.Duration `json:"autopilotUpdateInterval,omitempty"`
	// Autopilot overrides the autopilot settings the operator applies once
	// the cluster is initialized (through the API, or with self-init as a
	// self-init request).
	// +optional
	Autopilot *AutopilotConfiguration `json:"autopilot,omitempty"`
}

// AutopilotConfiguration overrides OpenBao's Raft autopilot. Unset fields
// take the operator's defaults: cleanupDeadServers true,
// deadServerLastContactThreshold 5m, minQuorum max(3, replicas/2+1), and a
// serverStabilizationTime of 1s while the cluster forms, 10s after.
// +kubebuilder:validation:XValidation:rule="!has(self.minQuorum) || self.minQuorum >= 3 || (has(self.cleanupDeadServers) && !self.cleanupDeadServers)",message="configuration.raft.autopilot.minQuorum must be at least 3 while cleanupDeadServers is true: OpenBao refuses a smaller quorum with dead-server cleanup"
type AutopilotConfiguration struct {
	// CleanupDeadServers removes servers that stopped answering from the
	// Raft configuration.
	// +optional
	CleanupDeadServers *bool `json:"cleanupDeadServers,omitempty"`
	// DeadServerLastContactThreshold is how long a server may be silent
	// before cleanup removes it; at least 1m.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="configuration.raft.autopilot.deadServerLastContactThreshold must be at least 1m"
	// +optional
	DeadServerLastContactThreshold *metav1.Duration `json:"deadServerLastContactThreshold,omitempty"`
	// MinQuorum is the fewest voters cleanup leaves.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=11
	// +optional
	MinQuorum *int32 `json:"minQuorum,omitempty"`
	// ServerStabilizationTime is how long a new server must be healthy
	// before it becomes a voter; whole seconds, at least 1s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+h)?([0-9]+m)?([0-9]+s)?$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="configuration.raft.autopilot.serverStabilizationTime must be at least 1s"
	// +optional
	ServerStabilizationTime *metav1.Duration `json:"serverStabilizationTime,omitempty"`
}

// ListenerConfiguration tunes the TCP listener.
type ListenerConfiguration struct {
	// TLSMinVersion is the lowest TLS version accepted: OpenBao's own name
	// for it, as written in config.hcl (listener tls_min_version).
	// +kubebuilder:default=tls12
	// +kubebuilder:validation:Enum=tls12;tls13
	// +optional
	TLSMinVersion string `json:"tlsMinVersion,omitempty"`
	// UnauthenticatedMetricsAccess lets Prometheus scrape
	// /v1/sys/metrics without a token.
	// +optional
	UnauthenticatedMetricsAccess bool `json:"unauthenticatedMetricsAccess,omitempty"`
}

// LoggingConfiguration sets OpenBao's log output.
type LoggingConfiguration struct {
	// Level of the server log: OpenBao's own name for it, as written in
	// config.hcl (log_level).
	// +kubebuilder:default=info
	// +kubebuilder:validation:Enum=trace;debug;info;warn;error
	// +optional
	Level string `json:"level,omitempty"`
	// Format of the server log: OpenBao's own name for it, as written in
	// config.hcl (log_format).
	// +kubebuilder:default=standard
	// +kubebuilder:validation:Enum=standard;json
	// +optional
	Format string `json:"format,omitempty"`
}

// ServiceSpec is the client Service.
type ServiceSpec struct {
	// Type of the client Service.
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`
	// Annotations of the client Service.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ServiceAccountSpec is what the operator sets on a ServiceAccount it
// creates for a cluster's pods.
type ServiceAccountSpec struct {
	// Annotations of the ServiceAccount, for a cloud workload identity: the
	// keys eks.amazonaws.com/role-arn (IRSA), iam.gke.io/gcp-service-account
	// (GKE Workload Identity) and azure.workload.identity/client-id (Azure
	// Workload Identity, which also labels the pods
	// azure.workload.identity/use=true) and their companions are always
	// allowed: the cloud's trust policy, which names this namespace and
	// ServiceAccount, decides what they grant. Any other key must start
	// with a prefix of the platform's --allowed-annotation-prefixes, or
	// the author must be allowed to create ServiceAccounts in the namespace.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// IngressSpec exposes the client Service through an Ingress. The backend
// speaks TLS: set the controller's annotation for an HTTPS backend (for
// ingress-nginx, nginx.ingress.kubernetes.io/backend-protocol: HTTPS).
type IngressSpec struct {
	// Enabled renders the Ingress.
	Enabled bool `json:"enabled"`
	// ClassName is the IngressClass.
	// +optional
	ClassName *string `json:"className,omitempty"`
	// Host is the external host name.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host"`
	// TLSSecretName holds the certificate the Ingress serves for Host.
	// +optional
	TLSSecretName string `json:"tlsSecretName,omitempty"`
	// Annotations of the Ingress.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// GatewaySpec attaches a TLSRoute to existing Gateways.
type GatewaySpec struct {
	// Enabled renders the TLSRoute.
	Enabled bool `json:"enabled"`
	// ParentRefs are the Gateway listeners (TLS passthrough) to attach to.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	ParentRefs []GatewayParentRef `json:"parentRefs"`
	// Hostnames the route matches (SNI).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`
	Hostnames []string `json:"hostnames"`
}

// GatewayParentRef names a Gateway listener.
type GatewayParentRef struct {
	// Name of the Gateway.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of the Gateway; empty means the cluster's namespace.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// SectionName is the Gateway listener's name.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	SectionName string `json:"sectionName,omitempty"`
}

// NetworkPolicySpec restricts traffic to the servers. The cluster port (8201)
// is open only between the cluster's own servers; the API port (8200) to the
// peers listed, the operator and the servers, or to everyone when none are.
type NetworkPolicySpec struct {
	// Enabled renders the NetworkPolicy.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// APIClients may reach the API port. Empty allows every source.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	APIClients []NetworkPolicyPeer `json:"apiClients,omitempty"`
}

// NetworkPolicyPeer selects clients by namespace and pod labels.
type NetworkPolicyPeer struct {
	// NamespaceSelector selects namespaces; empty with podSelector set means
	// the cluster's namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// PodSelector selects pods.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
}

// MaxReadReplicas is the largest spec.readReplicas.replicas the API accepts
// (its +kubebuilder:validation:Maximum).
const MaxReadReplicas = 10

// StandbyReadsVersion is the first OpenBao release whose standbys serve
// reads themselves ("horizontal read scalability"); before it a standby
// forwards every request to the active server.
const StandbyReadsVersion = "2.5.0"

// ReadReplicasSpec is the cluster's non-voting read replicas: a second
// StatefulSet <name>-read, with the voters' image, configuration, TLS and
// seal, whose servers join Raft with retry_join_as_non_voter.
type ReadReplicasSpec struct {
	// Replicas is the number of read replicas. A scale-down removes each
	// departing server from the Raft configuration before its pod goes.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	Replicas int32 `json:"replicas"`
	// StandbyReads lets the read Service also route to the voting
	// standbys, which serve reads themselves from OpenBao 2.5.0
	// (StandbyReadsVersion); earlier releases refuse it. Unset is false.
	// +optional
	StandbyReads *bool `json:"standbyReads,omitempty"`
	// Resources of the read replicas' OpenBao container; the servers'
	// spec.resources when unset.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// Affinity of the read replica pods. Without it the chart spreads them
	// across nodes by preference.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Tolerations of the read replica pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// NodeSelector of the read replica pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// TopologySpreadConstraints of the read replica pods.
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
}

// StandbyReadsOn says spec.readReplicas.standbyReads is true.
func (c *OpenBaoCluster) StandbyReadsOn() bool {
	r := c.Spec.ReadReplicas
	return r != nil && r.StandbyReads != nil && *r.StandbyReads
}
