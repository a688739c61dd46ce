package crdschema_test

import (
	"context"
	"testing"
)

// TestExternalTLSNamesItsSecretInThatModeOnly: tls.mode External needs
// tls.external.serverSecretRef, and no other mode takes it.
func TestExternalTLSNamesItsSecretInThatModeOnly(t *testing.T) {
	const rule = "tls.external is required when tls.mode is External and not allowed otherwise"
	for spec, allowed := range map[string]bool{
		`{version: 2.4.0, tls: {mode: External, external: {serverSecretRef: {name: bao-cert}}}}`:                                                                        true,
		`{version: 2.4.0, tls: {mode: External}}`:                                                                                                                       false,
		`{version: 2.4.0, tls: {external: {serverSecretRef: {name: bao-cert}}}}`:                                                                                        false,
		`{version: 2.4.0, tls: {mode: ACME, acme: {directory: "https://acme.example/dir", domains: [bao.example.com]}, external: {serverSecretRef: {name: bao-cert}}}}`: false,
	} {
		obj := object(t, "apiVersion: openbao.org/v1alpha1\nkind: OpenBaoCluster\nmetadata: {name: bao}\nspec: "+spec+"\n")
		errs := load(t).Admit(context.Background(), obj, nil)
		if rejected := hasError(errs, "spec.tls", rule); rejected == allowed {
			t.Errorf("%s: rejected %v, want %v (%v)", spec, rejected, !allowed, errs)
		}
		if allowed && len(errs) > 0 {
			t.Errorf("%s: %v", spec, errs)
		}
	}
}
