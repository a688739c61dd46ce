package membership

import (
	"fmt"
	"time"
)

// ReadObserved is what DecideRead looks at: the read replicas' side of the
// membership (spec.readReplicas), once the cluster is initialized.
type ReadObserved struct {
	// Wanted says spec.readReplicas is set; Spec is its replicas (0 when
	// unset). Current is the read StatefulSet's replica count as applied,
	// 0 before it exists.
	Wanted  bool
	Spec    int32
	Current int32
	// Name is the read StatefulSet's name; its pods, and their Raft node
	// ids, are <name>-<ordinal>.
	Name string
	// Servers is the Raft membership by node id, as in Observed; nil when
	// OpenBao could not be asked, and Problem says why. Read only for a
	// scale-down.
	Servers map[string]Server
	Problem string
}

// ReadDecision is what the reconciler carries out for the read replicas.
type ReadDecision struct {
	// Render says the read replica objects are rendered at all: while
	// spec.readReplicas is set, and after it was removed until the last
	// read replica left Raft.
	Render bool
	// Replicas is what the read StatefulSet runs after this pass.
	Replicas int32
	// RemovePeer is the non-voter to remove from the Raft configuration;
	// the reconciler renders Replicas only once the removal succeeded, and
	// keeps Current otherwise.
	RemovePeer string
	// Message says what holds a scale-down, "" when nothing does; Blocked
	// says it needs a person.
	Message string
	Blocked bool
	Requeue time.Duration
}

// DecideRead returns the read replica count and the membership change of
// this pass. A read replica is a Raft non-voter: it counts neither toward
// quorum nor autopilot's failure tolerance, so its scale-up and scale-down
// wait for no quorum check, and no rollout. Its scale-down still takes
// each departing server out of the Raft configuration before its pod (and,
// with the read StatefulSet's retention policy, its volume, a copy of what
// the voters hold) goes, one at a time from the highest ordinal: a peer
// left behind would count as a failed server until autopilot's dead-server
// cleanup. It never removes a voter: a departing read replica the Raft
// configuration calls a voter blocks the scale-down for a person.
func DecideRead(o ReadObserved) ReadDecision {
	target := o.Spec
	if !o.Wanted {
		target = 0
	}
	render := o.Wanted || o.Current > 0
	if target >= o.Current {
		return ReadDecision{Render: render, Replicas: target}
	}
	hold := ReadDecision{Render: true, Replicas: o.Current, Requeue: retry}
	departing := fmt.Sprintf("%s-%d", o.Name, o.Current-1)
	if o.Servers == nil {
		hold.Message = fmt.Sprintf("scaling the read replicas down to %d: %s cannot leave the Raft configuration yet: %s",
			target, departing, o.Problem)
		hold.Blocked = true
		return hold
	}
	s, member := o.Servers[departing]
	switch {
	case !member:
		return ReadDecision{Render: true, Replicas: o.Current - 1, Requeue: retry}
	case s.Voter:
		hold.Message = fmt.Sprintf("scaling the read replicas down to %d: the Raft configuration lists %s as a voter, "+
			"which a read replica never is; the operator removes no voter through the read replicas. Remove it from "+
			"the Raft configuration yourself once the voters can spare it", target, departing)
		hold.Blocked = true
		return hold
	}
	return ReadDecision{Render: true, Replicas: o.Current - 1, RemovePeer: departing, Requeue: retry,
		Message: fmt.Sprintf("scaling the read replicas down to %d: %s leaves the Raft configuration, then its pod goes", target, departing)}
}
