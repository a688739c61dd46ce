package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// RootTokenPolicy is what becomes of the root token of the operator's
// sys/init once the operator's own identity is set up.
type RootTokenPolicy string

// Root-token policies.
const (
	// RootTokenKeep keeps the root token in Secret <cluster>-root-token
	// for the cluster's life.
	RootTokenKeep RootTokenPolicy = "Keep"
	// RootTokenRevoke revokes it once the operator's identity is set up
	// and the recovery keys are stored, then deletes the Secret.
	RootTokenRevoke RootTokenPolicy = "Revoke"
)

// RootTokenSpec decides the fate of the root token.
// +kubebuilder:validation:XValidation:rule="!has(self.policy) || self.policy != 'Revoke' || has(self.recoveryKeys)",message="rootToken.recoveryKeys is required with rootToken.policy Revoke: without recovery keys no root token could ever be made again (bao operator generate-root needs them)"
type RootTokenSpec struct {
	// Policy is Keep (the root token stays in Secret <cluster>-root-token)
	// or Revoke: once the operator's own identity is set up at the current
	// revision and the recovery keys are stored, the operator revokes the
	// token (auth/token/revoke-self), proves it dead, and deletes the
	// Secret. Break glass with bao operator generate-root and the recovery
	// keys. Revoke is refused on a cluster initialized without recovery
	// keys.
	// +kubebuilder:default=Keep
	// +kubebuilder:validation:Enum=Keep;Revoke
	// +optional
	Policy RootTokenPolicy `json:"policy,omitempty"`

	// RecoveryKeys makes sys/init return recovery keys, each encrypted to
	// one of your PGP public keys; the operator stores the encrypted
	// shares in Secret <cluster>-recovery-keys and never sees a plain
	// one. Read once, at sys/init: set it when the cluster is created.
	// +optional
	RecoveryKeys *RecoveryKeysSpec `json:"recoveryKeys,omitempty"`
}

// RecoveryKeysSpec is the recovery key shares sys/init makes.
// +kubebuilder:validation:XValidation:rule="!has(self.threshold) || self.threshold <= size(self.pgpKeysConfigMapRef.keys)",message="rootToken.recoveryKeys.threshold cannot exceed the number of PGP keys (one share per key)"
type RecoveryKeysSpec struct {
	// PGPKeysConfigMapRef names the ConfigMap, in the cluster's namespace,
	// that holds the PGP public keys: one share is made per key listed, in
	// order. Each key holds one public key, ASCII-armored (gpg --export
	// --armor) or base64 of the binary key (gpg --export | base64).
	PGPKeysConfigMapRef PGPKeysConfigMapRef `json:"pgpKeysConfigMapRef"`
	// Threshold is how many shares generate-root needs; at most the
	// number of keys.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +optional
	Threshold int32 `json:"threshold,omitempty"`
}

// PGPKeysConfigMapRef names keys of a ConfigMap in the cluster's namespace.
type PGPKeysConfigMapRef struct {
	// Name of the ConfigMap.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Keys of the ConfigMap (data or binaryData), one PGP public key each.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:items:MaxLength=253
	Keys []string `json:"keys"`
}

// RootTokenStatus says where the cluster's root token is.
type RootTokenStatus struct {
	// Held says Secret <cluster>-root-token exists: someone who may read
	// it holds a root token of the cluster.
	// +optional
	Held bool `json:"held,omitempty"`
	// RevokedAt is when the operator revoked the root token it stored
	// (spec.rootToken.policy Revoke) and proved it dead.
	// +optional
	RevokedAt *metav1.Time `json:"revokedAt,omitempty"`
	// RecoveryShares and RecoveryThreshold describe the PGP-encrypted
	// recovery key shares in Secret <cluster>-recovery-keys; 0 when the
	// cluster has none.
	// +optional
	RecoveryShares int32 `json:"recoveryShares,omitempty"`
	// +optional
	RecoveryThreshold int32 `json:"recoveryThreshold,omitempty"`
}

// RootTokenPolicyOf is spec.rootToken.policy, Keep when unset.
func (c *OpenBaoCluster) RootTokenPolicyOf() RootTokenPolicy {
	if c.Spec.RootToken == nil || c.Spec.RootToken.Policy == "" {
		return RootTokenKeep
	}
	return c.Spec.RootToken.Policy
}

// RecoveryKeysOf is spec.rootToken.recoveryKeys, or nil.
func (c *OpenBaoCluster) RecoveryKeysOf() *RecoveryKeysSpec {
	if c.Spec.RootToken == nil {
		return nil
	}
	return c.Spec.RootToken.RecoveryKeys
}

// ThresholdOrDefault is the threshold, 1 when unset (a client that skips
// defaulting).
func (r *RecoveryKeysSpec) ThresholdOrDefault() int {
	if r.Threshold <= 0 {
		return 1
	}
	return int(r.Threshold)
}
