// Package raftstatus turns what autopilot reports into status.raft and
// decides when that copy is old enough to read again.
package raftstatus

import (
	"math"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/upgrade"
)

// UnsettledInterval is how soon a copy that does not show the cluster
// settled is read again: while servers join, are promoted or recover, the
// copy of a resync period ago would tell a state long gone.
const UnsettledInterval = 10 * time.Second

// Due says whether status.raft should be read again: never read; or the
// copy shows the cluster unsettled (Settled), or the pods show a server
// down (serversDown: sealed or not ready) whatever the copy says, and it is
// UnsettledInterval old; or it is most of a period old. Without
// serversDown a settled copy would hide a sealed voter, and the failure
// tolerance its alert reads, until the next resync. The tenth of slack
// lets the resync pass that comes one period after the last read refresh
// it, instead of the pass after that. Without a period (no resync
// configured) a settled copy of a cluster with every server up is not
// read again: reading on every pass is what this guards against.
//
// readAt is when the operator last read the state, when it remembers (a
// read that left the copy as it was, see Next); the later of it and the
// copy's observedAt counts.
func Due(last *v1alpha1.RaftStatus, want Members, now time.Time, period time.Duration, serversDown bool, readAt time.Time) bool {
	if last == nil {
		return true
	}
	read := last.ObservedAt.Time
	if readAt.After(read) {
		read = readAt
	}
	age := now.Sub(read)
	if serversDown || !Settled(last, want) {
		return age >= UnsettledInterval
	}
	return period > 0 && age >= period-period/10
}

// Members is what the Raft configuration of a settled cluster holds:
// spec.replicas voters and, with read replicas, as many non-voters.
type Members struct {
	Voters, NonVoters int32
}

// Settled says the copy shows what the cluster should be: as many voters
// as replicas and as many non-voters as read replicas, every one healthy,
// and autopilot content. A new voter autopilot has not promoted yet
// counts as a non-voter, so the copy is not settled until it is.
func Settled(last *v1alpha1.RaftStatus, want Members) bool {
	if last == nil || !last.Healthy || int32(len(last.Voters)) != want.Voters ||
		int32(len(last.Servers)) != want.Voters+want.NonVoters {
		return false
	}
	for _, s := range last.Servers {
		if !s.Healthy {
			return false
		}
	}
	return true
}

// Next is the copy status.raft holds after a read: fresh, unless last and
// fresh both show the cluster settled and tell the same (leader, health,
// failure tolerance, every server's vote and health); then last stays as
// it is. Rewriting it would only move the Raft indexes, contacts and
// observedAt: a status write per resync period for a cluster where nothing
// happened.
func Next(last, fresh *v1alpha1.RaftStatus, want Members) *v1alpha1.RaftStatus {
	if !Settled(last, want) || !Settled(fresh, want) || !sameVerdict(last, fresh) {
		return fresh
	}
	return last
}

func sameVerdict(a, b *v1alpha1.RaftStatus) bool {
	if a.Leader != b.Leader || a.Healthy != b.Healthy || a.FailureTolerance != b.FailureTolerance ||
		len(a.Servers) != len(b.Servers) {
		return false
	}
	for i := range a.Servers {
		x, y := a.Servers[i], b.Servers[i]
		if x.ID != y.ID || x.Voter != y.Voter || x.Healthy != y.Healthy {
			return false
		}
	}
	return true
}

// Of builds status.raft from the autopilot state and the lag the operator
// computed for each server (raft.Servers, keyed by node id), which is
// fresher than autopilot's own.
func Of(state openbao.AutopilotState, raft *upgrade.Raft, now time.Time) *v1alpha1.RaftStatus {
	out := &v1alpha1.RaftStatus{
		ObservedAt: metav1.NewTime(now), Leader: state.Leader, Healthy: state.Healthy,
		FailureTolerance: clampInt32(int64(state.FailureTolerance)),
	}
	for id, s := range state.Servers {
		server := v1alpha1.RaftServer{
			ID: id, Voter: s.Status == "voter" || s.Status == "leader", Healthy: s.Healthy,
			LastIndex: clampIndex(s.LastIndex),
		}
		if raft != nil {
			if known, ok := raft.Servers[id]; ok && known.LagKnown {
				server.Lag = clampIndex(known.Lag)
			}
		}
		if s.Status != "leader" {
			server.LastContact = &metav1.Duration{Duration: s.LastContact.Round(time.Millisecond)}
		}
		out.Servers = append(out.Servers, server)
	}
	// Map order is random; a sorted list keeps the status stable, so an
	// unchanged cluster is not written again.
	sort.Slice(out.Servers, func(i, j int) bool { return out.Servers[i].ID < out.Servers[j].ID })
	for _, s := range out.Servers {
		if s.Voter {
			out.Voters = append(out.Voters, s.ID)
		} else {
			out.NonVoters = append(out.NonVoters, s.ID)
		}
	}
	return out
}

func clampIndex(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

func clampInt32(v int64) int32 {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(v)
}
