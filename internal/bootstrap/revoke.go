package bootstrap

import "fmt"

// The root token's revocation (spec.rootToken.policy Revoke) cannot be
// undone: DecideRevoke allows it only once the operator provably works
// without the token (its own identity at the current revision, a login
// with it in this pass, which also proves the active server unsealed),
// and once a way back exists that only the user holds (the PGP-encrypted
// recovery key shares, stored). The Secret goes only after a lookup with
// the token itself proves it dead: a revoke whose answer was lost, or
// that failed, leaves the Secret, and the next pass looks again.

// TokenState is what a lookup-self with the stored token said.
type TokenState int

// Token states.
const (
	// TokenUnchecked: no lookup in this pass yet.
	TokenUnchecked TokenState = iota
	// TokenAlive: lookup-self answered with the token's data.
	TokenAlive
	// TokenDead: lookup-self was refused (403): the token opens nothing.
	TokenDead
	// TokenUnknown: lookup-self got no answer, or another error.
	TokenUnknown
)

// RevokeObserved is everything DecideRevoke looks at.
type RevokeObserved struct {
	// Revoke is spec.rootToken.policy Revoke.
	Revoke bool
	// Initialized and SelfInitialized are status.initialized and
	// status.selfInitialized.
	Initialized     bool
	SelfInitialized bool
	// SecretExists says <cluster>-root-token exists and holds a token.
	SecretExists bool
	// RecoveryKeysStored says <cluster>-recovery-keys holds at least
	// threshold encrypted shares.
	RecoveryKeysStored bool
	// IdentityCurrent says the operator's identity is at this release's
	// revision (status.identityRevision).
	IdentityCurrent bool
	// OperatorLoggedIn says the operator logged in with its own identity
	// in this pass: the active server is unsealed and the identity works.
	OperatorLoggedIn bool
	// Token is the lookup-self answer in this pass; RevokeSent says
	// revoke-self was sent in this pass.
	Token      TokenState
	RevokeSent bool
	// RevokedRecorded says status.rootToken.revokedAt is stored: the
	// status as read at the start of the pass holds it, not only the one
	// being built.
	RevokedRecorded bool
	// SecretName and RecoveryKeysSecretName name the Secrets, for messages.
	SecretName             string
	RecoveryKeysSecretName string
}

// RevokeAction is what the reconciler does next.
type RevokeAction string

// Revoke actions.
const (
	// RevokeNone: nothing to do (policy Keep, or no token stored).
	RevokeNone RevokeAction = "None"
	// RevokeLookup: call auth/token/lookup-self with the stored token and
	// decide again.
	RevokeLookup RevokeAction = "Lookup"
	// RevokeSelf: call auth/token/revoke-self with the stored token, then
	// look it up again.
	RevokeSelf RevokeAction = "RevokeSelf"
	// RevokeRecord: the token was proven dead; record
	// status.rootToken.revokedAt and keep the Secret until that status is
	// stored. A Secret deleted first, with the status write lost (a
	// conflict, a restart), would leave a cluster whose token is gone and
	// whose status never says it was revoked: without the Secret there is
	// nothing left to decide from.
	RevokeRecord RevokeAction = "Record"
	// RevokeDeleteSecret: delete the Secret whose token was proven dead
	// in this pass, once its revocation is recorded (guarded by its UID
	// and resourceVersion).
	RevokeDeleteSecret RevokeAction = "DeleteSecret"
	// RevokeHold: not now; Reason and Message say why (Degraded when
	// Degraded is set), retried after DegradedRequeue.
	RevokeHold RevokeAction = "Hold"
)

// Reasons of a held revocation.
const (
	ReasonRevokeRefusedNoRecoveryKeys = "RevokeRefusedNoRecoveryKeys"
	ReasonRevokeWaitingForIdentity    = "RevokeWaitingForIdentity"
	ReasonRevokeWaitingForLogin       = "RevokeWaitingForLogin"
	ReasonRevokeUnconfirmed           = "RevokeUnconfirmed"
	ReasonRootTokenRevoked            = "RootTokenRevoked"
)

// RevokeDecision is what DecideRevoke returns.
type RevokeDecision struct {
	Action   RevokeAction
	Reason   string
	Message  string
	Degraded bool
}

// DecideRevoke returns the next step of the root token's revocation.
func DecideRevoke(o RevokeObserved) RevokeDecision {
	if !o.Revoke || !o.SecretExists || !o.Initialized || o.SelfInitialized {
		return RevokeDecision{Action: RevokeNone}
	}
	if msg := RevokeRefusal(true, o.RecoveryKeysStored, o.RecoveryKeysSecretName); msg != "" {
		return RevokeDecision{Action: RevokeHold, Reason: ReasonRevokeRefusedNoRecoveryKeys, Message: msg, Degraded: true}
	}
	if !o.IdentityCurrent {
		return hold(ReasonRevokeWaitingForIdentity, fmt.Sprintf("the root token in Secret %s is revoked once the operator's "+
			"own identity is set up at the current revision", o.SecretName))
	}
	if !o.OperatorLoggedIn {
		return hold(ReasonRevokeWaitingForLogin, fmt.Sprintf("the root token in Secret %s is revoked once the operator has "+
			"logged in to the active server with its own identity", o.SecretName))
	}
	switch o.Token {
	case TokenUnchecked:
		return RevokeDecision{Action: RevokeLookup}
	case TokenAlive:
		if o.RevokeSent {
			return hold(ReasonRevokeUnconfirmed, fmt.Sprintf("revoke-self with the token of Secret %s was sent, "+
				"but the token still answers; retrying", o.SecretName))
		}
		return RevokeDecision{Action: RevokeSelf}
	case TokenDead:
		if !o.RevokedRecorded {
			return RevokeDecision{Action: RevokeRecord, Reason: ReasonRootTokenRevoked}
		}
		return RevokeDecision{Action: RevokeDeleteSecret, Reason: ReasonRootTokenRevoked}
	}
	return hold(ReasonRevokeUnconfirmed, fmt.Sprintf("whether the token of Secret %s still works is unknown (OpenBao "+
		"did not answer its lookup); the Secret is kept until a lookup proves the token dead", o.SecretName))
}

func hold(reason, msg string) RevokeDecision {
	return RevokeDecision{Action: RevokeHold, Reason: reason, Message: msg}
}

// RevokeRefusal is the rule the webhook and the controller share: policy
// Revoke on a cluster that is initialized without stored recovery keys
// would revoke the only credential that can ever administer it, since
// bao operator generate-root needs recovery keys. It returns the refusal,
// or "" when revoke is allowed. A cluster not yet initialized gets its
// recovery keys at sys/init (the CRD requires recoveryKeys with Revoke).
func RevokeRefusal(initialized, recoveryKeysStored bool, recoveryKeysSecret string) string {
	if !initialized || recoveryKeysStored {
		return ""
	}
	return fmt.Sprintf("rootToken.policy Revoke is refused: this cluster was initialized without recovery keys "+
		"(Secret %s holds none), so once its root token is revoked no root token could ever be made again "+
		"(bao operator generate-root needs recovery keys). Keep the root token (policy Keep); to do without it, make "+
		"recovery keys yourself with it (bao operator rekey -target=recovery -init -pgp-keys=...), then revoke it yourself "+
		"and delete the Secret", recoveryKeysSecret)
}
