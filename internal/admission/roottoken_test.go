package admission

import (
	"strings"
	"testing"

	"github.com/openbao/operator/api/v1alpha1"
)

func rootToken(policy v1alpha1.RootTokenPolicy) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.RootToken = &v1alpha1.RootTokenSpec{Policy: policy, RecoveryKeys: &v1alpha1.RecoveryKeysSpec{
			PGPKeysConfigMapRef: v1alpha1.PGPKeysConfigMapRef{Name: "pgp", Keys: []string{"alice.asc"}}}}
	}
}

func initializedWith(shares int32) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) {
		c.Status.Initialized = true
		if shares > 0 {
			c.Status.RootToken = &v1alpha1.RootTokenStatus{Held: true, RecoveryShares: shares, RecoveryThreshold: 1}
		}
	}
}

// TestRevokeIsRefusedOnAClusterWithoutRecoveryKeys: the only credential
// of a cluster initialized without recovery keys is never revoked; a new
// cluster, or one with stored keys, may be set to Revoke.
func TestRevokeIsRefusedOnAClusterWithoutRecoveryKeys(t *testing.T) {
	for name, tc := range map[string]struct {
		old, c *v1alpha1.OpenBaoCluster
		refuse bool
	}{
		"a new cluster gets its recovery keys at sys/init": {nil, cluster(rootToken(v1alpha1.RootTokenRevoke)), false},
		"a cluster not yet initialized":                    {cluster(), cluster(rootToken(v1alpha1.RootTokenRevoke)), false},
		"an initialized cluster with stored recovery keys": {
			cluster(initializedWith(3), rootToken(v1alpha1.RootTokenKeep)), cluster(rootToken(v1alpha1.RootTokenRevoke)), false},
		"an initialized cluster without recovery keys is refused": {
			cluster(initializedWith(0)), cluster(rootToken(v1alpha1.RootTokenRevoke)), true},
		"Keep is always allowed": {cluster(initializedWith(0)), cluster(rootToken(v1alpha1.RootTokenKeep)), false},
		"an object already set to Revoke is not checked again": {
			cluster(initializedWith(0), rootToken(v1alpha1.RootTokenRevoke)), cluster(rootToken(v1alpha1.RootTokenRevoke)), false},
	} {
		t.Run(name, func(t *testing.T) {
			errs := ValidateCluster(tc.old, tc.c)
			if refused := len(errs) > 0; refused != tc.refuse {
				t.Fatalf("refused %v, want %v: %v", refused, tc.refuse, errs)
			}
			if tc.refuse && (errs[0].Field != "spec.rootToken.policy" || !strings.Contains(errs[0].Detail, "generate-root") ||
				!strings.Contains(errs[0].Detail, "bao-recovery-keys")) {
				t.Errorf("the refusal names %s: %s", errs[0].Field, errs[0].Detail)
			}
		})
	}
}
