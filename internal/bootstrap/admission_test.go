package bootstrap_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openbao/operator/config/crd"
	"github.com/openbao/operator/internal/crdschema"
)

// The CRD's rules for spec.rootToken, as the API server runs them.
func TestRootTokenAdmission(t *testing.T) {
	s, err := crdschema.Load(crd.OpenBaoClusters, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]any{"pgpKeysConfigMapRef": map[string]any{"name": "pgp", "keys": []any{"a.asc", "b.asc"}}}
	selfInit := map[string]any{"enabled": true, "requests": []any{map[string]any{"name": "x", "operation": "read", "path": "sys/health"}}}
	fromBackup := map[string]any{"fromBackup": map[string]any{"latest": true, "target": map[string]any{"endpoint": "https://s3", "bucket": "b"}}}
	for title, tc := range map[string]struct {
		rootToken map[string]any
		extra     map[string]any
		wantErr   string
	}{
		"Keep":                           {map[string]any{"policy": "Keep"}, nil, ""},
		"Revoke with recovery keys":      {map[string]any{"policy": "Revoke", "recoveryKeys": keys}, nil, ""},
		"Revoke without recovery keys":   {map[string]any{"policy": "Revoke"}, nil, "rootToken.recoveryKeys is required"},
		"a threshold above the keys":     {map[string]any{"recoveryKeys": map[string]any{"pgpKeysConfigMapRef": keys["pgpKeysConfigMapRef"], "threshold": 3}}, nil, "cannot exceed"},
		"recovery keys with self-init":   {map[string]any{"recoveryKeys": keys}, map[string]any{"selfInit": selfInit}, "with selfInit enabled"},
		"recovery keys from a backup":    {map[string]any{"recoveryKeys": keys}, map[string]any{"bootstrap": fromBackup}, "bootstrap.fromBackup"},
		"another policy":                 {map[string]any{"policy": "Forget"}, nil, "Unsupported value"},
		"a ConfigMap key that is no key": {map[string]any{"recoveryKeys": map[string]any{"pgpKeysConfigMapRef": map[string]any{"name": "pgp", "keys": []any{"a/b"}}}}, nil, "keys[0]"},
	} {
		t.Run(title, func(t *testing.T) {
			spec := map[string]any{"version": "2.4.0", "rootToken": tc.rootToken}
			for k, v := range tc.extra {
				spec[k] = v
			}
			obj := map[string]any{"apiVersion": "openbao.org/v1alpha1", "kind": "OpenBaoCluster",
				"metadata": map[string]any{"name": "bao", "namespace": "ns"}, "spec": spec}
			got := s.Admit(context.Background(), obj, nil).ToAggregate()
			switch {
			case tc.wantErr == "" && got != nil:
				t.Errorf("refused: %v", got)
			case tc.wantErr != "" && (got == nil || !strings.Contains(got.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error with %q", got, tc.wantErr)
			}
		})
	}
}
