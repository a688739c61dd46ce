package identity_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/openbao"
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
	for _, tc := range []struct{ role, account, audience, policy string }{
		{"upgrade", "bao-upgrade-serviceaccount", "openbao-operator:team/bao:upgrade", identity.UpgradePolicy},
		{"backup", "bao-backup-serviceaccount", "openbao-operator:team/bao:backup", identity.BackupPolicy},
		{"restore", "bao-restore-serviceaccount", "openbao-operator:team/bao:restore", identity.RestorePolicy},
		{"drill", "bao-drill-serviceaccount", "openbao-operator:team/bao:drill:idle", identity.DrillPolicy},
	} {
		d := roles[tc.role]
		if d["bound_subject"] != "system:serviceaccount:team:"+tc.account {
			t.Errorf("role %s bound to %v", tc.role, d["bound_subject"])
		}
		if aud, _ := d["bound_audiences"].([]any); len(aud) != 1 || aud[0] != tc.audience {
			t.Errorf("role %s audiences %v, want %s", tc.role, d["bound_audiences"], tc.audience)
		}
		if pol, _ := d["token_policies"].([]any); len(pol) != 1 || pol[0] != tc.policy {
			t.Errorf("role %s policies %v", tc.role, d["token_policies"])
		}
	}
	if len(roles) != 4 {
		t.Errorf("roles %v, want upgrade, backup, restore and drill", roles)
	}
}

