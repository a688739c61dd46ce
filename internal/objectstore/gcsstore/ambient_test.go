package gcsstore

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openbao/operator/internal/objectstore"
)

// ambientKey points GOOGLE_APPLICATION_CREDENTIALS at a service account
// key whose token endpoint hands out AMBIENT-TOKEN, as a pod with
// Application Default Credentials has; it returns how often that endpoint
// was asked.
func ambientKey(t *testing.T) *atomic.Int32 {
	t.Helper()
	var calls atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"AMBIENT-TOKEN","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(tokens.Close)
	key, _ := serviceAccountKey(t, tokens.URL)
	path := filepath.Join(t.TempDir(), "adc.json")
	if err := os.WriteFile(path, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
	return &calls
}

// tenantEndpoint is an https endpoint a tenant names, with its own CA: it
// records the Authorization header it is sent.
func tenantEndpoint(t *testing.T) (string, []byte, *atomic.Value) {
	t.Helper()
	var authorization atomic.Value
	gcs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authorization.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"items":[]}`)
	}))
	t.Cleanup(gcs.Close)
	return gcs.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: gcs.Certificate().Raw}), &authorization
}

// TestWithoutAKeyAndWithoutTheSwitchNoDefaultCredentialsAreUsed: the
// operator opening a tenant's GCS bucket with no credentialsSecretRef
// refuses, naming it, and never reads Application Default Credentials,
// whose token would otherwise go to the endpoint the tenant named.
func TestWithoutAKeyAndWithoutTheSwitchNoDefaultCredentialsAreUsed(t *testing.T) {
	calls := ambientKey(t)
	endpoint, caPEM, authorization := tenantEndpoint(t)
	s, err := New(context.Background(), objectstore.Config{Provider: objectstore.ProviderGCS, Endpoint: endpoint, Bucket: "b", CAPEM: caPEM})
	if err == nil {
		_, listErr := s.List(context.Background(), "p/")
		got, _ := authorization.Load().(string)
		t.Fatalf("opened a store with no key (list: %v, the endpoint was sent Authorization %q)", listErr, got)
	}
	if !errors.Is(err, objectstore.ErrNoCredentials) || !strings.Contains(err.Error(), "credentialsSecretRef") {
		t.Errorf("%v: want ErrNoCredentials naming credentialsSecretRef", err)
	}
	if calls.Load() != 0 {
		t.Errorf("the token endpoint of the default credentials was asked %d times", calls.Load())
	}
}

// TestTheSwitchIsWhatLetsTheDefaultCredentialsIn: with AmbientIdentity
// set (the executor, in the cluster's Job) the default credentials are
// used; over plain HTTP (an emulator) no credentials are needed or sent.
func TestTheSwitchIsWhatLetsTheDefaultCredentialsIn(t *testing.T) {
	calls := ambientKey(t)
	endpoint, caPEM, authorization := tenantEndpoint(t)
	s, err := New(context.Background(), objectstore.Config{Endpoint: endpoint, Bucket: "b", CAPEM: caPEM, AmbientIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(context.Background(), "p/"); err != nil {
		t.Fatal(err)
	}
	if got, _ := authorization.Load().(string); got != "Bearer AMBIENT-TOKEN" || calls.Load() != 1 {
		t.Errorf("Authorization %q after %d token requests: want the default credentials'", got, calls.Load())
	}
	emulator := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authorization.Store(r.Header.Get("Authorization"))
		fmt.Fprint(w, `{"items":[]}`)
	}))
	t.Cleanup(emulator.Close)
	for _, ambient := range []bool{false, true} {
		s, err := New(context.Background(), objectstore.Config{Endpoint: emulator.URL, Bucket: "b", AmbientIdentity: ambient})
		if err != nil {
			t.Fatalf("an emulator (ambient %v): %v", ambient, err)
		}
		if _, err := s.List(context.Background(), "p/"); err != nil {
			t.Fatal(err)
		}
		if got, _ := authorization.Load().(string); got != "" {
			t.Errorf("an emulator over HTTP was sent Authorization %q", got)
		}
	}
}
