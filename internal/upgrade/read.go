package upgrade

import (
	"fmt"
	"sort"
	"strings"

	"github.com/openbao/operator/api/v1alpha1"
)

// ReadReplicas is what a rollout of the voters looks at of the read
// replicas (spec.readReplicas). Their StatefulSet has no partition: its
// controller rolls them, one at a time and each once Ready, in the pass
// that renders a changed template, which is a pass before the voters'
// rollout can start (it starts once the voters' StatefulSet reports the
// new revision).
type ReadReplicas struct {
	// Replicas is the read StatefulSet's count; Observed says its
	// controller has seen its latest spec; Rolled says every pod runs the
	// update revision (currentRevision equals updateRevision and
	// updatedReplicas equals replicas).
	Replicas int32
	Observed bool
	Rolled   bool
	// Pods are the read replicas by name: Ready, unsealed by their own
	// service-registration label.
	Pods map[string]ReadPod
}

// ReadPod is one read replica as the rollout sees it.
type ReadPod struct {
	Ready, Unsealed bool
	// Why is what Kubernetes says holds a pod that is not Ready (the
	// scheduler's Unschedulable message, the container's waiting reason),
	// which a message about it repeats.
	Why string
}

// ReadBehind says why the read replicas are not yet all on the new
// template, Ready, unsealed, and healthy and caught up as the leader's
// autopilot sees them (the checks a voter passes before the next one is
// released); "" when they are, or there are none. The voters' rollout
// waits for it, so that a release that does not run shows on servers that
// hold no vote first.
func ReadBehind(r *ReadReplicas, raft *Raft, maxLag uint64) string {
	if r == nil || r.Replicas == 0 {
		return ""
	}
	if !r.Observed || !r.Rolled {
		return fmt.Sprintf("the StatefulSet controller has not rolled all %d read replicas onto the new template yet%s",
			r.Replicas, notReadyReads(r))
	}
	if int32(len(r.Pods)) < r.Replicas {
		return fmt.Sprintf("%d of %d read replicas have a pod", len(r.Pods), r.Replicas)
	}
	names := make([]string, 0, len(r.Pods))
	for name := range r.Pods {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := r.Pods[name]
		if !p.Ready || !p.Unsealed {
			return fmt.Sprintf("the read replica %s is not Ready and unsealed on the new template%s", name, because(p.Why))
		}
		if raft == nil {
			return "the Raft state cannot be read, so the read replicas cannot be checked"
		}
		s, ok := raft.Servers[name]
		if !ok || !s.Healthy {
			return fmt.Sprintf("autopilot does not report the read replica %s healthy", name)
		}
		if !s.LagKnown || s.Lag > maxLag {
			return fmt.Sprintf("the read replica %s trails the leader by %s (at most %d count as caught up)", name, lagText(s), maxLag)
		}
	}
	return ""
}

// notReadyReads names the read replicas whose pod is not Ready, and why.
func notReadyReads(r *ReadReplicas) string {
	var out []string
	for name, p := range r.Pods {
		if !p.Ready {
			out = append(out, name+" is not Ready"+because(p.Why))
		}
	}
	if len(out) == 0 {
		return ""
	}
	sort.Strings(out)
	return " (" + strings.Join(out, "; ") + ")"
}

func because(why string) string {
	if why == "" {
		return ""
	}
	return ": " + why
}

const readFirstText = "the read replicas roll first, so that a release that does not run shows on servers that hold no vote: "

// readFirst holds every voter while ReadBehind says the read replicas are
// not all rolled and caught up: at the start of a rollout (StepReadReplicas,
// timed from the rollout's start, when the read StatefulSet took the new
// template), and before any later release. It waits under
// spec.upgrade.podReadyTimeout, the wait of a released voter, and then
// halts the rollout as a voter's step does, until resumeRequest changes.
func readFirst(o Observed, up *v1alpha1.UpgradeStatus, d *Decision) bool {
	if behind := ReadBehind(o.Read, o.Raft, o.Settings.MaxRaftLag); behind != "" {
		return waitOrHalt(o, up, d, o.Settings.PodReadyTimeout, v1alpha1.ReasonPodReadyTimeout, readFirstText+behind)
	}
	if up.Step == StepReadReplicas {
		next(o, up, "")
		d.event(false, "ReadReplicasRolled", fmt.Sprintf("the %d read replicas run the new template, unsealed and caught up: "+
			"the voters roll now", o.Read.Replicas))
	}
	return true
}
