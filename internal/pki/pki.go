// Package pki decides and issues the TLS material of an OpenBao cluster in
// OperatorManaged mode: an ECDSA P-256 root CA, a server certificate signed by
// it and the CA bundle that clients and Raft peers trust.
//
// It does no I/O and never reads the clock: the reconciler gathers what it
// observed into Observed, passes the time in, and carries out the Plan that
// Decide returns (Execute builds the new material from it). Randomness for
// serial numbers comes from an injected io.Reader; note that since Go 1.26 the
// crypto packages ignore custom readers for key generation and signatures, so
// keys are always random whatever reader is passed.
//
// # Rotation policy
//
//   - The server certificate is valid for Spec.RotationPeriod (default 90 days)
//     and is reissued once less than a third of that period remains
//     (RenewBefore), so a missed reconcile or two never lets it lapse.
//   - The CA is valid for 10 × RotationPeriod (CAValidity; 900 days by
//     default): long enough that a CA change is rare, tied to the period so
//     short test periods stay short.
//   - CA renewal starts when less than 2 × RotationPeriod of the CA remains
//     (CARenewBefore). A successor CA is generated and published in the
//     bundle next to the current one, while the current CA keeps signing.
//     After BundlePropagation (default 10 minutes: several kubelet Secret
//     sync periods) the successor is promoted and the server certificate is
//     reissued from it. The bundle keeps the previous CA until the previous
//     CA has expired; every certificate it signed expires no later than it
//     does (leaf validity is clamped to the signer's), so by then nothing
//     signed by it can still be presented.
//   - Certificates are backdated by ClockSkew (5 minutes) so peers whose clock
//     is slightly behind accept them at once.
package pki

import (
	"errors"
	"fmt"
	"time"
)

// Secret data keys. Both Secrets are of type kubernetes.io/tls, so the active
// certificate and key sit under tls.crt and tls.key and the trust bundle under
// ca.crt, as cert-manager and the kubelet expect.
const (
	CertKey = "tls.crt" // PEM certificate (the CA's own in the CA Secret)
	KeyKey  = "tls.key" // PEM PKCS#8 private key
	CAKey   = "ca.crt"  // PEM bundle: every CA that clients must trust now
	// NextCertKey and NextKeyKey hold the successor CA in the CA Secret while
	// it is being published but not yet signing (see the rotation policy).
	NextCertKey = "next.crt"
	NextKeyKey  = "next.key"
)

// CertHashAnnotation is the pod annotation that carries CertHash of the
// server certificate the pod should be serving.
const CertHashAnnotation = "openbao.org/tls-cert-hash"

// Defaults and ratios of the rotation policy described in the package comment.
const (
	DefaultRotationPeriod    = 90 * 24 * time.Hour
	DefaultBundlePropagation = 10 * time.Minute
	DefaultClusterDomain     = "cluster.local"
	ClockSkew                = 5 * time.Minute
	caValidityFactor         = 10
	caRenewFactor            = 2
	renewFraction            = 3 // reissue when less than 1/renewFraction remains
)

// Spec is what the TLS material must satisfy, taken from the cluster's spec.
type Spec struct {
	ClusterName     string
	Namespace       string
	HeadlessService string
	ClientService   string
	ClusterDomain   string // default DefaultClusterDomain
	// Replicas is the spec's replica count: the certificate covers ordinals
	// 0..Replicas-1 so scaling out up to it needs no reissue.
	Replicas int32
	// Read is the read replicas the certificate covers too; zero without.
	Read ReadReplicas
	// ExtraSANs are added as IP SANs when they parse as IPs, DNS SANs otherwise.
	ExtraSANs []string
	// RotationPeriod is the server certificate's validity (default 90 days).
	RotationPeriod time.Duration
	// BundlePropagation is how long a successor CA sits in the bundle before
	// it starts signing (default 10 minutes).
	BundlePropagation time.Duration
}

// ReadReplicas names the read replicas' StatefulSet and Services; the
// certificate covers ordinals 0..Replicas-1 under ReadHeadlessService.
type ReadReplicas struct {
	StatefulSet, HeadlessService, Service string
	Replicas                              int32
}

// Validate rejects a spec that would yield unusable certificates, or a CA
// whose successor could not be published before it expires.
func (s Spec) Validate() error {
	if s.ClusterName == "" || s.Namespace == "" || s.HeadlessService == "" {
		return errors.New("cluster name, namespace and headless service are required")
	}
	if s.Replicas < 1 {
		return fmt.Errorf("replicas %d: at least one pod must be covered", s.Replicas)
	}
	if s.CARenewBefore() <= s.Propagation() {
		return fmt.Errorf("rotation period %s is too short: a successor CA published %s before the CA expires "+
			"could not be promoted after the %s propagation delay", s.rotationPeriod(), s.CARenewBefore(), s.Propagation())
	}
	return nil
}

func (s Spec) rotationPeriod() time.Duration {
	if s.RotationPeriod <= 0 {
		return DefaultRotationPeriod
	}
	return s.RotationPeriod
}

func (s Spec) clusterDomain() string {
	if s.ClusterDomain == "" {
		return DefaultClusterDomain
	}
	return s.ClusterDomain
}

// RenewBefore is how long before its expiry the server certificate is reissued.
func (s Spec) RenewBefore() time.Duration { return s.rotationPeriod() / renewFraction }

// CAValidity is the lifetime of a new CA.
func (s Spec) CAValidity() time.Duration { return caValidityFactor * s.rotationPeriod() }

// CARenewBefore is how long before the CA's expiry its successor is created.
func (s Spec) CARenewBefore() time.Duration { return caRenewFactor * s.rotationPeriod() }

// Propagation is how long a successor CA is published before it signs.
func (s Spec) Propagation() time.Duration {
	if s.BundlePropagation <= 0 {
		return DefaultBundlePropagation
	}
	return s.BundlePropagation
}

// Observed is the TLS material as read from the two Secrets; any field may be
// empty or hold garbage, which Decide reports.
type Observed struct {
	CA     CAMaterial
	Server ServerMaterial
}

// CAMaterial is the content of the <cluster>-tls-ca Secret.
type CAMaterial struct {
	CertPEM, KeyPEM         []byte // the CA that signs now
	NextCertPEM, NextKeyPEM []byte // successor being published, if any
	BundlePEM               []byte // CAs to trust: current, successor, previous
}

// ServerMaterial is the content of the <cluster>-tls-server Secret.
type ServerMaterial struct {
	CertPEM, KeyPEM []byte
	BundlePEM       []byte // copy of the CA bundle so pods mount one Secret
}
