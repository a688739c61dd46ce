package raftstatus

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/upgrade"
)

func TestDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	read := func(ago time.Duration) *v1alpha1.RaftStatus {
		return &v1alpha1.RaftStatus{ObservedAt: metav1.NewTime(now.Add(-ago))}
	}
	for _, tc := range []struct {
		name   string
		last   *v1alpha1.RaftStatus
		period time.Duration
		want   bool
	}{
		{"never read: due", nil, 10 * time.Minute, true},
		{"read a minute ago with a ten-minute period: not due", read(time.Minute), 10 * time.Minute, false},
		{"read just under a period ago (the resync pass): due", read(9*time.Minute + 30*time.Second), 10 * time.Minute, true},
		{"read two periods ago: due", read(20 * time.Minute), 10 * time.Minute, true},
		{"no resync period, never read: due", nil, 0, true},
		{"no resync period, read long ago: not due (no read on every pass)", read(24 * time.Hour), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Due(tc.last, now, tc.period); got != tc.want {
				t.Fatalf("Due = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOfKeepsEveryServerSortedWithTheMeasuredLag(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	state := openbao.AutopilotState{Healthy: true, FailureTolerance: 1, Leader: "bao-0", Servers: map[string]openbao.AutopilotServer{
		"bao-2": {Status: "non-voter", Healthy: false, LastIndex: 90, LastContact: 1500 * time.Microsecond},
		"bao-0": {Status: "leader", Healthy: true, LastIndex: 100},
		"bao-1": {Status: "voter", Healthy: true, LastIndex: 99, LastContact: 20 * time.Millisecond},
	}}
	raft := &upgrade.Raft{Servers: map[string]upgrade.Server{"bao-1": {Lag: 1, LagKnown: true}, "bao-2": {Lag: 10}}}
	got := Of(state, raft, now)
	if got.Leader != "bao-0" || !got.Healthy || got.FailureTolerance != 1 || !got.ObservedAt.Time.Equal(now) {
		t.Fatalf("cluster fields: %+v", got)
	}
	if len(got.Servers) != 3 || got.Servers[0].ID != "bao-0" || got.Servers[1].ID != "bao-1" || got.Servers[2].ID != "bao-2" {
		t.Fatalf("servers not sorted by id: %+v", got.Servers)
	}
	leader, voter, learner := got.Servers[0], got.Servers[1], got.Servers[2]
	if !leader.Voter || leader.LastContact != nil || leader.LastIndex != 100 {
		t.Errorf("leader: %+v", leader)
	}
	if !voter.Voter || voter.Lag != 1 || voter.LastContact.Duration != 20*time.Millisecond {
		t.Errorf("voter: %+v", voter)
	}
	if learner.Voter || learner.Healthy || learner.Lag != 0 || learner.LastContact.Duration != 2*time.Millisecond {
		t.Errorf("non-voter (lag unknown must stay 0, contact rounded to ms): %+v", learner)
	}
}
