package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/openbao/operator/internal/openbao"
)

// TokenStore keeps the root token. sys/init returns it once, so Initialize
// proves the store writable before it calls sys/init.
type TokenStore interface {
	// Name names the store (the Secret) for logs and messages.
	Name() string
	// DryRunCreate checks that Create would succeed now, without writing.
	DryRunCreate(ctx context.Context) error
	// Create stores the token. Its error must not carry the token.
	Create(ctx context.Context, token openbao.Token) error
}

// InitError is a failed Initialize. Reason is a condition reason;
// Initialized says sys/init succeeded (the cluster is initialized whatever
// happened after). Err never carries a token or a sys/init body.
type InitError struct {
	Reason      string
	Initialized bool
	Err         error
}

// OutcomeKnown says the failure leaves OpenBao as it was: sys/init was
// never sent, or OpenBao answered it with an HTTP error status. Only an
// unknown outcome (no answer: a broken connection or a timeout; an answer
// that could not be read; a token that could not be stored) may lead to a
// reset, so the reconciler clears status.initializationStarted on a
// known one.
func (e *InitError) OutcomeKnown() bool {
	if e.Initialized {
		return false
	}
	if e.Reason == ReasonRootTokenSecretUnwritable || errors.Is(e.Err, errNotCalled) {
		return true
	}
	var status *openbao.StatusError
	return errors.As(e.Err, &status)
}

// errNotCalled marks a failure before sys/init was sent.
var errNotCalled = errors.New("sys/init was not called")

func (e *InitError) Error() string { return fmt.Sprintf("bootstrap %s: %v", e.Reason, e.Err) }
func (e *InitError) Unwrap() error { return e.Err }

// Reasons of InitError besides ReasonInitFailed and ReasonRootTokenLost.
const ReasonRootTokenSecretUnwritable = "RootTokenSecretUnwritable"

// ErrTokenNotStored is wrapped when every Create attempt after sys/init failed.
var ErrTokenNotStored = errors.New("the root token could not be stored and is lost")

// InitOptions configure Initialize.
type InitOptions struct {
	Request openbao.InitRequest
	// Autopilot, when set, is written with the new root token right after
	// the token is stored (PhaseBootstrap values).
	Autopilot *openbao.AutopilotConfig
	// ClientWithToken returns a client of the same server that sends the
	// token; required when Autopilot is set.
	ClientWithToken func(openbao.Token) (openbao.Client, error)
	// StoreAttempts bounds Create attempts after sys/init (default 5), with
	// StoreRetryWait between them (default 1s), through Sleep (default: a
	// timer that honours ctx).
	StoreAttempts  int
	StoreRetryWait time.Duration
	Sleep          func(ctx context.Context, d time.Duration) error
	// AutopilotAttempts bounds the autopilot write (default 50), with
	// AutopilotRetryWait between attempts (default 200ms): the node turns
	// active a few hundred milliseconds after sys/init, and the scale-out
	// waits for this call.
	AutopilotAttempts  int
	AutopilotRetryWait time.Duration
	// Recovery, when set, stores the recovery key shares sys/init returns
	// for Request.RecoveryPGPKeys, encrypted to those keys; its dry run
	// goes before sys/init with the token's.
	Recovery RecoveryKeyStore
	// Setup, when set, runs once with a client holding the new root token
	// after the autopilot write succeeded: the one use of the root token
	// besides autopilot (the operator's own identity).
	Setup func(ctx context.Context, withToken openbao.Client) error
}

// CriticalDeadline bounds sys/init and the token store together: one
// request's timeout (openbao.DefaultTimeout) plus the store attempts.
const CriticalDeadline = openbao.DefaultTimeout + 10*time.Second

// InitOutcome reports what Initialize did.
type InitOutcome struct {
	// AutopilotErr is set when the autopilot write after init failed; the
	// reconciler retries it later.
	AutopilotErr error
	// RecoveryErr is set when the encrypted recovery key shares could not
	// be stored (they are lost; the root token is stored).
	RecoveryErr error
	// SetupErr is set when Setup failed or did not run (the autopilot
	// write failed first); the reconciler finishes it later with the
	// stored token.
	SetupErr error
}

