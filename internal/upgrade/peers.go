package upgrade

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PeersProblem says why releasing the pod named released could cost
// quorum; "" when it may go. The rollout releases a pod, and the drain
// guard lets an eviction through, by this one rule. Every other server must be, in this very
// observation, Ready and unsealed, and every other voter healthy and
// caught up as the leader's autopilot sees it; with three voters or more,
// autopilot must also count a failure tolerance of at least one. The
// preflight checked this before the rollout began, but a server that was
// not rolled can crash in the middle of it, and a StatefulSet update does
// not heed the PodDisruptionBudget: without this check the operator would
// take a second server down by its own hand.
func PeersProblem(o Observed, released string) string {
	for _, p := range sortedPods(o.Pods) {
		if p.Name == released {
			continue
		}
		if !p.Ready {
			return fmt.Sprintf("%s is not Ready%s", p.Name, p.Container.describe())
		}
		if h, ok := o.Health[p.Name]; !ok || !h.Initialized || h.Sealed {
			return fmt.Sprintf("%s does not answer sys/health as initialized and unsealed", p.Name)
		}
	}
	if o.Replicas <= 1 {
		return "" // a single server has no quorum to keep: its upgrade is a restart
	}
	if o.Raft == nil {
		return "the Raft state cannot be read, so quorum cannot be checked: " + o.RaftProblem
	}
	voters := 0
	for _, id := range sortedIDs(o.Raft.Servers) {
		s := o.Raft.Servers[id]
		if !s.Voter {
			continue
		}
		voters++
		if id == released {
			continue
		}
		if !s.Healthy {
			return fmt.Sprintf("autopilot reports the voter %s unhealthy%s", id, s.seen())
		}
		if !s.Received {
			return fmt.Sprintf("the leader's replication does not reach the voter %s: its Raft log ends at %d, the leader's at %d%s",
				id, s.Index, s.LeaderIndex, s.seen())
		}
		if !s.LagKnown || s.Lag > o.Settings.MaxRaftLag {
			return fmt.Sprintf("the voter %s trails the leader by %s (at most %d count as caught up)", id, lagText(s), o.Settings.MaxRaftLag)
		}
	}
	if o.Replicas >= 3 && voters < 3 {
		return fmt.Sprintf("autopilot counts %d voters for %d servers: releasing one could cost quorum", voters, o.Replicas)
	}
	if voters >= 3 && o.Raft.FailureTolerance < 1 {
		return fmt.Sprintf("autopilot's failure tolerance is %d with %d voters: the cluster cannot lose a server now",
			o.Raft.FailureTolerance, voters)
	}
	return ""
}

func sortedPods(pods []Pod) []Pod {
	out := append([]Pod(nil), pods...)
	sort.Slice(out, func(i, j int) bool { return out[i].Ordinal < out[j].Ordinal })
	return out
}

func sortedIDs(servers map[string]Server) []string {
	ids := make([]string, 0, len(servers))
	for id := range servers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// maxMessage bounds the part of a termination message a condition repeats.
const maxMessage = 200

// describe says, in parentheses after a pod's name, what the kubelet
// reports of its container: "" when it reports nothing that helps. The
// termination message is OpenBao's (or the kubelet's) last word on why
// the server stopped, such as "cannot have DefaultLeaseTTL larger than
// MaxLeaseTTL"; only its last line is kept, cut to maxMessage bytes.
func (c Container) describe() string {
	var parts []string
	if c.Waiting != "" {
		parts = append(parts, c.Waiting)
	}
	if c.Restarts > 0 {
		parts = append(parts, fmt.Sprintf("restarted %d times", c.Restarts))
	}
	if c.LastReason != "" || c.LastExitCode != 0 {
		last := fmt.Sprintf("its last run ended with exit code %d", c.LastExitCode)
		if c.LastReason != "" {
			last += " (" + c.LastReason + ")"
		}
		if m := lastLine(c.LastMessage); m != "" {
			last += ": " + strconv.Quote(m)
		}
		parts = append(parts, last)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

func lastLine(msg string) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	line := strings.TrimSpace(lines[len(lines)-1])
	if len(line) <= maxMessage {
		return line
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return line[:cut] + "…"
}
