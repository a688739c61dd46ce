package bootstrap_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/podstate"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type podOpt func(*podstate.Pod)

func pod0(opts ...podOpt) *podstate.Pod {
	p := &podstate.Pod{Name: "bao-0", Phase: "Running", Running: true, Labels: map[string]string{}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func label(k, v string) podOpt { return func(p *podstate.Pod) { p.Labels[k] = v } }
func notRunning() podOpt       { return func(p *podstate.Pod) { p.Running = false; p.Phase = "Pending" } }
func waiting(reason string) podOpt {
	return func(p *podstate.Pod) { p.Running = false; p.WaitingReason = reason }
}
func restarts(n int32, lastReason string, code int32) podOpt {
	return func(p *podstate.Pod) { p.RestartCount, p.LastTerminationReason, p.LastExitCode = n, lastReason, code }
}

func health(initialized bool) *openbao.Health {
	return &openbao.Health{Initialized: initialized, Sealed: !initialized}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name   string
		obs    bootstrap.Observed
		action bootstrap.Action
		reason string
		self   bool
		after  time.Duration
	}{
		{name: "an initialized status needs nothing more",
			obs: bootstrap.Observed{Initialized: true}, action: bootstrap.ActionNone, reason: bootstrap.ReasonInitialized},
		{name: "no pod-0 yet waits",
			obs: bootstrap.Observed{}, action: bootstrap.ActionWait, reason: bootstrap.ReasonPodMissing, after: bootstrap.WatchedWait},
		{name: "a pending pod-0 waits for its container to run",
			obs: bootstrap.Observed{Pod0: pod0(notRunning())}, action: bootstrap.ActionWait, reason: bootstrap.ReasonPodStarting, after: bootstrap.WatchedWait},
		{name: "OpenBao's own labels on a first run are initialized before the kubelet reports it running",
			obs: bootstrap.Observed{Pod0: pod0(waiting("PodInitializing"), label(podstate.LabelInitialized, "false")), Health: health(false), Now: now}, action: bootstrap.ActionInitialize},
		{name: "labels left by a restarted container wait for the kubelet",
			obs:    bootstrap.Observed{Pod0: pod0(waiting("ContainerCreating"), restarts(1, "Error", 1), label(podstate.LabelInitialized, "false"))},
			action: bootstrap.ActionWait, reason: bootstrap.ReasonPodStarting, after: bootstrap.WatchedWait},
		{name: "labels of a container that exited wait for the kubelet",
			obs:    bootstrap.Observed{Pod0: pod0(notRunning(), func(p *podstate.Pod) { p.Terminated = true }, label(podstate.LabelInitialized, "false"))},
			action: bootstrap.ActionWait, reason: bootstrap.ReasonPodStarting, after: bootstrap.WatchedWait},
		{name: "a running pod-0 without labels or health waits for an answer",
			obs: bootstrap.Observed{Pod0: pod0(), HealthErr: errors.New("connection refused")}, action: bootstrap.ActionWait, reason: bootstrap.ReasonHealthUnknown},
		{name: "a label saying uninitialized is not proof either: a sealed retained server carries it, so sys/health decides",
			obs:    bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "false")), Now: now},
			action: bootstrap.ActionWait, reason: bootstrap.ReasonHealthUnknown, after: bootstrap.PollInterval},
		{name: "a label saying uninitialized on a server sys/health calls initialized is not initialized again",
			obs:    bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "false")), Health: health(true), Now: now},
			action: bootstrap.ActionDegraded, reason: bootstrap.ReasonInitializedElsewhere},
		{name: "an uninitialized pod-0 by its label is initialized",
			obs: bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "false")), Health: health(false), Now: now}, action: bootstrap.ActionInitialize},
		{name: "an uninitialized pod-0 by health (501) is initialized when labels are absent",
			obs: bootstrap.Observed{Pod0: pod0(), Health: health(false), Now: now}, action: bootstrap.ActionInitialize},
		{name: "a label saying initialized is not proof: sys/health decides, and initializes a server it says is not",
			obs: bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "true")), Health: health(false), Now: now}, action: bootstrap.ActionInitialize},
		{name: "a label saying initialized waits for sys/health to confirm it",
			obs:    bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "true"))},
			action: bootstrap.ActionWait, reason: bootstrap.ReasonHealthUnknown, after: bootstrap.PollInterval},
		{name: "an unreadable label falls back to health",
			obs:    bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "maybe")), Health: health(true), RootTokenSecretExists: true},
			action: bootstrap.ActionMarkInitialized, reason: bootstrap.ReasonInitialized},
		{name: "a cluster initialized by someone else during the bootstrap is a security event, neither adopted nor initialized again",
			obs: bootstrap.Observed{Pod0: pod0(), Health: health(true)}, action: bootstrap.ActionDegraded, reason: bootstrap.ReasonInitializedElsewhere, after: bootstrap.DegradedRequeue},
		{name: "an initialized cluster with our Secret is marked initialized (the status write was lost)",
			obs:    bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "true")), Health: health(true), RootTokenSecretExists: true},
			action: bootstrap.ActionMarkInitialized, reason: bootstrap.ReasonInitialized},
		{name: "self-init detected through labels is adopted as self-initialized",
			obs: bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "true")), Health: health(true), SelfInit: true}, action: bootstrap.ActionAdopt, reason: bootstrap.ReasonSelfInitialized, self: true},
		{name: "self-init not finished yet waits and never initializes",
			obs: bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "false")), Health: health(false), SelfInit: true}, action: bootstrap.ActionWait, reason: bootstrap.ReasonAwaitingSelfInit},
		{name: "a stale root-token Secret on an uninitialized cluster is degraded, not overwritten",
			obs:    bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "false")), Health: health(false), RootTokenSecretExists: true, RootTokenSecretName: "bao-root-token"},
			action: bootstrap.ActionDegraded, reason: bootstrap.ReasonStaleRootTokenSecret, after: bootstrap.DegradedRequeue},
		{name: "after one failed init the retry waits 5s",
			obs:    bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "false")), Health: health(false), InitFailures: 1, LastInitFailure: now, Now: now},
			action: bootstrap.ActionWait, reason: bootstrap.ReasonInitBackoff, after: 5 * time.Second},
		{name: "after three failed inits the retry waits 20s less the time passed",
			obs:    bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "false")), Health: health(false), InitFailures: 3, LastInitFailure: now, Now: now.Add(5 * time.Second)},
			action: bootstrap.ActionWait, reason: bootstrap.ReasonInitBackoff, after: 15 * time.Second},
		{name: "once the backoff passed init is retried",
			obs:    bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "false")), Health: health(false), InitFailures: 3, LastInitFailure: now, Now: now.Add(20 * time.Second)},
			action: bootstrap.ActionInitialize},
		{name: "a pod-0 in CrashLoopBackOff is degraded with the container's reason",
			obs:    bootstrap.Observed{Pod0: pod0(waiting("CrashLoopBackOff"), restarts(2, "Error", 1))},
			action: bootstrap.ActionDegraded, reason: bootstrap.ReasonPodCrashLooping, after: bootstrap.DegradedRequeue},
		{name: "a pod-0 whose restarts keep rising is degraded between back-offs",
			obs:    bootstrap.Observed{Pod0: pod0(restarts(3, "OOMKilled", 137))},
			action: bootstrap.ActionDegraded, reason: bootstrap.ReasonPodCrashLooping},
		{name: "a pod-0 that restarted but is ready is fine",
			obs:    bootstrap.Observed{Pod0: pod0(restarts(4, "Error", 1), func(p *podstate.Pod) { p.Ready = true }, label(podstate.LabelInitialized, "false")), Health: health(false), Now: now},
			action: bootstrap.ActionInitialize},
		{name: "a pod-0 whose image cannot be pulled is degraded",
			obs: bootstrap.Observed{Pod0: pod0(waiting("ImagePullBackOff"))}, action: bootstrap.ActionDegraded, reason: bootstrap.ReasonPodNotStarting},
		{name: "a crash-looping self-init pod-0 is degraded with the recovery hint",
			obs:    bootstrap.Observed{Pod0: pod0(waiting("CrashLoopBackOff"), restarts(5, "Error", 1)), SelfInit: true},
			action: bootstrap.ActionDegraded, reason: bootstrap.ReasonPodCrashLooping},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := bootstrap.Decide(tc.obs)
			record(d.Message)
			if d.Action != tc.action {
				t.Fatalf("action %s (%s: %s), want %s", d.Action, d.Reason, d.Message, tc.action)
			}
			if tc.reason != "" && d.Reason != tc.reason {
				t.Errorf("reason %s, want %s", d.Reason, tc.reason)
			}
			if d.SelfInitialized != tc.self {
				t.Errorf("selfInitialized %v, want %v", d.SelfInitialized, tc.self)
			}
			if tc.after != 0 && d.RequeueAfter != tc.after {
				t.Errorf("requeue after %s, want %s", d.RequeueAfter, tc.after)
			}
			if (d.Action == bootstrap.ActionWait || d.Action == bootstrap.ActionDegraded) && d.RequeueAfter <= 0 {
				t.Errorf("%s without a requeue interval: a hot loop or a stall", d.Action)
			}
		})
	}
}

