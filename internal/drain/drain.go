// Package drain decides what the operator answers to an eviction of a
// server pod (the Eviction API, as kubectl drain and cluster autoscalers
// use it): let it through, or first move leadership away from the server
// the pod runs and answer 429 TooManyRequests until another server is
// active and the evicted one is a caught-up standby. An eviction of any
// server waits, too, while another server is Ready and healthy in
// autopilot's eyes but not caught up with the leader (the rollout's
// release rule, upgrade.PeersProblem): a restarted server is Ready and
// echoes to the leader seconds before the leader's replication reaches it
// again (the leader's dial to the replaced pod's old address waits out a
// 10 s timeout), and the PodDisruptionBudget, which counts Ready pods,
// would let a second server go meanwhile, leaving the leader without a
// quorum it can reach.
//
// The guard only ever adds a bounded wait: it never refuses an eviction of
// a pod it does not manage or of a cluster that is already unhealthy, a
// standby's only while another server catches up, and never refuses one
// pod for longer than Observed.Bound. The PodDisruptionBudget still
// decides how many servers may go.
package drain

import "time"

// Reasons of a Decision: low-cardinality, for logs and events.
const (
	NotManaged       = "NotManaged"
	NotActive        = "NotActive"
	ClusterUnhealthy = "ClusterUnhealthy"
	GuardOff         = "GuardOff"
	SteppedDown      = "SteppedDown"
	TimeBoundReached = "TimeBoundReached"
	SteppingDown     = "SteppingDown"
	PeerCatchingUp   = "PeerCatchingUp"
	PeersCaughtUp    = "PeersCaughtUp"
)

// ReaskAfter is how long the guard waits for a server it asked to step
// down before it asks again (the first request may have reached it just
// before an election it then won again).
const ReaskAfter = 10 * time.Second

// MaxRetryAfter caps the Retry-After the refusal suggests: client-go
// (kubectl drain, the autoscaler) retries a 429 after it by itself, and an
// election takes about a second.
const MaxRetryAfter = time.Second

// Observed is everything Decide looks at for one eviction.
type Observed struct {
	Now time.Time
	// Bound is the longest the guard refuses one pod, from its first
	// refusal; zero or less turns the guard off.
	Bound time.Duration
	// Managed: the pod is a voter pod of a cluster this operator manages.
	Managed bool
	// Pod is the evicted pod; Active is the pod whose server says it is
	// active, "" when none said so.
	Pod, Active string
	// RaftKnown: the leader's autopilot state was read; then
	// AllVotersHealthy and FailureTolerance are its verdict.
	RaftKnown        bool
	AllVotersHealthy bool
	FailureTolerance int
	// PodCaughtUp: the evicted pod's server is a healthy voter whose log
	// trails the leader's by at most the cluster's maxRaftLag.
	PodCaughtUp bool
	// PeersProblem says why another server going now could cost quorum
	// (upgrade.PeersProblem for the evicted pod); "" when none.
	PeersProblem string
	// FirstRefusal and LastStepDown are the guard's memory of this pod
	// (by namespace, name and UID); zero when it remembers none.
	FirstRefusal, LastStepDown time.Time
}

// Memory is what the caller does with its memory of the pod.
type Memory int

const (
	// Keep leaves the memory as it is (none stays none).
	Keep Memory = iota
	// Start remembers Now as the first refusal.
	Start
	// Forget drops the memory of the pod.
	Forget
)

// Decision is the answer to one eviction and its effects.
type Decision struct {
	// Allow lets the eviction through to the PodDisruptionBudget check.
	Allow bool
	// StepDown asks the pod's server to step down now (and remembers Now
	// as the last ask); only ever with a refusal of the active server.
	StepDown bool
	Memory   Memory
	// Reason is one of the constants above; Message says it to a person.
	Reason, Message string
	// RetryAfter is the wait a refusal suggests (> 0 on every refusal).
	RetryAfter time.Duration
}

// Decide answers one eviction.
func Decide(o Observed) Decision {
	remembered := !o.FirstRefusal.IsZero()
	asked := !o.LastStepDown.IsZero() // the pod was refused as the active server's
	switch {
	case !o.Managed:
		return allow(NotManaged, "not a server pod of a cluster this operator manages", Forget)
	case o.Bound <= 0:
		return allow(GuardOff, "the drain guard is off", Forget)
	case remembered && asked && o.Active != "" && o.Active != o.Pod && o.PodCaughtUp && o.PeersProblem == "":
		return allow(SteppedDown, "another server is active and this one is a caught-up standby", Forget)
	case remembered && !asked && o.Active != "" && o.Active != o.Pod && o.PeersProblem == "":
		return allow(PeersCaughtUp, "every other server is caught up with the leader", Forget)
	case remembered && !o.Now.Before(o.FirstRefusal.Add(o.Bound)):
		// Kept, so that a retry after the PodDisruptionBudget refused
		// does not start another wait.
		return allow(TimeBoundReached, boundReached(o), Keep)
	case !remembered && o.Active == "":
		return allow(ClusterUnhealthy, "no server says it is active; nothing to hand over", Keep)
	case !remembered && !healthy(o):
		return allow(ClusterUnhealthy, "the cluster is not healthy (not every voter healthy, no failure tolerance, "+
			"or its Raft state unreadable); the PodDisruptionBudget decides", Keep)
	case !remembered && o.Active != o.Pod && o.PeersProblem == "":
		return allow(NotActive, "the server is a standby", Keep)
	case !remembered:
		return refuse(o, o.Now, o.Active == o.Pod, Start)
	default:
		reask := o.Active == o.Pod && !o.Now.Before(o.LastStepDown.Add(ReaskAfter))
		return refuse(o, o.FirstRefusal, reask, Keep)
	}
}

// boundReached says what the guard waited for in vain.
func boundReached(o Observed) string {
	what := "the server did not hand over leadership"
	switch {
	case o.Active != "" && o.Active != o.Pod && o.PeersProblem != "":
		what = "another server was still not caught up with the leader (" + o.PeersProblem + ")"
	case o.Active != "" && o.Active != o.Pod:
		what = "the server stepped down but was not a caught-up standby"
	}
	return what + " " + o.Bound.String() + " after the first refusal; the eviction goes ahead"
}

func healthy(o Observed) bool {
	return o.RaftKnown && o.AllVotersHealthy && o.FailureTolerance > 0
}

func allow(reason, message string, m Memory) Decision {
	return Decision{Allow: true, Reason: reason, Message: message, Memory: m}
}

// refuse answers 429 while leadership moves or another server catches
// up; first is the first refusal, from which the bound runs.
func refuse(o Observed, first time.Time, stepDown bool, m Memory) Decision {
	// A memory from after Now (a clock set back) waits no longer than
	// one bound from now.
	left := min(first.Add(o.Bound).Sub(o.Now), o.Bound)
	retry := min(MaxRetryAfter, left)
	latest := " (at the latest " + left.Round(time.Second).String() + " from now)"
	if o.PeersProblem != "" && (o.Active != o.Pod || o.Active == "") {
		return Decision{StepDown: stepDown, Memory: m, Reason: PeerCatchingUp, RetryAfter: retry,
			Message: "another server is not caught up with the leader (" + o.PeersProblem + "); the eviction waits until " +
				"it is, so that the leader keeps a quorum it can reach" + latest}
	}
	return Decision{StepDown: stepDown, Memory: m, Reason: SteppingDown, RetryAfter: retry,
		Message: "the pod runs the active OpenBao server; the operator asked it to step down and lets the eviction " +
			"through once another server is active, this one is a caught-up standby and every other server is caught up" + latest}
}