// TestEachTaskLogsInWithItsOwnAccountAndAudienceFromRevision3: before,
// the restore role took the backup's account and every role the
// cluster's audience (a backup Job's token could restore); from revision
// 3 no two tasks share an account or an audience, and a role of the
// user's own keeps the documented cluster audience.
func TestEachTaskLogsInWithItsOwnAccountAndAudienceFromRevision3(t *testing.T) {
	at := func(rev int32) *v1alpha1.OpenBaoCluster {
		c := cluster()
		c.Status.IdentityConfigured, c.Status.IdentityRevision = rev > 0, rev
		return c
	}
	for _, tc := range []struct {
		name              string
		rev               int32
		purpose, role     string
		account, audience string
	}{
		{"revision 2: upgrade", 2, "upgrade", "upgrade", "bao-upgrade-serviceaccount", "openbao-operator:team/bao"},
		{"revision 2: backup", 2, "backup", "backup", "bao-backup-serviceaccount", "openbao-operator:team/bao"},
		{"revision 2: restore shares the backup's account", 2, "restore", "restore", "bao-backup-serviceaccount", "openbao-operator:team/bao"},
		{"revision 3: upgrade", 3, "upgrade", "upgrade", "bao-upgrade-serviceaccount", "openbao-operator:team/bao:upgrade"},
		{"revision 3: backup", 3, "backup", "backup", "bao-backup-serviceaccount", "openbao-operator:team/bao:backup"},
		{"revision 3: restore has its own", 3, "restore", "restore", "bao-restore-serviceaccount", "openbao-operator:team/bao:restore"},
		{"revision 3: the user's own backup role", 3, "backup", "my-backup", "bao-backup-serviceaccount", "openbao-operator:team/bao"},
		{"no identity: the user's own upgrade role", 0, "upgrade", "ops", "bao-upgrade-serviceaccount", "openbao-operator:team/bao"},
	} {
		got := identity.LoginFor(at(tc.rev), tc.purpose, tc.role)
		want := identity.Login{ServiceAccount: tc.account, Audience: tc.audience, Role: tc.role}
		if got != want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, want)
		}
	}
	seen := map[string]string{}
	for _, purpose := range []string{"upgrade", "backup", "restore"} {
		l := identity.LoginFor(at(identity.Revision), purpose, purpose)
		for _, v := range []string{l.ServiceAccount, l.Audience} {
			if other, ok := seen[v]; ok {
				t.Errorf("%s shares %s with %s", purpose, v, other)
			}
			seen[v] = purpose
		}
	}
	d := identity.DrillLogin(cluster(), "openbao/team/bao/20250101-000000-abc.tar")
	if d.ServiceAccount != "bao-drill-serviceaccount" || d.Role != "drill" ||
		!strings.HasPrefix(d.Audience, "openbao-operator:team/bao:drill:") || d.Audience == cluster().DrillIdleAudience() {
		t.Errorf("drill login %+v", d)
	}
	if other := identity.DrillLogin(cluster(), "openbao/team/bao/20250101-000001-abc.tar"); other.Audience == d.Audience {
		t.Error("two snapshots share a drill audience")
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

func TestTheCanaryMountIsKVVersion1AndTheBackupPolicyMayTouchOnlyTheCanary(t *testing.T) {
	reqs := identity.Requests(cluster(), identity.Issuer{URL: "https://i", PublicKeysPEM: []string{"k"}})
	mount := reqs[1]
	opts, _ := mount.Data["options"].(map[string]any)
	if mount.Path != "sys/mounts/openbao-operator" || mount.Data["type"] != "kv" || opts["version"] != "1" {
		t.Fatalf("second request %+v, want the canary's kv version 1 mount", mount)
	}
	var policy string
	for _, r := range reqs {
		if r.Path == "sys/policies/acl/"+identity.BackupPolicy {
			policy, _ = r.Data["policy"].(string)
		}
	}
	want := `path "sys/storage/raft/snapshot" { capabilities = ["read"] }
path "openbao-operator/canary" { capabilities = ["create", "update", "read"] }
path "auth/openbao-operator/role/drill" {
  capabilities = ["update"]
  allowed_parameters = {
    "role_type" = ["jwt"]
    "bound_audiences" = ["openbao-operator:team/bao:drill:*"]
  }
}
`
	if policy != want {
		t.Errorf("backup policy:\n%s\nwant:\n%s", policy, want)
	}
}

func TestApplyEnablesTheCanaryMountOnlyWhenMissingAndRefusesAnotherEngineThere(t *testing.T) {
	iss := identity.Issuer{URL: "https://i", PublicKeysPEM: []string{"k"}}
	jwt := map[string]string{"openbao-operator": "jwt"}
	revision1 := &openbaofake.Client{AuthMounts: jwt, SecretMounts: map[string]openbao.SecretsEngine{"secret": {Type: "kv"}}}
	if err := identity.Apply(context.Background(), revision1, cluster(), iss); err != nil || revision1.Writes[0] != "sys/mounts/openbao-operator" {
		t.Fatalf("no canary mount: %v, writes %v", err, revision1.Writes)
	}
	if !slices.Contains(revision1.Writes, "auth/openbao-operator/role/restore") {
		t.Errorf("the restore role is not among the writes %v", revision1.Writes)
	}
	for _, present := range []openbao.SecretsEngine{{Type: "kv"}, {Type: "kv", Options: map[string]string{"version": "1"}}} {
		c := &openbaofake.Client{AuthMounts: jwt, SecretMounts: map[string]openbao.SecretsEngine{"openbao-operator": present}}
		if err := identity.Apply(context.Background(), c, cluster(), iss); err != nil || slices.Contains(c.Writes, "sys/mounts/openbao-operator") {
			t.Errorf("mount %v present: %v, writes %v", present, err, c.Writes)
		}
	}
	for _, taken := range []openbao.SecretsEngine{{Type: "kv", Options: map[string]string{"version": "2"}}, {Type: "transit"}} {
		c := &openbaofake.Client{AuthMounts: jwt, SecretMounts: map[string]openbao.SecretsEngine{"openbao-operator": taken}}
		err := identity.Apply(context.Background(), c, cluster(), iss)
		if !errors.Is(err, identity.ErrCanaryMountTaken) || len(c.Writes) != 0 || !strings.Contains(err.Error(), taken.String()) {
			t.Errorf("mount %v: %v, writes %v", taken, err, c.Writes)
		}
	}
}

func TestRecordedRevisionReadsAStatusFromBeforeRevisions(t *testing.T) {
	for _, tc := range []struct {
		status v1alpha1.OpenBaoClusterStatus
		want   int32
	}{
		{v1alpha1.OpenBaoClusterStatus{}, 0},
		{v1alpha1.OpenBaoClusterStatus{IdentityConfigured: true}, 1},
		{v1alpha1.OpenBaoClusterStatus{IdentityConfigured: true, IdentityRevision: 2}, 2},
		{v1alpha1.OpenBaoClusterStatus{IdentityRevision: 2}, 2},
	} {
		if got := identity.RecordedRevision(&tc.status); got != tc.want {
			t.Errorf("%+v: revision %d, want %d", tc.status, got, tc.want)
		}
	}
}

func TestAnOutdatedIdentityIsToldWhatItLacksAndHowToAddIt(t *testing.T) {
	c := cluster()
	for rev, wants := range map[int32][]string{
		1: {"revision 1 of 3", "role restore", "openbao-operator/canary", identity.CanaryMountCommand(), "role drill",
			"bao-restore-serviceaccount", "openbao.org/identity-revision=3"},
		2: {"revision 2 of 3", "one ServiceAccount and audience per role", "role drill", "Restore drills are refused",
			"bao-drill-serviceaccount", "openbao.org/identity-revision=3"},
	} {
		msg := identity.OutdatedMessage(c, rev)
		for _, want := range wants {
			if !strings.Contains(msg, want) {
				t.Errorf("revision %d: message lacks %q: %s", rev, want, msg)
			}
		}
		if len(msg) > 1024 {
			t.Errorf("revision %d: message of %d bytes is cut in a condition", rev, len(msg))
		}
	}
	if len(identity.Missing(identity.Revision)) != 0 {
		t.Error("the current revision lacks something")
	}
	for value, want := range map[string]int32{"2": 2, "x": 0, "-1": 0, "": 0} {
		c.Annotations = map[string]string{v1alpha1.AnnotationIdentityRevision: value}
		if got := identity.AcknowledgedRevision(c); got != want {
			t.Errorf("annotation %q: %d, want %d", value, got, want)
		}
	}
}
