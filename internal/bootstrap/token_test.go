package bootstrap_test

import (
	"strings"
	"testing"

	"github.com/openbao/operator/internal/bootstrap"
)

func TestTokenConditionFollowsTheSecret(t *testing.T) {
	const name = "bao-root-token"
	reason, msg := bootstrap.TokenCondition(bootstrap.ReasonInitialized, "old", false, false, name, "keys")
	if reason != bootstrap.ReasonRootTokenSecretMissing || !strings.Contains(msg, name) || !strings.Contains(msg, "generate-root") {
		t.Errorf("Secret deleted: %s: %s", reason, msg)
	}
	if reason, _ = bootstrap.TokenCondition(reason, msg, true, false, name, "keys"); reason != bootstrap.ReasonInitialized {
		t.Errorf("Secret back: %s, want Initialized", reason)
	}
	reason, msg = bootstrap.TokenCondition(bootstrap.ReasonInitialized, "old", false, true, name, "bao-recovery-keys")
	if reason != bootstrap.ReasonRootTokenRevoked || !strings.Contains(msg, "bao-recovery-keys") || !strings.Contains(msg, "generate-root") {
		t.Errorf("token revoked: %s: %s", reason, msg)
	}
	if reason, _ = bootstrap.TokenCondition(reason, msg, true, true, name, "keys"); reason != bootstrap.ReasonInitialized {
		t.Errorf("a token put back after the revocation: %s, want Initialized", reason)
	}
	for _, other := range []string{bootstrap.ReasonSelfInitialized, bootstrap.ReasonRootTokenLost, bootstrap.ReasonAdopted} {
		if reason, msg := bootstrap.TokenCondition(other, "kept", false, false, name, "keys"); reason != other || msg != "kept" {
			t.Errorf("%s became %s: %s", other, reason, msg)
		}
	}
}
