package crdschema_test

import (
	"context"
	"strings"
	"testing"
)

const store = `target: {endpoint: "https://s3.example.com", bucket: backups}`

// TestABackupNamesAtMostOneIdentity: backup.jwtAuthRole defaults to the
// operator's role "backup", as upgrade.jwtAuthRole defaults to "upgrade":
// both set is refused, neither is accepted.
func TestABackupNamesAtMostOneIdentity(t *testing.T) {
	for _, tc := range []struct {
		name, spec, refusal string
	}{
		{"a backup with neither role nor token is accepted", "backup: {" + store + "}", ""},
		{"a backup with a role is accepted", "backup: {jwtAuthRole: mine, " + store + "}", ""},
		{"a backup with a token is accepted", "backup: {tokenSecretRef: {name: t, key: bao-token}, " + store + "}", ""},
		{"a backup with both is refused", "backup: {jwtAuthRole: backup, tokenSecretRef: {name: t}, " + store + "}",
			"set backup.jwtAuthRole or backup.tokenSecretRef, not both"},
		{"an upgrade with both is refused", "upgrade: {jwtAuthRole: upgrade, tokenSecretRef: {name: t}}",
			"set upgrade.jwtAuthRole or upgrade.tokenSecretRef, not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := object(t, minimal+"  "+tc.spec+"\n")
			errs := load(t).Admit(context.Background(), obj, nil)
			switch {
			case tc.refusal == "" && len(errs) > 0:
				t.Fatalf("refused: %v", errs.ToAggregate())
			case tc.refusal != "" && !hasErrorText(errs.ToAggregate(), tc.refusal):
				t.Fatalf("want a refusal %q, got %v", tc.refusal, errs)
			}
		})
	}
}

// TestEveryTokenSecretRefKeepsItsKey: every reference to one value of a
// Secret is a SecretKeyRef, so the key a user names survives admission
// instead of being pruned and replaced by a fixed key.
func TestEveryTokenSecretRefKeepsItsKey(t *testing.T) {
	obj := object(t, minimal+`  upgrade: {tokenSecretRef: {name: up, key: upgrade-token}}
  bootstrap: {fromBackup: {`+store+`, latest: true, unsealKeySecretRef: {name: k, key: seal}, tokenSecretRef: {name: t, key: root}}}
`)
	if errs := load(t).Admit(context.Background(), obj, nil); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	for path, want := range map[string]string{
		"spec.upgrade.tokenSecretRef.key":                  "upgrade-token",
		"spec.bootstrap.fromBackup.unsealKeySecretRef.key": "seal",
		"spec.bootstrap.fromBackup.tokenSecretRef.key":     "root",
	} {
		if got := get(obj, splitPath(path)...); got != want {
			t.Errorf("%s = %v after admission, want %q", path, got, want)
		}
	}
}

func hasErrorText(err error, text string) bool {
	return err != nil && strings.Contains(err.Error(), text)
}

func splitPath(path string) []string { return strings.Split(path, ".") }
