package gcsstore

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openbao/operator/internal/objectstore"
)

// serviceAccountKey is a service account's JSON key whose token_uri is
// tokenURL; it returns the key and its private key's PEM.
func serviceAccountKey(t *testing.T, tokenURL string) (string, string) {
	t.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	doc, err := json.Marshal(map[string]string{"type": "service_account", "client_email": "backup@p.iam.gserviceaccount.com",
		"private_key_id": "k1", "private_key": keyPEM, "token_uri": tokenURL})
	if err != nil {
		t.Fatal(err)
	}
	return string(doc), keyPEM
}

// keyedStore is a store of a TLS fake GCS that answers every call with
// gcsStatus, authenticated by a key whose token endpoint answers
// tokenStatus; it counts the token requests.
func keyedStore(t *testing.T, tokenStatus, gcsStatus int) (objectstore.Store, string, *atomic.Int32, *atomic.Value) {
	t.Helper()
	var tokenCalls atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokenCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(tokenStatus)
		if tokenStatus == http.StatusOK {
			fmt.Fprint(w, `{"access_token":"TOKEN-NEVER-PRINTED","token_type":"Bearer","expires_in":3600}`)
			return
		}
		fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
	}))
	t.Cleanup(tokens.Close)
	var authorization atomic.Value
	gcs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authorization.Store(r.Header.Get("Authorization"))
		http.Error(w, `{"error":{"message":"backup@p.iam.gserviceaccount.com does not have storage.objects.get access"}}`, gcsStatus)
	}))
	t.Cleanup(gcs.Close)
	key, keyPEM := serviceAccountKey(t, tokens.URL)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: gcs.Certificate().Raw})
	s, err := New(context.Background(), objectstore.Config{Endpoint: gcs.URL, Bucket: "b", CAPEM: caPEM,
		Credentials: &objectstore.Credentials{ServiceAccountJSON: objectstore.NewSecret(key)}})
	if err != nil {
		t.Fatal(err)
	}
	return s, keyPEM, &tokenCalls, &authorization
}

// TestAKeyIsExchangedForATokenNeverQuoted: the key signs a JWT for the
// token endpoint, the token is sent as a bearer, and a refusal quotes
// neither.
func TestAKeyIsExchangedForATokenNeverQuoted(t *testing.T) {
	s, keyPEM, _, authorization := keyedStore(t, http.StatusOK, http.StatusForbidden)
	_, err := s.Stat(context.Background(), "k")
	if got, _ := authorization.Load().(string); got != "Bearer TOKEN-NEVER-PRINTED" {
		t.Errorf("Authorization %q", got)
	}
	if !objectstore.IsPermanent(err) || strings.Contains(err.Error(), "TOKEN-NEVER-PRINTED") || strings.Contains(err.Error(), keyPEM[40:80]) {
		t.Errorf("%v: want a permanent error without the token or the key", err)
	}
}

// TestARefusedKeyIsPermanentAndNotRetried: a key the token endpoint
// refuses (revoked) cannot pass by trying again.
func TestARefusedKeyIsPermanentAndNotRetried(t *testing.T) {
	s, keyPEM, tokenCalls, _ := keyedStore(t, http.StatusBadRequest, http.StatusOK)
	_, err := s.Stat(context.Background(), "k")
	if !objectstore.IsPermanent(err) || tokenCalls.Load() != 1 || strings.Contains(err.Error(), keyPEM[40:80]) {
		t.Errorf("%v after %d token requests: want one, and a permanent error without the key", err, tokenCalls.Load())
	}
}