func TestCrashLoopMessageNamesTheContainersReason(t *testing.T) {
	d := bootstrap.Decide(bootstrap.Observed{Pod0: pod0(waiting("CrashLoopBackOff"), restarts(2, "OOMKilled", 137))})
	if want := "bao-0 restarted 2 time(s); last exit: OOMKilled (code 137)"; d.Message != want {
		t.Errorf("message %q, want %q", d.Message, want)
	}
}

func TestInitBackoffDoublesFrom5sTo5m(t *testing.T) {
	want := []time.Duration{0, 5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second,
		80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for failures, w := range want {
		if got := bootstrap.InitBackoff(failures); got != w {
			t.Errorf("InitBackoff(%d) = %s, want %s", failures, got, w)
		}
	}
	if got := bootstrap.InitBackoff(1000); got != bootstrap.InitBackoffMax {
		t.Errorf("InitBackoff(1000) = %s", got)
	}
}

func TestNeedsHealthWheneverPod0RunsUninitialized(t *testing.T) {
	tests := map[string]struct {
		obs  bootstrap.Observed
		want bool
	}{
		"a running pod-0 without labels":        {bootstrap.Observed{Pod0: pod0()}, true},
		"a running pod-0 with the label":        {bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "false"))}, true},
		"a pod-0 not running":                   {bootstrap.Observed{Pod0: pod0(notRunning())}, false},
		"no pod-0":                              {bootstrap.Observed{}, false},
		"a cluster whose status is initialized": {bootstrap.Observed{Initialized: true, Pod0: pod0()}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.obs.NeedsHealth(); got != tc.want {
				t.Errorf("NeedsHealth = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAnInitCutShortIsResetOnceThenReported: the operator recorded that it
// was calling sys/init, then stopped; OpenBao finished and the token
// reached nobody. Nobody holds a credential, so the next operator wipes
// pod-0 and initializes again, once; it never adopts the cluster as one
// initialized elsewhere. A second loss is reported, not reset again.
func TestAnInitCutShortIsResetOnceThenReported(t *testing.T) {
	lost := bootstrap.Observed{
		Pod0: pod0(label(podstate.LabelInitialized, "true")), Health: health(true), InitStarted: true,
		RootTokenSecretName: "bao-root-token", Now: now,
		ClusterCreated: now.Add(-time.Minute), Pod0Claim: &bootstrap.Claim{Created: now.Add(-time.Minute)},
	}
	if d := bootstrap.Decide(lost); d.Action != bootstrap.ActionReset || d.RequeueAfter <= 0 {
		t.Fatalf("first loss: got %s/%s (requeue %s), want Reset with a requeue", d.Action, d.Reason, d.RequeueAfter)
	}
	again := lost
	again.ResetDone = true
	if d := bootstrap.Decide(again); d.Action != bootstrap.ActionAdopt || d.Reason != bootstrap.ReasonRootTokenLost {
		t.Fatalf("loss after a reset: got %s/%s, want Adopt/RootTokenLost", d.Action, d.Reason)
	}
	withSecret := lost
	withSecret.RootTokenSecretExists = true
	if d := bootstrap.Decide(withSecret); d.Action != bootstrap.ActionMarkInitialized {
		t.Fatalf("with the token stored: got %s, want MarkInitialized", d.Action)
	}
}

// TestAResetUnderWayIsFinishedBeforeAnythingElse: while the old pod-0 or
// its volume exists, the reset goes on, whatever the old pod still says;
// once both are gone, an empty pod-0 is initialized as usual.
func TestAResetUnderWayIsFinishedBeforeAnythingElse(t *testing.T) {
	pending := bootstrap.Observed{
		Pod0: pod0(label(podstate.LabelInitialized, "true")), Health: health(true),
		ResetDone: true, ResetPending: true, Now: now,
	}
	if d := bootstrap.Decide(pending); d.Action != bootstrap.ActionReset {
		t.Fatalf("reset under way: got %s/%s, want Reset", d.Action, d.Reason)
	}
	pending.Pod0 = nil
	if d := bootstrap.Decide(pending); d.Action != bootstrap.ActionReset {
		t.Fatalf("reset under way, pod gone: got %s/%s, want Reset", d.Action, d.Reason)
	}
	fresh := bootstrap.Observed{Pod0: pod0(label(podstate.LabelInitialized, "false")), Health: health(false), ResetDone: true, Now: now}
	if d := bootstrap.Decide(fresh); d.Action != bootstrap.ActionInitialize {
		t.Fatalf("after the reset: got %s/%s, want Initialize", d.Action, d.Reason)
	}
}

// TestRetainedDataIsNeitherWipedNorInitialized: a retained cluster created
// again starts pod-0 on its old volume, and one formed from a backup whose
// restore may have begun holds a restored snapshot; neither is ever reset, whatever
// initializationStarted says (an earlier release recorded it on a label's
// word), and the status says what the user must do.
func TestRetainedDataIsNeitherWipedNorInitialized(t *testing.T) {
	created := now.Add(-time.Minute)
	base := bootstrap.Observed{Pod0: pod0(), Health: health(true), RootTokenSecretName: "bao-root-token",
		Now: now, ClusterCreated: created}
	tests := []struct {
		name string
		edit func(*bootstrap.Observed)
	}{
		{"a volume older than the cluster with an init start recorded is kept", func(o *bootstrap.Observed) {
			o.InitStarted, o.Pod0Claim = true, &bootstrap.Claim{Created: created.Add(-24 * time.Hour)}
		}},
		{"a volume older than the cluster without an init start is reported as retained data", func(o *bootstrap.Observed) {
			o.Pod0Claim = &bootstrap.Claim{Created: created.Add(-time.Second)}
		}},
		{"a cluster formed from a backup whose restore is recorded is never wiped, even on a new volume", func(o *bootstrap.Observed) {
			o.InitStarted, o.FromBackup, o.FromBackupRecorded, o.Pod0Claim = true, true, true, &bootstrap.Claim{Created: created.Add(time.Second)}
		}},
		{"nor is a cluster formed from a backup without an init start of this operator's", func(o *bootstrap.Observed) {
			o.FromBackup, o.FromBackupRecorded, o.Pod0Claim = true, true, &bootstrap.Claim{Created: created.Add(time.Second)}
		}},
		{"a claim that could not be found proves nothing, so nothing is wiped", func(o *bootstrap.Observed) {
			o.InitStarted = true
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			d := bootstrap.Decide(o)
			if d.Action != bootstrap.ActionDegraded || d.Reason != bootstrap.ReasonRetainedData {
				t.Fatalf("got %s/%s (%s), want Degraded/RetainedData", d.Action, d.Reason, d.Message)
			}
			for _, want := range []string{"bao-root-token", "generate-root", "neither initializes nor wipes"} {
				if !strings.Contains(d.Message, want) {
					t.Errorf("message %q does not say %q", d.Message, want)
				}
			}
		})
	}
	sameSecond := base
	sameSecond.InitStarted, sameSecond.Pod0Claim = true, &bootstrap.Claim{Created: created.Truncate(time.Second)}
	if d := bootstrap.Decide(sameSecond); d.Action != bootstrap.ActionReset {
		t.Errorf("a claim of the cluster's own second is its own: got %s/%s, want Reset", d.Action, d.Reason)
	}
	// A cluster formed from a backup restores only once status says it is
	// initialized, which needs the root token stored: before its restore
	// is recorded, a cut-off sys/init left empty data (the drill copy of
	// the e2e, its operator killed inside sys/init, stayed RetainedData).
	lostBeforeRestore := base
	lostBeforeRestore.InitStarted, lostBeforeRestore.FromBackup = true, true
	lostBeforeRestore.Pod0Claim = &bootstrap.Claim{Created: created.Add(time.Second)}
	if d := bootstrap.Decide(lostBeforeRestore); d.Action != bootstrap.ActionReset {
		t.Errorf("a cluster formed from a backup whose sys/init was cut off before any restore: got %s/%s, want Reset", d.Action, d.Reason)
	}
}

// TestOnlyAnUnknownInitOutcomeKeepsInitStarted: an HTTP answer or a call
// never sent leaves OpenBao as it was; a broken connection, an unreadable
// answer or a token not stored does not.
func TestOnlyAnUnknownInitOutcomeKeepsInitStarted(t *testing.T) {
	tests := map[string]struct {
		err   *bootstrap.InitError
		known bool
	}{
		"sys/init refused with 400 (already initialized)": {&bootstrap.InitError{Reason: bootstrap.ReasonInitFailed,
			Err: fmt.Errorf("x: %w", &openbao.StatusError{Op: "sys/init", Code: 400})}, true},
		"sys/init answered 503": {&bootstrap.InitError{Reason: bootstrap.ReasonInitFailed,
			Err: &openbao.StatusError{Op: "sys/init", Code: 503}}, true},
		"the dry run of the Secret failed": {&bootstrap.InitError{Reason: bootstrap.ReasonRootTokenSecretUnwritable,
			Err: errors.New("forbidden")}, true},
		"the connection broke": {&bootstrap.InitError{Reason: bootstrap.ReasonInitFailed,
			Err: &openbao.TransportError{Op: "sys/init", Err: errors.New("EOF")}}, false},
		"the answer could not be read": {&bootstrap.InitError{Reason: bootstrap.ReasonInitFailed,
			Err: fmt.Errorf("openbao sys/init: %w", openbao.ErrUnreadableResponse)}, false},
		"the token could not be stored": {&bootstrap.InitError{Reason: bootstrap.ReasonRootTokenLost, Initialized: true,
			Err: bootstrap.ErrTokenNotStored}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.err.OutcomeKnown(); got != tc.known {
				t.Errorf("OutcomeKnown = %v, want %v", got, tc.known)
			}
		})
	}
}
