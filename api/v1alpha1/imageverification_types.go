package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ImageVerificationSpec asks the operator to check the OpenBao image's
// cosign signature before it creates or changes the StatefulSet, and to
// pin the verified digest in the pod template.
//
// The public key is inline PEM rather than a Secret reference: a public key
// is not secret, inline it is reviewed and versioned with the cluster, and a
// change to it changes the spec's generation, which re-runs verification;
// a Secret reference would need read access to, and a watch on, a Secret
// the operator does not own.
// +kubebuilder:validation:XValidation:rule="!(has(self.publicKey) && has(self.keyless))",message="publicKey and keyless are exclusive: verify with a key or with a keyless identity, not both"
// +kubebuilder:validation:XValidation:rule="!self.enabled || has(self.publicKey) || has(self.keyless)",message="imageVerification.enabled needs publicKey or keyless"
type ImageVerificationSpec struct {
	// Enabled turns verification on.
	Enabled bool `json:"enabled"`

	// PublicKey is the cosign public key, PEM ("-----BEGIN PUBLIC KEY-----").
	// Signatures are checked offline: no transparency log or certificate
	// timestamp is required.
	// +kubebuilder:validation:MaxLength=16384
	// +kubebuilder:validation:XValidation:rule="self.contains('-----BEGIN PUBLIC KEY-----')",message="publicKey must be a PEM public key (-----BEGIN PUBLIC KEY-----)"
	// +optional
	PublicKey string `json:"publicKey,omitempty"`

	// Keyless names the signer's identity in a Fulcio certificate, and the
	// Sigstore trusted root that certificate, its SCT and the signature's
	// transparency-log entry are checked against, offline.
	// +optional
	Keyless *KeylessIdentity `json:"keyless,omitempty"`

	// FailurePolicy says what a failed verification does. Block (default)
	// marks the cluster Degraded (ImageVerificationFailed) and changes
	// nothing of the StatefulSet, so running pods stay as they are; Warn
	// emits a Warning event and applies the image by its tag, unpinned.
	// +kubebuilder:default=Block
	// +kubebuilder:validation:Enum=Block;Warn
	// +optional
	FailurePolicy ImageVerificationFailurePolicy `json:"failurePolicy,omitempty"`
}

// KeylessIdentity is the OIDC issuer and subject of a keyless signature.
// +kubebuilder:validation:XValidation:rule="has(self.subject) != has(self.subjectRegExp)",message="set exactly one of subject and subjectRegExp"
type KeylessIdentity struct {
	// Issuer is the OIDC issuer URL of the signer's certificate.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Issuer string `json:"issuer"`
	// Subject is the exact subject (an e-mail or a workflow URI).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Subject string `json:"subject,omitempty"`
	// SubjectRegExp matches the subject (Go regular expression).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	SubjectRegExp string `json:"subjectRegExp,omitempty"`
	// TrustedRootConfigMapRef names the ConfigMap, in the cluster's
	// namespace, holding the Sigstore TrustedRoot JSON (what `cosign
	// trusted-root create` writes, or trusted_root.json from Sigstore's
	// TUF repository). The operator has no network to fetch it by TUF:
	// replacing it, when Sigstore rotates a key, is the user's to do.
	// Nothing watches it: it is read on each reconcile, and a changed root
	// verifies the image again at the next one.
	TrustedRootConfigMapRef TrustedRootConfigMapRef `json:"trustedRootConfigMapRef"`
}

// TrustedRootConfigMapRef names one key of a ConfigMap in the cluster's
// namespace.
type TrustedRootConfigMapRef struct {
	// Name of the ConfigMap.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key in the ConfigMap (data or binaryData).
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:default=trusted_root.json
	// +optional
	Key string `json:"key,omitempty"`
}

// DefaultTrustedRootKey is the ConfigMap key the trusted root is read
// from when none is named: the file name Sigstore's TUF repository uses.
const DefaultTrustedRootKey = "trusted_root.json"

// KeyOrDefault is the key to read; the API server defaults it, clients
// that skip defaulting (a fake client) do not.
func (r TrustedRootConfigMapRef) KeyOrDefault() string {
	if r.Key == "" {
		return DefaultTrustedRootKey
	}
	return r.Key
}

// ImageVerificationFailurePolicy is what a failed verification does.
type ImageVerificationFailurePolicy string

// Failure policies.
const (
	ImageVerificationBlock ImageVerificationFailurePolicy = "Block"
	ImageVerificationWarn  ImageVerificationFailurePolicy = "Warn"
)

// Verifies says verification is on.
func (s *ImageVerificationSpec) Verifies() bool { return s != nil && s.Enabled }

// Warns says a failure only warns; Block is the default.
func (s *ImageVerificationSpec) Warns() bool { return s.FailurePolicy == ImageVerificationWarn }

// ImageVerificationStatus is the last image the operator verified.
type ImageVerificationStatus struct {
	// Image is the spec's image, repository:tag; the reference verified is
	// the one the servers pull (through the operator-wide registry mirror,
	// when one is set).
	Image string `json:"image"`
	// Digest is the manifest digest the tag resolved to and whose signature
	// checked out; the pod template names the image by it.
	Digest string `json:"digest"`
	// Policy identifies the key or identity it was verified against (a hash).
	Policy string `json:"policy"`
	// Format is the signature found: bundle (OCI referrers) or signature
	// (the classic .sig tag).
	Format string `json:"format"`
	// VerifiedAt is when the signature was last checked.
	VerifiedAt metav1.Time `json:"verifiedAt"`
}
