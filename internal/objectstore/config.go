package objectstore

import "fmt"

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
	// Credentials, when nil, come from the pod's cloud identity.
	Credentials *Credentials
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
