package identity_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/openbao/openbaofake"
)

func jwks(t *testing.T, keys ...jose.JSONWebKey) []byte {
	t.Helper()
	out, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const discovery = `{"issuer":"https://kubernetes.default.svc.cluster.local","jwks_uri":"https://x/openid/v1/jwks"}`

func TestIssuerFromDiscoveryKeepsEverySigningKeyAsPEM(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	encKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	iss, err := identity.IssuerFromDiscovery([]byte(discovery), jwks(t,
		jose.JSONWebKey{Key: &rsaKey.PublicKey, KeyID: "a", Use: "sig", Algorithm: "RS256"},
		jose.JSONWebKey{Key: &ecKey.PublicKey, KeyID: "b", Algorithm: "ES256"},
		jose.JSONWebKey{Key: &encKey.PublicKey, KeyID: "c", Use: "enc", Algorithm: "RSA-OAEP"},
	))
	if err != nil {
		t.Fatal(err)
	}
	if iss.URL != "https://kubernetes.default.svc.cluster.local" || len(iss.PublicKeysPEM) != 2 {
		t.Fatalf("issuer %q with %d keys, want 2 (the encryption key is not a signing key)", iss.URL, len(iss.PublicKeysPEM))
	}
	for _, k := range iss.PublicKeysPEM {
		if !strings.HasPrefix(k, "-----BEGIN PUBLIC KEY-----") {
			t.Errorf("not a PEM public key: %q", k)
		}
	}
}

func TestIssuerFromDiscoveryRefusesWhatOpenBaoCouldNotUse(t *testing.T) {
	if _, err := identity.IssuerFromDiscovery([]byte(discovery), []byte(`{"keys":[]}`)); !errors.Is(err, identity.ErrNoKeys) {
		t.Errorf("no keys: %v", err)
	}
	if _, err := identity.IssuerFromDiscovery([]byte(`{}`), []byte(`{"keys":[]}`)); err == nil {
		t.Error("a discovery document without an issuer was accepted")
	}
}

func cluster() *v1alpha1.OpenBaoCluster {
	return &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "team"}}
}

func TestRolesAreBoundToOneAccountAndOneClustersAudience(t *testing.T) {
	reqs := identity.Requests(cluster(), identity.Issuer{URL: "https://i", PublicKeysPEM: []string{"k"}})
	if reqs[0].Path != "sys/auth/openbao-operator" || reqs[0].Data["type"] != "jwt" {
		t.Fatalf("first request %+v, want the auth method enabled first", reqs[0])
	}
	roles := map[string]map[string]any{}
	for _, r := range reqs {
		if strings.HasPrefix(r.Path, "auth/openbao-operator/role/") {
			roles[strings.TrimPrefix(r.Path, "auth/openbao-operator/role/")] = r.Data
		}
	}
	for role, account := range map[string]string{"upgrade": "bao-upgrade-serviceaccount", "backup": "bao-backup-serviceaccount"} {
		d := roles[role]
		if d["bound_subject"] != "system:serviceaccount:team:"+account {
			t.Errorf("role %s bound to %v", role, d["bound_subject"])
		}
		if aud, _ := d["bound_audiences"].([]any); len(aud) != 1 || aud[0] != "openbao-operator:team/bao" {
			t.Errorf("role %s audiences %v", role, d["bound_audiences"])
		}
	}
}

func TestApplyEnablesTheMountOnlyWhenMissing(t *testing.T) {
	iss := identity.Issuer{URL: "https://i", PublicKeysPEM: []string{"k"}}
	fresh := &openbaofake.Client{}
	if err := identity.Apply(context.Background(), fresh, cluster(), iss); err != nil || fresh.Writes[0] != "sys/auth/openbao-operator" {
		t.Fatalf("fresh cluster: %v, writes %v", err, fresh.Writes)
	}
	again := &openbaofake.Client{AuthMounts: map[string]string{"openbao-operator": "jwt", "token": "token"}}
	if err := identity.Apply(context.Background(), again, cluster(), iss); err != nil || again.Writes[0] == "sys/auth/openbao-operator" {
		t.Fatalf("mount present: %v, writes %v", err, again.Writes)
	}
	taken := &openbaofake.Client{AuthMounts: map[string]string{"openbao-operator": "userpass"}}
	if err := identity.Apply(context.Background(), taken, cluster(), iss); !errors.Is(err, identity.ErrMountTaken) || len(taken.Writes) != 0 {
		t.Fatalf("mount taken: %v, writes %v", err, taken.Writes)
	}
}
