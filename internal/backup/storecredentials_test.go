package backup_test

import (
	"strings"
	"testing"

	"github.com/openbao/operator/internal/backup"
)

func TestStoreCredentialsReadEachProvidersKeys(t *testing.T) {
	secret := map[string]string{
		backup.AccessKeyIDKey: "AKID\n", backup.SecretAccessKeyKey: " S3-SECRET\n",
		backup.GCSCredentialsKey:   `{"type":"service_account"}`,
		backup.AzureAccountNameKey: "acct", backup.AzureSASTokenKey: "sv=x&sig=SAS-SECRET",
	}
	lookup := func(k string) (string, error) { return secret[k], nil }
	s3, err := backup.StoreCredentials("", lookup)
	if err != nil || s3.AccessKeyID.Reveal() != "AKID" || s3.SecretAccessKey.Reveal() != "S3-SECRET" {
		t.Fatalf("S3: %+v %v", s3, err)
	}
	gcs, err := backup.StoreCredentials(backup.ProviderGCS, lookup)
	if err != nil || gcs.ServiceAccountJSON.Reveal() != secret[backup.GCSCredentialsKey] {
		t.Fatalf("GCS: %v", err)
	}
	az, err := backup.StoreCredentials(backup.ProviderAzure, lookup)
	if err != nil || az.AccountName != "acct" || az.SASToken.Reveal() != "sv=x&sig=SAS-SECRET" || !az.AccountKey.IsZero() {
		t.Fatalf("Azure: %v", err)
	}
}

func TestStoreCredentialsNameTheMissingKeysNeverAValue(t *testing.T) {
	for provider, secret := range map[string]map[string]string{
		backup.ProviderS3:    {backup.AccessKeyIDKey: "AKID-VALUE"},
		backup.ProviderGCS:   {backup.AzureAccountKeyKey: "KEY-VALUE"},
		backup.ProviderAzure: {backup.AzureAccountKeyKey: "KEY-VALUE"},
	} {
		_, err := backup.StoreCredentials(provider, func(k string) (string, error) { return secret[k], nil })
		if err == nil || strings.Contains(err.Error(), "VALUE") {
			t.Errorf("%s: %v, want an error naming keys only", provider, err)
		}
	}
	if _, err := backup.StoreCredentials("Swift", func(string) (string, error) { return "", nil }); err == nil {
		t.Error("an unknown provider was accepted")
	}
}
