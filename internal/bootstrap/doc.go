// Package bootstrap decides how an OpenBao cluster gets initialized and
// carries out the one step that must not be split: sys/init and storing
// its root token. Decide is pure: it takes an Observed snapshot and
// returns a Decision; the reconciler gathers the snapshot and carries the
// decision out. The decisions behind it follow, with their reasons.
//
// # Detection
//
// The labels OpenBao's Kubernetes service registration writes on pod-0
// (openbao-initialized) are read first; sys/health over TLS with the
// cluster CA is asked only when the label is missing or unreadable
// (Observed.NeedsHealth). An initialized cluster is never initialized again:
// with our root-token Secret present it is marked initialized (the status
// write of an earlier reconcile was lost); without it, it is adopted
// (self-init, or initialized before the operator managed it).
//
// # The root token
//
// sys/init returns the token once. Initialize therefore:
//  1. dry-run creates the Secret (RBAC, quota, admission, name taken):
//     on failure sys/init is not called (RootTokenSecretUnwritable, retried
//     with InitBackoff);
//  2. calls sys/init with {} (auto-unseal seals refuse secret_shares), or,
//     with spec.rootToken.recoveryKeys, with recovery_shares,
//     recovery_threshold and recovery_pgp_keys: each recovery key share
//     comes back encrypted to one of the user's PGP keys, and is stored so
//     in <cluster>-recovery-keys (its dry run goes with the token's); on
//     failure nothing was returned (InitFailed, retried with backoff);
//  3. creates the Secret with the in-memory token, up to 5 attempts 1 s
//     apart in the same call; a Secret that already holds exactly this
//     token counts as stored (an attempt whose answer was lost). Steps 2
//     and 3 ignore the caller's cancellation, within CriticalDeadline: a
//     manager told to stop (SIGTERM) finishes them first, because OpenBao
//     finishes sys/init whatever the caller does. Only a hard kill (SIGKILL,
//     a lost node) inside step 2 loses the token;
//  4. if every attempt fails, the cluster is initialized and the token is
//     lost: InitError{Reason: RootTokenLost, Initialized: true}. sys/init
//     has no recovery keys unless spec.rootToken.recoveryKeys asks for
//     them (and those are stored only after the token), so generate-root
//     has nothing to work with; nobody holds a credential, so nobody can
//     have written data. The reconciler leaves status.initialized false, and Decide
//     answers the next pass with ActionReset: pod-0 and its volume are
//     wiped and initialized again, once (status.bootstrapReset); a second
//     loss is Degraded RootTokenLost. The same holds for a hard kill
//     inside step 2 (status.initializationStarted is the trace). The
//     operator
//     never holds the token elsewhere (no log, event, condition, error,
//     annotation, or retry buffer across reconciles).
//
// A root-token Secret that exists while OpenBao is uninitialized is stale:
// Degraded StaleRootTokenSecret, never overwritten.
//
// # Revoking the root token
//
// With spec.rootToken.policy Revoke, DecideRevoke (revoke.go) decides the
// irreversible step: only with the recovery keys stored, the operator's
// identity at the current revision and working, revoke-self with the
// token, then delete its Secret once a lookup with the token proves it
// dead. RevokeRefusal is the rule the webhook shares: no Revoke on a
// cluster initialized without recovery keys.
//
// Autopilot, which the operator writes with the new token right after
// sys/init, is package autopilot's.
package bootstrap
