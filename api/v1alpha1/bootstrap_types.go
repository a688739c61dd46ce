package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BootstrapSpec chooses what a new cluster starts from.
type BootstrapSpec struct {
	// FromBackup forms the cluster from a Raft snapshot in object storage
	// instead of empty: the operator initializes it as usual, then restores
	// the snapshot through an OpenBaoRestore named <cluster>-from-backup
	// once the cluster runs. Used to move a cluster or to recover a lost
	// one.
	// +optional
	FromBackup *BackupBootstrap `json:"fromBackup,omitempty"`
}

// BackupBootstrap names the snapshot a new cluster starts from and the
// material it needs to open it.
// +kubebuilder:validation:XValidation:rule="has(self.key) != (has(self.latest) && self.latest)",message="set exactly one of bootstrap.fromBackup.key and bootstrap.fromBackup.latest: true"
// +kubebuilder:validation:XValidation:rule="!(has(self.keepSourceIdentity) && self.keepSourceIdentity && has(self.tokenSecretRef))",message="bootstrap.fromBackup.keepSourceIdentity and bootstrap.fromBackup.tokenSecretRef exclude each other: keep the source's identity, or bind the operator's identity to this cluster with the token"
type BackupBootstrap struct {
	// Target is the store that holds the snapshot; the restore Job reads it
	// with these credentials.
	Target BackupTarget `json:"target"`

	// SourceCluster is the name of the OpenBaoCluster, in this namespace,
	// whose snapshot this is: latest looks under its prefix
	// (<pathPrefix>/<namespace>/<sourceCluster>/), and the snapshot's
	// operator identity is bound to it. Empty is this cluster's own name
	// (recovering a lost cluster under the same name).
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=40
	// +optional
	SourceCluster string `json:"sourceCluster,omitempty"`

	// SourceNamespace is the namespace the source cluster ran in, when it
	// is not this one (a standby in another Kubernetes cluster whose
	// namespace has another name): latest looks under
	// <pathPrefix>/<sourceNamespace>/<sourceCluster>/, and the names of
	// the source's snapshots are proven as that namespace's. Nothing is
	// read from that namespace. Empty is this cluster's namespace.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	// +optional
	SourceNamespace string `json:"sourceNamespace,omitempty"`

	// Key is the object key of the snapshot (status.key of an
	// OpenBaoBackup).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(s, s == '.' || s == '..')",message="bootstrap.fromBackup.key must be a relative object key without . or .. segments"
	// +optional
	Key string `json:"key,omitempty"`
	// Latest takes the newest snapshot under the source cluster's prefix.
	// +optional
	Latest bool `json:"latest,omitempty"`

	// ExpectedSHA256 refuses a snapshot with another digest before
	// anything reaches OpenBao.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +optional
	ExpectedSHA256 string `json:"expectedSHA256,omitempty"`

	// UnsealKeySecretRef names a Secret of your own that holds the source
	// cluster's static seal key (key "key" unless set; a copy of the
	// source's <cluster>-unseal-key, which only someone who may read it
	// can make; a Secret the operator manages, named *-unseal-key,
	// *-root-token, *-tls-ca, *-tls-server or *-self-init or carrying its
	// managed-by label, is refused). The operator copies it into this cluster's
	// <cluster>-unseal-key before the first server starts, so the
	// snapshot's data can be unsealed. Required with unseal.type static;
	// an external KMS seal is its own material (the same spec.unseal as
	// the source's).
	// +optional
	UnsealKeySecretRef *SecretKeyRef `json:"unsealKeySecretRef,omitempty"`

	// TokenSecretRef names a Secret of your own (key "token" unless set)
	// with a token of the source cluster that may write
	// auth/openbao-operator (a copy of its root token works; the operator's
	// <source>-root-token itself is refused, as every operator-managed
	// Secret is). The snapshot's operator identity is bound to the source;
	// the operator uses this token once, right after the restore, to bind
	// it to this cluster. Needed when the source is another cluster (by
	// sourceCluster or sourceNamespace), unless keepSourceIdentity.
	// +optional
	TokenSecretRef *SecretKeyRef `json:"tokenSecretRef,omitempty"`

	// KeepSourceIdentity leaves the snapshot's operator identity bound to
	// the source cluster: after the restore the operator logs in to this
	// cluster with the source's ServiceAccounts and audience, which must
	// exist in this namespace; refused with a sourceNamespace other than
	// this one. For restore drills and short-lived copies.
	// +optional
	KeepSourceIdentity bool `json:"keepSourceIdentity,omitempty"`
}

// FromBackupStatus is what became of spec.bootstrap.fromBackup.
type FromBackupStatus struct {
	// Restore is the OpenBaoRestore that restores the snapshot.
	Restore string `json:"restore"`
	// InstalledAt is when OpenBao accepted the snapshot; from then on the
	// cluster holds the source's data.
	// +optional
	InstalledAt *metav1.Time `json:"installedAt,omitempty"`
	// IdentityBound says the operator's identity in the restored data was
	// bound to this cluster with spec.bootstrap.fromBackup.tokenSecretRef.
	// +optional
	IdentityBound bool `json:"identityBound,omitempty"`
	// CompletedAt is when the restore succeeded.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Key and SHA256 are the snapshot restored.
	// +optional
	Key string `json:"key,omitempty"`
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// Failed is the restore's reason when it failed; the cluster then
	// holds the empty data of its initialization.
	// +optional
	Failed string `json:"failed,omitempty"`
	// FailedMessage is the failed restore's message.
	// +optional
	FailedMessage string `json:"failedMessage,omitempty"`
}

// FromBackupRestoreName names the OpenBaoRestore of spec.bootstrap.fromBackup.
func (c *OpenBaoCluster) FromBackupRestoreName() string {
	return boundedName(c.Name+"-from-backup", maxLabelValue)
}

// FromBackup is spec.bootstrap.fromBackup, or nil.
func (c *OpenBaoCluster) FromBackup() *BackupBootstrap {
	if c.Spec.Bootstrap == nil {
		return nil
	}
	return c.Spec.Bootstrap.FromBackup
}

// SourceClusterName is the cluster a bootstrap snapshot came from.
func (b *BackupBootstrap) SourceClusterName(self string) string {
	if b.SourceCluster == "" {
		return self
	}
	return b.SourceCluster
}

// SourceNamespaceName is the namespace a bootstrap snapshot came from.
func (b *BackupBootstrap) SourceNamespaceName(self string) string {
	if b.SourceNamespace == "" {
		return self
	}
	return b.SourceNamespace
}

// IdentityOwner is the cluster whose operator identity this cluster's
// OpenBao trusts: its own, or the source's once a snapshot restored under
// keepSourceIdentity was installed. Only its name and namespace are set.
func (c *OpenBaoCluster) IdentityOwner() *OpenBaoCluster {
	b := c.FromBackup()
	if b == nil || !b.KeepSourceIdentity || c.Status.FromBackup == nil || c.Status.FromBackup.InstalledAt == nil {
		return c
	}
	return &OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: b.SourceClusterName(c.Name)}}
}
