package bootstrap

import "fmt"

// ReasonRootTokenSecretMissing: the operator initialized the cluster and
// stored its root token, and the Secret is gone since.
const ReasonRootTokenSecretMissing = "RootTokenSecretMissing"

// TokenCondition keeps OpenBaoInitialized truthful about the root token of
// a cluster this operator initialized (reason Initialized, or
// RootTokenSecretMissing): it says where the token is, or that its Secret
// was deleted and what a person can do. Other reasons (self-init, a lost
// token) are returned unchanged. The cluster is never initialized again:
// the operator works through its own identity and needs no root token.
//
// A Secret the operator deleted after revoking its token
// (spec.rootToken.policy Revoke, revoked) is reason RootTokenRevoked,
// with the way back: generate-root with the recovery keys.
func TokenCondition(reason, message string, secretExists, revoked bool, secretName, recoveryKeysSecret string) (string, string) {
	if reason != ReasonInitialized && reason != ReasonRootTokenSecretMissing && reason != ReasonRootTokenRevoked {
		return reason, message
	}
	if secretExists {
		return ReasonInitialized, "the cluster is initialized; the root token is in Secret " + secretName
	}
	if revoked {
		return ReasonRootTokenRevoked, fmt.Sprintf("the cluster is initialized; its root token was revoked and Secret %s "+
			"deleted (spec.rootToken.policy Revoke): the operator works with its own identity. To make a root token in an "+
			"emergency, run bao operator generate-root with the PGP-encrypted recovery keys of Secret %s (docs/configure.md, The root token)",
			secretName, recoveryKeysSecret)
	}
	return ReasonRootTokenSecretMissing, fmt.Sprintf("the cluster is initialized, but Secret %s, which held its root token, "+
		"was deleted. The operator does not need it and will not initialize again. If you kept the token, create the Secret "+
		"again with it under the key token; otherwise generate a new root token with the recovery keys "+
		"(bao operator generate-root), or do without one", secretName)
}
