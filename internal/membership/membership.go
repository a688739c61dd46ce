// Package membership decides how many servers the StatefulSet runs once a
// cluster is initialized, and takes departing servers out of the Raft
// configuration before their pods go: a scale-down removes one peer at a
// time, the highest ordinal first, stepping it down first if it leads,
// and never while the servers that stay could not keep quorum. A
// scale-up is rendered at once, unless a volume left by a peer removed at
// an earlier scale-down sits at one of the new ordinals: a server started
// on a removed peer's Raft data never rejoins, so that volume goes first.
// A change of spec.replicas during a rollout waits for it. It is pure.
package membership

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/openbao/operator/api/v1alpha1"
)

// Server is one Raft server as the leader's autopilot state reports it.
type Server struct {
	Voter   bool
	Healthy bool
}

// Observed is what Decide looks at.
type Observed struct {
	// Spec is spec.replicas; Current is the StatefulSet's replica count as
	// applied, 0 before it exists.
	Spec    int32
	Current int32
	// Name is the StatefulSet's name; pods are <name>-<ordinal>, and so
	// are their Raft node ids.
	Name string
	// RolloutRunning says status.upgrade is set.
	RolloutRunning bool
	// Servers is the Raft membership by node id; nil when OpenBao could
	// not be asked, and Problem says why.
	Servers map[string]Server
	Problem string
	// ActivePod is the pod of the active server, "" when none is known.
	ActivePod string
	// LeftVolumes are the data volumes that exist at the ordinals a
	// scale-up adds, by the node id of their ordinal; Terminating ones are
	// already being deleted.
	LeftVolumes map[string]Volume
	// ClusterCreated is the OpenBaoCluster's creation time and ResetAt
	// when a bootstrap reset wiped pod-0 (zero without one). A volume
	// older than either holds data of another Raft cluster (one kept by
	// deletionPolicy Retain, or the one the reset discarded): the Raft
	// configuration read now cannot speak for it, so it is never deleted.
	ClusterCreated time.Time
	ResetAt        time.Time
}

// Volume is a server's data volume (PersistentVolumeClaim).
type Volume struct {
	Name        string
	Terminating bool
	Created     time.Time
}

// provablyOurs says the volume was made by this cluster after its Raft
// configuration began: not before the OpenBaoCluster (timestamps have
// whole seconds), and not before a bootstrap reset.
func (o Observed) provablyOurs(v Volume) bool {
	if v1alpha1.CreatedBefore(v.Created, o.ClusterCreated) {
		return false
	}
	return o.ResetAt.IsZero() || !v1alpha1.CreatedBefore(v.Created, o.ResetAt)
}

// Decision is what the reconciler carries out.
type Decision struct {
	// Replicas is what the StatefulSet runs after this pass.
	Replicas int32
	// StepDown names the departing pod whose server must step down first.
	StepDown string
	// RemovePeer is the node id to remove from the Raft configuration; the
	// reconciler renders Replicas only once the removal succeeded, and
	// keeps Current otherwise.
	RemovePeer string
	// DeleteVolumes are the volumes of removed peers to delete before a
	// scale-up renders the pods that would start on them.
	DeleteVolumes []string
	// Message says what holds a change of spec.replicas, "" when nothing
	// does; Blocked says it needs a person.
	Message string
	Blocked bool
	Requeue time.Duration
}

// Requeue while a scale-down proceeds.
const retry = 2 * time.Second

// Decide returns the replica count and the membership change of this pass.
func Decide(o Observed) Decision {
	switch {
	case o.Current == 0 || o.Spec == o.Current:
		return Decision{Replicas: o.Spec}
	case o.RolloutRunning:
		return Decision{Replicas: o.Current, Message: fmt.Sprintf(
			"spec.replicas %d waits until the rollout under way is complete; the StatefulSet keeps %d", o.Spec, o.Current)}
	case o.Spec > o.Current:
		return scaleUp(o)
	}
	return scaleDown(o)
}

// scaleUp renders spec.replicas once no new ordinal has a volume of a
// server that left the Raft configuration. A volume whose server is still
// a member (its pod went without a peer removal) holds current data and
// stays: that server rejoins.
func scaleUp(o Observed) Decision {
	if len(o.LeftVolumes) == 0 {
		return Decision{Replicas: o.Spec}
	}
	hold := Decision{Replicas: o.Current, Requeue: retry}
	if o.Servers == nil {
		hold.Message = fmt.Sprintf("scaling up to %d: the volumes at the new ordinals cannot be checked against the Raft "+
			"configuration yet: %s", o.Spec, o.Problem)
		hold.Blocked = true
		return hold
	}
	var stale, going, foreign []string
	for _, id := range slices.Sorted(maps.Keys(o.LeftVolumes)) {
		v := o.LeftVolumes[id]
		if _, member := o.Servers[id]; member {
			continue
		}
		switch {
		case v.Terminating:
			going = append(going, v.Name)
		case !o.provablyOurs(v):
			foreign = append(foreign, v.Name)
		default:
			stale = append(stale, v.Name)
		}
	}
	if len(foreign) > 0 {
		hold.Blocked = true
		hold.Message = fmt.Sprintf("scaling up to %d: the volumes %s at the new ordinals are not members of the Raft configuration "+
			"and are older than this cluster's own (created before the OpenBaoCluster or before its bootstrap reset): they may "+
			"hold the only copy of a retained cluster's data, so the operator deletes nothing. Delete them yourself if they are "+
			"stale, or recover their data first", o.Spec, strings.Join(foreign, ", "))
		return hold
	}
	if len(stale)+len(going) == 0 {
		return Decision{Replicas: o.Spec}
	}
	hold.DeleteVolumes = stale
	hold.Message = fmt.Sprintf("scaling up to %d: deleting the volumes %s of servers that left the Raft configuration at "+
		"an earlier scale-down; a server started on one would never rejoin", o.Spec, strings.Join(append(stale, going...), ", "))
	return hold
}

func scaleDown(o Observed) Decision {
	hold := Decision{Replicas: o.Current, Requeue: retry}
	departing := fmt.Sprintf("%s-%d", o.Name, o.Current-1)
	if o.Servers == nil {
		hold.Message = fmt.Sprintf("scaling down to %d: %s cannot leave the Raft configuration yet: %s", o.Spec, departing, o.Problem)
		hold.Blocked = true
		return hold
	}
	if _, member := o.Servers[departing]; !member {
		return Decision{Replicas: o.Current - 1, Requeue: retry}
	}
	if o.ActivePod == departing {
		hold.StepDown = departing
		hold.Message = fmt.Sprintf("scaling down to %d: %s leads, so it steps down before it leaves the Raft configuration", o.Spec, departing)
		return hold
	}
	if healthy, need := stayingQuorum(o, departing); healthy < need {
		hold.Message = fmt.Sprintf("scaling down to %d: removing %s would leave %d healthy voters where quorum needs %d; "+
			"it waits for the others to be healthy", o.Spec, departing, healthy, need)
		hold.Blocked = true
		return hold
	}
	return Decision{Replicas: o.Current - 1, RemovePeer: departing, Requeue: retry,
		Message: fmt.Sprintf("scaling down to %d: %s leaves the Raft configuration, then its pod goes", o.Spec, departing)}
}

// stayingQuorum counts the healthy voters that stay and the quorum their
// configuration needs.
func stayingQuorum(o Observed, departing string) (healthy, need int) {
	voters := 0
	for id, s := range o.Servers {
		if id == departing || !s.Voter {
			continue
		}
		voters++
		if s.Healthy {
			healthy++
		}
	}
	return healthy, voters/2 + 1
}
