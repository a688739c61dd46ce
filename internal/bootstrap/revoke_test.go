package bootstrap_test

import (
	"testing"

	"github.com/openbao/operator/internal/bootstrap"
)

// ready is a cluster on which every precondition of the revocation holds.
func ready(mods ...func(*bootstrap.RevokeObserved)) bootstrap.RevokeObserved {
	o := bootstrap.RevokeObserved{
		Revoke: true, Initialized: true, SecretExists: true, RecoveryKeysStored: true,
		IdentityCurrent: true, OperatorLoggedIn: true,
		SecretName: "bao-root-token", RecoveryKeysSecretName: "bao-recovery-keys",
	}
	for _, m := range mods {
		m(&o)
	}
	return o
}

func TestDecideRevoke(t *testing.T) {
	for name, tc := range map[string]struct {
		obs      bootstrap.RevokeObserved
		want     bootstrap.RevokeAction
		reason   string
		degraded bool
	}{
		"policy Keep leaves the token": {
			obs: ready(func(o *bootstrap.RevokeObserved) { o.Revoke = false; o.Token = bootstrap.TokenAlive }), want: bootstrap.RevokeNone},
		"no Secret: nothing is held": {
			obs: ready(func(o *bootstrap.RevokeObserved) { o.SecretExists = false }), want: bootstrap.RevokeNone},
		"a cluster not initialized is the bootstrap's": {
			obs: ready(func(o *bootstrap.RevokeObserved) { o.Initialized = false }), want: bootstrap.RevokeNone},
		"a self-initialized cluster's token is not the operator's": {
			obs: ready(func(o *bootstrap.RevokeObserved) { o.SelfInitialized = true }), want: bootstrap.RevokeNone},
		"without stored recovery keys the only credential is never revoked": {
			obs:  ready(func(o *bootstrap.RevokeObserved) { o.RecoveryKeysStored = false; o.Token = bootstrap.TokenAlive }),
			want: bootstrap.RevokeHold, reason: bootstrap.ReasonRevokeRefusedNoRecoveryKeys, degraded: true},
		"an identity not yet at the current revision still needs the token": {
			obs:  ready(func(o *bootstrap.RevokeObserved) { o.IdentityCurrent = false; o.Token = bootstrap.TokenAlive }),
			want: bootstrap.RevokeHold, reason: bootstrap.ReasonRevokeWaitingForIdentity},
		"an operator that could not log in with its identity keeps the token": {
			obs:  ready(func(o *bootstrap.RevokeObserved) { o.OperatorLoggedIn = false; o.Token = bootstrap.TokenAlive }),
			want: bootstrap.RevokeHold, reason: bootstrap.ReasonRevokeWaitingForLogin},
		"a token not yet looked up is looked up first": {obs: ready(), want: bootstrap.RevokeLookup},
		"a live token is revoked":                      {obs: ready(func(o *bootstrap.RevokeObserved) { o.Token = bootstrap.TokenAlive }), want: bootstrap.RevokeSelf},
		"a token still alive after revoke-self is not revoked twice in a pass and keeps its Secret": {
			obs:  ready(func(o *bootstrap.RevokeObserved) { o.Token, o.RevokeSent = bootstrap.TokenAlive, true }),
			want: bootstrap.RevokeHold, reason: bootstrap.ReasonRevokeUnconfirmed},
		"an unanswered lookup keeps the Secret": {
			obs:  ready(func(o *bootstrap.RevokeObserved) { o.Token, o.RevokeSent = bootstrap.TokenUnknown, true }),
			want: bootstrap.RevokeHold, reason: bootstrap.ReasonRevokeUnconfirmed},
		"a token proven dead has its revocation recorded, its Secret kept until that is stored": {
			obs: ready(func(o *bootstrap.RevokeObserved) { o.Token, o.RevokeSent = bootstrap.TokenDead, true }), want: bootstrap.RevokeRecord},
		"a token proven dead whose revocation is stored has its Secret deleted": {
			obs: ready(func(o *bootstrap.RevokeObserved) { o.Token, o.RevokedRecorded = bootstrap.TokenDead, true }), want: bootstrap.RevokeDeleteSecret},
	} {
		t.Run(name, func(t *testing.T) {
			d := bootstrap.DecideRevoke(tc.obs)
			if d.Action != tc.want || d.Reason != tc.reason && tc.reason != "" || d.Degraded != tc.degraded {
				t.Fatalf("got %+v, want %s %s degraded=%v", d, tc.want, tc.reason, tc.degraded)
			}
		})
	}
}

func TestRevokeRefusal(t *testing.T) {
	if msg := bootstrap.RevokeRefusal(true, false, "bao-recovery-keys"); msg == "" {
		t.Fatal("an initialized cluster without recovery keys may be revoked")
	}
	for _, allowed := range [][2]bool{{false, false}, {true, true}, {false, true}} {
		if msg := bootstrap.RevokeRefusal(allowed[0], allowed[1], "x"); msg != "" {
			t.Errorf("initialized %v, keys %v: refused: %s", allowed[0], allowed[1], msg)
		}
	}
}

// FuzzDecideRevoke holds the invariant of the irreversible step: revoke-
// self is sent only with Revoke set, on an initialized cluster of the
// operator's own sys/init, with recovery keys stored, the identity current
// and a login with it in this pass, to a token a lookup just found alive,
// once per pass; the Secret is deleted only under the same conditions and
// only once a lookup proved the token dead.
func FuzzDecideRevoke(f *testing.F) {
	f.Add(true, true, false, true, true, true, true, 0, false, false)
	f.Add(true, true, false, true, true, true, true, 1, false, false)
	f.Add(true, true, false, true, true, true, true, 2, true, false)
	f.Add(true, true, false, true, false, true, true, 1, false, false)
	f.Add(true, true, false, true, true, true, true, 3, true, false)
	f.Add(true, true, false, true, true, true, true, 2, false, false)
	f.Add(true, true, false, true, true, true, true, 2, false, true)
	f.Fuzz(func(t *testing.T, revoke, initialized, selfInit, secret, keys, identity, login bool, token int, sent, recorded bool) {
		o := bootstrap.RevokeObserved{
			Revoke: revoke, Initialized: initialized, SelfInitialized: selfInit, SecretExists: secret,
			RecoveryKeysStored: keys, IdentityCurrent: identity, OperatorLoggedIn: login,
			Token: bootstrap.TokenState(((token % 4) + 4) % 4), RevokeSent: sent, RevokedRecorded: recorded,
		}
		d := bootstrap.DecideRevoke(o)
		preconditions := revoke && initialized && !selfInit && secret && keys && identity && login
		switch d.Action {
		case bootstrap.RevokeSelf:
			if !preconditions || o.Token != bootstrap.TokenAlive || sent {
				t.Fatalf("revoke-self on %+v", o)
			}
		case bootstrap.RevokeDeleteSecret:
			if !preconditions || o.Token != bootstrap.TokenDead || !o.RevokedRecorded {
				t.Fatalf("Secret deleted on %+v", o)
			}
		case bootstrap.RevokeRecord:
			if !preconditions || o.Token != bootstrap.TokenDead {
				t.Fatalf("revocation recorded on %+v", o)
			}
		case bootstrap.RevokeLookup:
			if !preconditions || o.Token != bootstrap.TokenUnchecked {
				t.Fatalf("lookup on %+v", o)
			}
		case bootstrap.RevokeHold:
			if d.Reason == "" || d.Message == "" {
				t.Fatalf("hold without a reason: %+v", d)
			}
		}
	})
}
