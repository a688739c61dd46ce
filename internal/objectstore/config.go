package objectstore

import (
	"errors"
	"fmt"
)

// ErrNoCredentials says a store has no credentials of its own and may not
// use the pod's ambient identity (Config.AmbientIdentity).
var ErrNoCredentials = errors.New("no credentials: spec.backup.target.credentialsSecretRef is not set, " +
	"and this process may not use its own cloud identity for the store")

// Providers of object stores.
const (
	ProviderS3    = "S3"
	ProviderGCS   = "GCS"
	ProviderAzure = "Azure"
)

// Config says how to reach one bucket (or Azure container) of any
// provider; each store package reads the fields it knows.
type Config struct {
	// Provider is ProviderS3 (also when empty), ProviderGCS or
	// ProviderAzure.
	Provider string
	// Endpoint is the store's URL; empty is the provider's public
	// endpoint for GCS and Azure, and an error for S3.
	Endpoint string
	Bucket   string
	// Region of an S3 bucket; empty lets the client discover it.
	Region string
	// PathStyle puts the bucket (S3) or the account (Azure) in the path.
	PathStyle bool
	// CAPEM verifies a private endpoint; empty uses the system roots.
	CAPEM []byte
	// Credentials are the store's own static credentials. When nil, a
	// store uses the pod's cloud identity only if AmbientIdentity is set,
	// and otherwise refuses to open (ErrNoCredentials).
	Credentials *Credentials
	// AmbientIdentity lets a store without Credentials use the cloud
	// identity of the pod it runs in: for S3 a web identity token (IRSA),
	// EKS Pod Identity or instance metadata; for GCS Application Default
	// Credentials (Workload Identity, the metadata server). Azure needs
	// static credentials either way.
	//
	// Only the executor sets it: it runs in the cluster's Job under the
	// cluster's own ServiceAccount, so the ambient identity is the one the
	// cluster's owner gave that account. The operator's process never sets
	// it (open.OperatorStore clears it): its identity is the operator's,
	// and a tenant's spec must not steer it to list or delete in a bucket
	// or send its token to an endpoint the tenant names.
	AmbientIdentity bool
	// PartSize is the size of each part (S3), chunk (GCS) or block
	// (Azure); memory is about PartSize × Concurrency.
	PartSize    int64
	Concurrency int
}

// Credentials are static credentials; each provider reads its own.
type Credentials struct {
	// S3.
	AccessKeyID, SecretAccessKey, SessionToken Secret
	// GCS: a service account's JSON key.
	ServiceAccountJSON Secret
	// Azure: the storage account, with a shared key or a SAS token.
	AccountName string
	AccountKey  Secret
	SASToken    Secret
}

// Secret is a credential string that prints as [redacted].
type Secret struct{ value string }

// NewSecret wraps a credential.
func NewSecret(v string) Secret { return Secret{value: v} }

// Reveal returns the value, for the client only.
func (s Secret) Reveal() string { return s.value }

// IsZero says the secret is empty.
func (s Secret) IsZero() bool { return s.value == "" }

func (s Secret) String() string               { return "[redacted]" }
func (s Secret) GoString() string             { return "[redacted]" }
func (s Secret) Format(f fmt.State, _ rune)   { _, _ = f.Write([]byte("[redacted]")) }
func (s Secret) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// WithoutAmbientIdentity is cfg for a process that may not use its own
// cloud identity (the operator's): a store opened with it uses the
// credentials cfg names or none.
func (c Config) WithoutAmbientIdentity() Config {
	c.AmbientIdentity = false
	return c
}
