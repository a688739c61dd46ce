package render_test

import (
	"slices"
	"testing"
)

// TestExternalTLSMountsTheUsersSecretOnly: with tls.mode External the
// servers' TLS volume projects tls.crt, tls.key and ca.crt from the one
// Secret spec.tls.external.serverSecretRef names (as cert-manager writes
// it), and no Secret of the operator's: a renewal of that Secret is what
// the kubelet hands the servers.
func TestExternalTLSMountsTheUsersSecretOnly(t *testing.T) {
	c := fixture(t, "tls_external")
	ref := c.Spec.TLS.External.ServerSecretRef.Name
	spec := statefulSet(t, renderWith(t, newRenderer(t), c, testOperator)).Spec.Template.Spec
	var keys []string
	for _, v := range spec.Volumes {
		if v.Name != "tls" {
			continue
		}
		if v.Projected == nil {
			t.Fatalf("volume tls is not projected: %+v", v.VolumeSource)
		}
		for _, src := range v.Projected.Sources {
			if src.Secret == nil || src.Secret.Name != ref {
				t.Errorf("volume tls projects %+v, want only Secret %s", src, ref)
				continue
			}
			for _, item := range src.Secret.Items {
				keys = append(keys, item.Key)
			}
		}
	}
	slices.Sort(keys)
	if want := []string{"ca.crt", "tls.crt", "tls.key"}; !slices.Equal(keys, want) {
		t.Errorf("volume tls projects keys %v of Secret %s, want %v", keys, ref, want)
	}
}
