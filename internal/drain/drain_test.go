package drain

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// catchingUp is what upgrade.PeersProblem says of a restarted server the
// leader's replication has not reached yet.
const catchingUp = "the leader's replication does not reach the voter bao-2: its Raft log ends at 65, the leader's at 131"

// healthyActive is an eviction of the active server of a healthy cluster
// that the guard has not refused before.
func healthyActive() Observed {
	return Observed{Now: t0, Bound: time.Minute, Managed: true, Pod: "bao-0", Active: "bao-0",
		RaftKnown: true, AllVotersHealthy: true, FailureTolerance: 1}
}

func with(change func(*Observed)) Observed {
	o := healthyActive()
	change(&o)
	return o
}

func refusedAt(first, asked time.Duration) func(*Observed) {
	return func(o *Observed) { o.FirstRefusal, o.LastStepDown = t0, t0.Add(asked); o.Now = t0.Add(first) }
}

func TestDecide(t *testing.T) {
	cases := map[string]struct {
		o        Observed
		allow    bool
		stepDown bool
		memory   Memory
		reason   string
	}{
		"the active server of a healthy cluster is asked to step down and its eviction waits": {
			healthyActive(), false, true, Start, SteppingDown},
		"a pod of a cluster the operator does not manage goes at once": {
			with(func(o *Observed) { o.Managed = false }), true, false, Forget, NotManaged},
		"a standby goes at once": {
			with(func(o *Observed) { o.Active = "bao-1" }), true, false, Keep, NotActive},
		"with no active server nothing is handed over and the pod goes": {
			with(func(o *Observed) { o.Active = "" }), true, false, Keep, ClusterUnhealthy},
		"an unhealthy voter lets the active server go, the budget decides": {
			with(func(o *Observed) { o.AllVotersHealthy = false }), true, false, Keep, ClusterUnhealthy},
		"no failure tolerance lets the active server go": {
			with(func(o *Observed) { o.FailureTolerance = 0 }), true, false, Keep, ClusterUnhealthy},
		"an unreadable Raft state lets the active server go": {
			with(func(o *Observed) { o.RaftKnown = false }), true, false, Keep, ClusterUnhealthy},
		"the guard turned off lets the active server go": {
			with(func(o *Observed) { o.Bound = 0 }), true, false, Forget, GuardOff},
		"a step-down under way keeps the eviction waiting without asking again": {
			with(refusedAt(5*time.Second, 0)), false, false, Keep, SteppingDown},
		"a server still active after ReaskAfter is asked again": {
			with(refusedAt(ReaskAfter, 0)), false, true, Keep, SteppingDown},
		"an election under way (no active server) keeps the eviction waiting": {
			with(func(o *Observed) { refusedAt(3*time.Second, 0)(o); o.Active = "" }), false, false, Keep, SteppingDown},
		"another server active but this one not caught up keeps it waiting": {
			with(func(o *Observed) { refusedAt(3*time.Second, 0)(o); o.Active = "bao-1" }), false, false, Keep, SteppingDown},
		"another server active and this one a caught-up standby lets it go and forgets": {
			with(func(o *Observed) { refusedAt(3*time.Second, 0)(o); o.Active, o.PodCaughtUp = "bao-1", true }),
			true, false, Forget, SteppedDown},
		"the bound reached lets the pod go even while it is still active": {
			with(refusedAt(time.Minute, 50*time.Second)), true, false, Keep, TimeBoundReached},
		"leadership moved by the time the bound ran out: the pod goes as stepped down and is forgotten": {
			with(func(o *Observed) { refusedAt(2*time.Minute, 0)(o); o.Active, o.PodCaughtUp = "bao-1", true }),
			true, false, Forget, SteppedDown},
		"the bound reached during an unhealthy spell still lets the pod go": {
			with(func(o *Observed) { refusedAt(2*time.Minute, 0)(o); o.RaftKnown = false }), true, false, Keep, TimeBoundReached},
		"a standby waits while another server catches up with the leader": {
			with(func(o *Observed) { o.Active, o.PeersProblem = "bao-1", catchingUp }), false, false, Start, PeerCatchingUp},
		"a standby refused so goes once every other server is caught up, and is forgotten": {
			with(func(o *Observed) { o.Active, o.FirstRefusal, o.Now = "bao-1", t0, t0.Add(3*time.Second) }),
			true, false, Forget, PeersCaughtUp},
		"a standby refused so keeps waiting while the other server still catches up": {
			with(func(o *Observed) {
				o.Active, o.PeersProblem, o.FirstRefusal, o.Now = "bao-1", catchingUp, t0, t0.Add(3*time.Second)
			}), false, false, Keep, PeerCatchingUp},
		"a standby refused so goes at the bound": {
			with(func(o *Observed) {
				o.Active, o.PeersProblem, o.FirstRefusal, o.Now = "bao-1", catchingUp, t0, t0.Add(time.Minute)
			}),
			true, false, Keep, TimeBoundReached},
		"the active server steps down while another server catches up, and waits": {
			with(func(o *Observed) { o.PeersProblem = catchingUp }), false, true, Start, SteppingDown},
		"a stepped-down server waits while another server catches up": {
			with(func(o *Observed) {
				refusedAt(3*time.Second, 0)(o)
				o.Active, o.PodCaughtUp, o.PeersProblem = "bao-1", true, catchingUp
			}), false, false, Keep, PeerCatchingUp},
		"an unhealthy cluster is not held up by a server catching up": {
			with(func(o *Observed) { o.Active, o.PeersProblem, o.AllVotersHealthy = "bao-1", catchingUp, false }),
			true, false, Keep, ClusterUnhealthy},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := Decide(tc.o)
			if d.Allow != tc.allow || d.StepDown != tc.stepDown || d.Memory != tc.memory || d.Reason != tc.reason {
				t.Fatalf("got allow=%v stepDown=%v memory=%v reason=%s (%s); want %v %v %v %s",
					d.Allow, d.StepDown, d.Memory, d.Reason, d.Message, tc.allow, tc.stepDown, tc.memory, tc.reason)
			}
			if !d.Allow && (d.RetryAfter <= 0 || d.RetryAfter > MaxRetryAfter) {
				t.Fatalf("a refusal suggests Retry-After %s", d.RetryAfter)
			}
		})
	}
}

