package backup

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/openbao/operator/internal/objectstore"
)

// Providers of backup targets, as spec.backup.target.provider names them.
const (
	ProviderS3    = objectstore.ProviderS3
	ProviderGCS   = objectstore.ProviderGCS
	ProviderAzure = objectstore.ProviderAzure
)

// StoreCredentials reads a provider's credentials from the keys of the
// credentials Secret; lookup returns a key's value, empty when absent.
// The executor and retention both use it, so they accept the same Secrets.
// Errors name the keys, never a value.
func StoreCredentials(provider string, lookup func(key string) (string, error)) (*objectstore.Credentials, error) {
	var firstErr error
	value := func(key string) string {
		v, err := lookup(key)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("read %s of the store credentials: %w", key, err)
		}
		return strings.TrimSpace(v)
	}
	var c objectstore.Credentials
	var missing string
	switch provider {
	case ProviderS3, "":
		c.AccessKeyID = objectstore.NewSecret(value(AccessKeyIDKey))
		c.SecretAccessKey = objectstore.NewSecret(value(SecretAccessKeyKey))
		c.SessionToken = objectstore.NewSecret(value(SessionTokenKey))
		if c.AccessKeyID.IsZero() || c.SecretAccessKey.IsZero() {
			missing = AccessKeyIDKey + " and " + SecretAccessKeyKey
		}
	case ProviderGCS:
		c.ServiceAccountJSON = objectstore.NewSecret(value(GCSCredentialsKey))
		if c.ServiceAccountJSON.IsZero() {
			missing = GCSCredentialsKey
		}
	case ProviderAzure:
		c.AccountName = value(AzureAccountNameKey)
		c.AccountKey = objectstore.NewSecret(value(AzureAccountKeyKey))
		c.SASToken = objectstore.NewSecret(value(AzureSASTokenKey))
		if c.AccountName == "" || (c.AccountKey.IsZero() && c.SASToken.IsZero()) {
			missing = AzureAccountNameKey + " and " + AzureAccountKeyKey + " or " + AzureSASTokenKey
		}
	default:
		return nil, fmt.Errorf("object store provider %q: want S3, GCS or Azure", provider)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	if missing != "" {
		return nil, fmt.Errorf("the store credentials of provider %s need %s", cmp.Or(provider, ProviderS3), missing)
	}
	return &c, nil
}
