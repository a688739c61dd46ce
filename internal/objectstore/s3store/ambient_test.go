package s3store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openbao/operator/internal/objectstore"
)

// ambientEnv gives the process every kind of ambient AWS identity minio-go
// reads: static keys in the environment, a web identity token file, and a
// container credentials endpoint (loopback, as ECS and EKS Pod Identity
// use) that hands out AMBIENT-AKID. It returns how often that endpoint
// was asked.
func ambientEnv(t *testing.T) *atomic.Int32 {
	t.Helper()
	var calls atomic.Int32
	creds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"AccessKeyId":"AMBIENT-AKID","SecretAccessKey":"AMBIENT-SECRET","Token":"AMBIENT-TOKEN","Expiration":%q}`,
			time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}))
	t.Cleanup(creds.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "ENV-AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "ENV-SECRET")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", creds.URL+"/creds")
	return &calls
}

// fakeS3 answers every call with an empty listing and records the
// Authorization header.
func fakeS3(t *testing.T) (string, *atomic.Value) {
	t.Helper()
	var authorization atomic.Value
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authorization.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>bkt</Name><IsTruncated>false</IsTruncated></ListBucketResult>`)
	}))
	t.Cleanup(s3.Close)
	return s3.URL, &authorization
}

// TestWithoutCredentialsAndWithoutTheSwitchNothingAmbientIsUsed: a store
// with no credentials of its own, opened by a process that may not use its
// own identity (the operator), refuses to open, naming the missing
// credentialsSecretRef, and asks no credentials endpoint; the keys in the
// environment are not used either.
func TestWithoutCredentialsAndWithoutTheSwitchNothingAmbientIsUsed(t *testing.T) {
	calls := ambientEnv(t)
	endpoint, authorization := fakeS3(t)
	s, err := FromConfig(objectstore.Config{Provider: objectstore.ProviderS3, Endpoint: endpoint, Bucket: "bkt", PathStyle: true})
	if err == nil {
		_, listErr := s.List(context.Background(), "p/")
		got, _ := authorization.Load().(string)
		t.Fatalf("opened a store with no credentials (list: %v, Authorization %q)", listErr, got)
	}
	if !errors.Is(err, objectstore.ErrNoCredentials) || !strings.Contains(err.Error(), "credentialsSecretRef") {
		t.Errorf("%v: want ErrNoCredentials naming credentialsSecretRef", err)
	}
	if calls.Load() != 0 {
		t.Errorf("the credentials endpoint was asked %d times", calls.Load())
	}
}

// TestTheSwitchIsWhatLetsTheAmbientIdentityIn: the same store with
// AmbientIdentity set (the executor, in the cluster's Job) signs with the
// pod's identity; static credentials, when given, win over it.
func TestTheSwitchIsWhatLetsTheAmbientIdentityIn(t *testing.T) {
	calls := ambientEnv(t)
	endpoint, authorization := fakeS3(t)
	s, err := FromConfig(objectstore.Config{Endpoint: endpoint, Bucket: "bkt", PathStyle: true, Region: "us-east-1", AmbientIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(context.Background(), "p/"); err != nil {
		t.Fatal(err)
	}
	if got, _ := authorization.Load().(string); !strings.Contains(got, "Credential=AMBIENT-AKID/") || calls.Load() == 0 {
		t.Errorf("Authorization %q after %d credential requests: want the ambient identity's", got, calls.Load())
	}
	static, err := FromConfig(objectstore.Config{Endpoint: endpoint, Bucket: "bkt", PathStyle: true, Region: "us-east-1", AmbientIdentity: true,
		Credentials: &objectstore.Credentials{AccessKeyID: NewSecret("STATIC-AKID"), SecretAccessKey: NewSecret("STATIC-SECRET")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := static.List(context.Background(), "p/"); err != nil {
		t.Fatal(err)
	}
	if got, _ := authorization.Load().(string); !strings.Contains(got, "Credential=STATIC-AKID/") {
		t.Errorf("Authorization %q: want the static key's", got)
	}
}