// TestRetryAfterNeverPassesTheBound: the last refusal suggests a retry no
// later than the moment the bound lets the pod go.
func TestRetryAfterNeverPassesTheBound(t *testing.T) {
	d := Decide(with(refusedAt(time.Minute-time.Second/2, 0)))
	if d.Allow || d.RetryAfter != time.Second/2 {
		t.Fatalf("got allow=%v retry after %s; want a refusal with 500ms", d.Allow, d.RetryAfter)
	}
}

func FuzzDecide(f *testing.F) {
	f.Add(true, int64(60), "bao-0", "bao-0", true, true, 1, false, false, int64(-1), int64(0), int64(0))
	f.Add(true, int64(60), "bao-0", "bao-1", true, true, 1, true, false, int64(10), int64(5), int64(20))
	f.Add(false, int64(0), "a", "", false, false, 0, false, true, int64(70), int64(0), int64(1))
	f.Add(true, int64(60), "bao-0", "bao-1", true, true, 1, false, true, int64(10), int64(-1), int64(20))
	f.Fuzz(func(t *testing.T, managed bool, boundS int64, pod, active string, raft, allHealthy bool, tolerance int,
		caughtUp, peerBehind bool, firstS, askedS, nowS int64) {
		o := Observed{Now: t0.Add(time.Duration(nowS%1000) * time.Second), Bound: time.Duration(boundS%200) * time.Second,
			Managed: managed, Pod: pod, Active: active, RaftKnown: raft, AllVotersHealthy: allHealthy,
			FailureTolerance: tolerance, PodCaughtUp: caughtUp}
		if peerBehind {
			o.PeersProblem = catchingUp
		}
		if firstS >= 0 {
			o.FirstRefusal = t0.Add(time.Duration(firstS%1000) * time.Second)
			if askedS >= 0 { // else refused as a standby: never asked to step down
				o.LastStepDown = o.FirstRefusal.Add(time.Duration(askedS%100) * time.Second)
			}
		}
		checkInvariants(t, o, Decide(o))
	})
}

