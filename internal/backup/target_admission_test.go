package backup_test

import (
	"context"
	"strings"
	"testing"
)

// TestAdmissionOfBackupTargets: the CRD's rules on the target, as the API
// server applies them.
func TestAdmissionOfBackupTargets(t *testing.T) {
	s := loadSchema(t)
	creds := map[string]any{"name": "store-creds"}
	cases := []struct {
		target map[string]any
		want   string // a word of the error; empty: admitted
	}{
		{map[string]any{"endpoint": "https://s3.example.com", "bucket": "backups"}, ""},
		{map[string]any{"bucket": "backups"}, "endpoint is required for provider S3"},
		{map[string]any{"provider": "S3", "bucket": "backups"}, "endpoint is required for provider S3"},
		{map[string]any{"provider": "GCS", "bucket": "backups"}, ""},
		{map[string]any{"provider": "GCS", "bucket": "backups", "endpoint": "http://127.0.0.1:4443"}, ""},
		{map[string]any{"provider": "GCS", "bucket": "backups", "region": "eu"}, "region is allowed only for provider S3"},
		{map[string]any{"provider": "GCS", "bucket": "backups", "usePathStyle": true}, "usePathStyle is allowed only"},
		{map[string]any{"provider": "Azure", "bucket": "backups"}, "credentialsSecretRef is required for provider Azure"},
		{map[string]any{"provider": "Azure", "bucket": "backups", "credentialsSecretRef": creds, "usePathStyle": true}, ""},
		{map[string]any{"provider": "Swift", "bucket": "backups", "endpoint": "https://x"}, "Unsupported value"},
	}
	for _, c := range cases {
		obj := map[string]any{
			"apiVersion": "openbao.org/v1alpha1", "kind": "OpenBaoCluster",
			"metadata": map[string]any{"name": "bao", "namespace": "ns"},
			"spec":     map[string]any{"version": "2.4.0", "backup": map[string]any{"jwtAuthRole": "backup", "target": c.target}},
		}
		var msgs []string
		for _, e := range s.Admit(context.Background(), obj, nil) {
			msgs = append(msgs, e.Error())
		}
		got := strings.Join(msgs, "; ")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%v: %q, want %q", c.target, got, c.want)
		}
	}
}
