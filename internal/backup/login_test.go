package backup_test

import (
	"testing"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
)

// TestHowTheBackupExecutorLogsIn: spec.backup.jwtAuthRole defaults to the
// role the operator creates, as spec.upgrade.jwtAuthRole does; the
// executor's flags and the Job's projected token agree on the role.
func TestHowTheBackupExecutorLogsIn(t *testing.T) {
	cases := []struct {
		name                        string
		role                        string
		token                       *v1alpha1.SecretKeyRef
		wantAuth, wantRole, wantAud string
		wantSA                      string
	}{
		{name: "a backup with neither role nor token logs in as backup",
			wantAuth: backup.AuthJWT, wantRole: "backup", wantAud: "openbao-operator:ns/bao:backup", wantSA: "bao-backup-serviceaccount"},
		{name: "a backup naming the role backup logs in as backup", role: "backup",
			wantAuth: backup.AuthJWT, wantRole: "backup", wantAud: "openbao-operator:ns/bao:backup", wantSA: "bao-backup-serviceaccount"},
		{name: "a backup naming a role of its own logs in as that role with the cluster's audience", role: "mine",
			wantAuth: backup.AuthJWT, wantRole: "mine", wantAud: "openbao-operator:ns/bao", wantSA: "bao-backup-serviceaccount"},
		{name: "a backup with a token logs in with no role", token: &v1alpha1.SecretKeyRef{Name: "t"},
			wantAuth: backup.AuthToken, wantSA: "bao-backup-serviceaccount"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := backupCluster(func(c *v1alpha1.OpenBaoCluster) {
				c.Spec.Backup.JWTAuthRole, c.Spec.Backup.TokenSecretRef = tc.role, tc.token
				c.Status.IdentityRevision = 3
			})
			cfg := backup.ExecutorConfigFor(c, "b")
			if cfg.Auth != tc.wantAuth || cfg.JWTRole != tc.wantRole {
				t.Errorf("executor logs in with %s as role %q, want %s as %q", cfg.Auth, cfg.JWTRole, tc.wantAuth, tc.wantRole)
			}
			pod := backup.JobFor(backup.JobInput{Cluster: c, Backup: &v1alpha1.OpenBaoBackup{}, Name: "j"}).Spec.Template.Spec
			if pod.ServiceAccountName != tc.wantSA {
				t.Errorf("ServiceAccount %s, want %s", pod.ServiceAccountName, tc.wantSA)
			}
			aud := ""
			for _, v := range pod.Volumes {
				if v.Name == "identity" && v.Projected != nil {
					aud = v.Projected.Sources[0].ServiceAccountToken.Audience
				}
			}
			if aud != tc.wantAud {
				t.Errorf("projected token audience %q, want %q", aud, tc.wantAud)
			}
		})
	}
}