func checkInvariants(t *testing.T, o Observed, d Decision) {
	t.Helper()
	remembered := !o.FirstRefusal.IsZero()
	if !d.Allow && (!o.Managed || o.Bound <= 0) {
		t.Fatalf("refused a pod it does not manage or with the guard off: %+v -> %+v", o, d)
	}
	// The bound: a refusal either starts the clock or comes before it ran out.
	if !d.Allow && !(d.Memory == Start && !remembered) && !(remembered && o.Now.Before(o.FirstRefusal.Add(o.Bound))) {
		t.Fatalf("refused past the bound: %+v -> %+v", o, d)
	}
	if !d.Allow && (d.RetryAfter <= 0 || d.RetryAfter > o.Bound) {
		t.Fatalf("a refusal without a sensible Retry-After: %+v -> %+v", o, d)
	}
	healthy := o.Active != "" && o.RaftKnown && o.AllVotersHealthy && o.FailureTolerance > 0
	// A first refusal only in a healthy cluster, and of a standby only
	// while another server catches up.
	if !d.Allow && !remembered && (!healthy || (o.Active != o.Pod && o.PeersProblem == "")) {
		t.Fatalf("blocked a standby with every server caught up, or an unhealthy cluster: %+v -> %+v", o, d)
	}
	// Before the bound, no server of a healthy cluster goes while another
	// catches up: the leader could lose the quorum it can reach.
	beforeBound := !remembered || o.Now.Before(o.FirstRefusal.Add(o.Bound))
	if d.Allow && o.Managed && o.Bound > 0 && o.PeersProblem != "" && beforeBound && (remembered || healthy) {
		t.Fatalf("let a server go while another catches up: %+v -> %+v", o, d)
	}
	if d.StepDown && (d.Allow || o.Active != o.Pod || o.Active == "") {
		t.Fatalf("asked a server that is not active, or while letting it go: %+v -> %+v", o, d)
	}
	if d.Memory == Start && (remembered || d.Allow) {
		t.Fatalf("restarted the clock: %+v -> %+v", o, d)
	}
	// Before the bound, a pod it refused goes only once another server is
	// active, and, if it was refused as the active server, once it is a
	// caught-up standby.
	if d.Allow && remembered && o.Managed && o.Bound > 0 && o.Now.Before(o.FirstRefusal.Add(o.Bound)) &&
		(o.Active == "" || o.Active == o.Pod || (!o.LastStepDown.IsZero() && !o.PodCaughtUp)) {
		t.Fatalf("let the active server go before leadership moved: %+v -> %+v", o, d)
	}
}

// TestTheBoundSaysWhatTheGuardWaitedFor: the message of an eviction let
// through at the bound (a Warning event) names what never happened.
func TestTheBoundSaysWhatTheGuardWaitedFor(t *testing.T) {
	cases := map[string]struct {
		o    Observed
		want string
	}{
		"the active server kept leading": {with(refusedAt(time.Minute, 50*time.Second)), "did not hand over leadership"},
		"another server kept catching up": {with(func(o *Observed) {
			o.Active, o.PeersProblem, o.FirstRefusal, o.Now = "bao-1", catchingUp, t0, t0.Add(time.Minute)
		}), "another server was still not caught up with the leader (" + catchingUp + ")"},
		"the stepped-down server stayed behind": {with(func(o *Observed) {
			refusedAt(time.Minute, 0)(o)
			o.Active = "bao-1"
		}), "stepped down but was not a caught-up standby"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := Decide(tc.o)
			if d.Reason != TimeBoundReached || !strings.Contains(d.Message, tc.want) {
				t.Fatalf("got %s: %q; want %s with %q", d.Reason, d.Message, TimeBoundReached, tc.want)
			}
		})
	}
}