// Initialize runs the standard initialization against pod-0: a dry-run
// create of the root-token Secret, sys/init, then the create with the
// in-memory token, retried a bounded number of times. The token never
// leaves this call except into the store.
//
// If the dry run fails, sys/init is not called (Reason
// RootTokenSecretUnwritable, retry with backoff). If sys/init fails, the
// cluster is still uninitialized (Reason InitFailed, retry with backoff).
// If every create fails, the cluster is initialized and its root token is
// lost (Reason RootTokenLost, Initialized true). The fresh cluster holds
// no data and no recovery keys exist (sys/init sends {}), so Decide resets
// it once (ActionReset): pod-0's volume is wiped and initialized again.
func Initialize(ctx context.Context, c openbao.Client, store TokenStore, opts InitOptions) (InitOutcome, error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("secret", store.Name())
	if err := store.DryRunCreate(ctx); err != nil {
		return InitOutcome{}, &InitError{Reason: ReasonRootTokenSecretUnwritable, Err: fmt.Errorf("dry-run create of Secret %s: %w", store.Name(), err)}
	}
	if opts.Recovery != nil {
		if err := opts.Recovery.DryRunCreate(ctx); err != nil {
			return InitOutcome{}, &InitError{Reason: ReasonRootTokenSecretUnwritable, Err: fmt.Errorf("dry-run create of Secret %s: %w", opts.Recovery.Name(), err)}
		}
	}
	if err := ctx.Err(); err != nil {
		return InitOutcome{}, &InitError{Reason: ReasonInitFailed, Err: fmt.Errorf("%w: %w", errNotCalled, err)}
	}
	// From sys/init until the token is stored, the caller's cancellation (a
	// manager shutting down) is not passed on: cutting this short would let
	// OpenBao finish while the token reaches no one. CriticalDeadline bounds
	// it; the manager waits that long for running passes when it stops.
	critical, cancel := context.WithTimeout(context.WithoutCancel(ctx), CriticalDeadline)
	defer cancel()
	log.Info("calling sys/init", "audit", true, "event_type", "openbao.bootstrap.init_started")
	res, err := c.Init(critical, opts.Request)
	if err != nil {
		return InitOutcome{}, &InitError{Reason: ReasonInitFailed, Err: err}
	}
	if err := storeToken(critical, store, res.RootToken, opts); err != nil {
		log.Error(nil, "OpenBao initialized but its root token could not be stored", "audit", true,
			"event_type", "openbao.bootstrap.root_token_lost")
		return InitOutcome{}, &InitError{Reason: ReasonRootTokenLost, Initialized: true, Err: err}
	}
	log.Info("OpenBao initialized; root token stored", "audit", true, "event_type", "openbao.bootstrap.initialized")
	var out InitOutcome
	if opts.Recovery != nil {
		out.RecoveryErr = storeRecovery(critical, res.RecoveryKeys, opts)
	}
	if opts.Autopilot != nil {
		out.AutopilotErr = setAutopilot(ctx, res.RootToken, opts)
	}
	if opts.Setup != nil {
		out.SetupErr = runSetup(ctx, res.RootToken, opts, out.AutopilotErr)
	}
	return out, nil
}

func runSetup(ctx context.Context, token openbao.Token, opts InitOptions, autopilotErr error) error {
	if autopilotErr != nil {
		return fmt.Errorf("setup skipped: the node did not take the autopilot write: %w", autopilotErr)
	}
	if opts.ClientWithToken == nil {
		return errors.New("setup: no client with a token")
	}
	c, err := opts.ClientWithToken(token)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return opts.Setup(ctx, c)
}

func storeToken(ctx context.Context, store TokenStore, token openbao.Token, opts InitOptions) error {
	attempts, last := storeWithRetries(ctx, opts, func() error { return store.Create(ctx, token) })
	if last == nil {
		return nil
	}
	return fmt.Errorf("%w: Secret %s, %d attempt(s), last: %w", ErrTokenNotStored, store.Name(), attempts, last)
}

// storeRecovery stores the encrypted recovery key shares, with the same
// bounded retries as the token.
func storeRecovery(ctx context.Context, shares []openbao.Token, opts InitOptions) error {
	if want := len(opts.Request.RecoveryPGPKeys); len(shares) != want {
		return fmt.Errorf("sys/init returned %d recovery key share(s), want %d", len(shares), want)
	}
	attempts, last := storeWithRetries(ctx, opts, func() error {
		return opts.Recovery.Create(ctx, shares, opts.Request.RecoveryThreshold)
	})
	if last == nil {
		return nil
	}
	return fmt.Errorf("store the encrypted recovery key shares in Secret %s, %d attempt(s), last: %w", opts.Recovery.Name(), attempts, last)
}

// storeWithRetries calls create up to opts.StoreAttempts times (5 by
// default), opts' retry wait apart, until it succeeds: what sys/init
// returned exists nowhere else. It returns the attempts allowed and the
// last error, nil on success.
func storeWithRetries(ctx context.Context, opts InitOptions, create func() error) (int, error) {
	attempts := opts.StoreAttempts
	if attempts <= 0 {
		attempts = 5
	}
	wait, sleep := retryTiming(opts)
	var last error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			if err := sleep(ctx, wait); err != nil {
				return attempts, err
			}
		}
		if last = create(); last == nil {
			return attempts, nil
		}
	}
	return attempts, last
}

// setAutopilot writes the autopilot configuration with the new token.
// sys/init returns before the node is active (measured: 500 "local node
// not active" right after it), so the write is retried up to
// AutopilotAttempts times, AutopilotRetryWait apart; a refusal (400, 403)
// is final.
func setAutopilot(ctx context.Context, token openbao.Token, opts InitOptions) error {
	if opts.ClientWithToken == nil {
		return errors.New("set autopilot: no client with a token")
	}
	c, err := opts.ClientWithToken(token)
	if err != nil {
		return fmt.Errorf("set autopilot: %w", err)
	}
	attempts := opts.AutopilotAttempts
	if attempts <= 0 {
		attempts = 50
	}
	_, sleep := retryTiming(opts)
	wait := opts.AutopilotRetryWait
	if wait <= 0 {
		wait = 200 * time.Millisecond
	}
	for i := 0; ; i++ {
		err = c.SetAutopilotConfiguration(ctx, *opts.Autopilot)
		final := errors.Is(err, openbao.ErrInvalidRequest) || errors.Is(err, openbao.ErrPermissionDenied)
		if err == nil || final || i+1 >= attempts {
			break
		}
		if sleepErr := sleep(ctx, wait); sleepErr != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("set autopilot: %w", err)
	}
	return nil
}

func retryTiming(opts InitOptions) (time.Duration, func(context.Context, time.Duration) error) {
	wait := opts.StoreRetryWait
	if wait <= 0 {
		wait = time.Second
	}
	sleep := opts.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	return wait, sleep
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
