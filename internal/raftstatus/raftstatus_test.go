package raftstatus

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/upgrade"
)

func TestDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	settled := func(ago time.Duration) *v1alpha1.RaftStatus {
		return lists(&v1alpha1.RaftStatus{ObservedAt: metav1.NewTime(now.Add(-ago)), Healthy: true, Servers: []v1alpha1.RaftServer{
			{ID: "bao-0", Voter: true, Healthy: true}, {ID: "bao-1", Voter: true, Healthy: true}, {ID: "bao-2", Voter: true, Healthy: true}}})
	}
	forming := func(ago time.Duration) *v1alpha1.RaftStatus {
		r := settled(ago)
		r.Servers = r.Servers[:1] // read right after init, before the others joined
		return lists(r)
	}
	for _, tc := range []struct {
		name   string
		last   *v1alpha1.RaftStatus
		period time.Duration
		down   bool
		want   bool
	}{
		{"never read: due", nil, 10 * time.Minute, false, true},
		{"settled, read a minute ago with a ten-minute period: not due", settled(time.Minute), 10 * time.Minute, false, false},
		{"settled, read just under a period ago (the resync pass): due", settled(9*time.Minute + 30*time.Second), 10 * time.Minute, false, true},
		{"settled, read two periods ago: due", settled(20 * time.Minute), 10 * time.Minute, false, true},
		{"no resync period, never read: due", nil, 0, false, true},
		{"no resync period, settled, read long ago: not due (no read on every pass)", settled(24 * time.Hour), 0, false, false},
		{"forming, read 5 s ago: not yet", forming(5 * time.Second), 10 * time.Minute, false, false},
		{"forming, read 10 s ago: due, not a period later", forming(10 * time.Second), 10 * time.Minute, false, true},
		{"forming, no resync period: due all the same", forming(time.Minute), 0, false, true},
		{"settled copy but a server down (sealed), read 10 s ago: due, not a period later", settled(10 * time.Second), 10 * time.Minute, true, true},
		{"settled copy but a server down, read 5 s ago: not yet", settled(5 * time.Second), 10 * time.Minute, true, false},
		{"settled copy but a server down, no resync period: due", settled(time.Minute), 0, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Due(tc.last, Members{Voters: 3}, now, tc.period, tc.down, time.Time{}); got != tc.want {
				t.Fatalf("Due = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDueCountsARememberedRead: a read that left a settled copy as it was
// (Next) counts as the last read, so the next one is a period later, not
// on every pass after the copy's observedAt is a period old.
func TestDueCountsARememberedRead(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	last := lists(&v1alpha1.RaftStatus{ObservedAt: metav1.NewTime(now.Add(-time.Hour)), Healthy: true, Servers: []v1alpha1.RaftServer{
		{ID: "bao-0", Voter: true, Healthy: true}}})
	for _, tc := range []struct {
		name   string
		readAt time.Time
		want   bool
	}{
		{"copy an hour old, read a minute ago: not due", now.Add(-time.Minute), false},
		{"copy an hour old, read a period ago: due", now.Add(-10 * time.Minute), true},
		{"copy an hour old, no read remembered (an operator restart): due", time.Time{}, true},
		{"a remembered read older than the copy: the copy counts", now.Add(-2 * time.Hour), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Due(last, Members{Voters: 1}, now, 10*time.Minute, false, tc.readAt); got != tc.want {
				t.Fatalf("Due = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNext(t *testing.T) {
	at := func(minute int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 1, 12, minute, 0, 0, time.UTC)) }
	copyAt := func(minute int, edit func(*v1alpha1.RaftStatus)) *v1alpha1.RaftStatus {
		r := &v1alpha1.RaftStatus{ObservedAt: at(minute), Leader: "bao-0", Healthy: true, FailureTolerance: 1,
			Servers: []v1alpha1.RaftServer{
				{ID: "bao-0", Voter: true, Healthy: true, LastIndex: int64(100 * minute)},
				{ID: "bao-1", Voter: true, Healthy: true, LastIndex: int64(100*minute - 1), Lag: 1},
				{ID: "bao-2", Voter: true, Healthy: true, LastIndex: int64(100 * minute)}}}
		if edit != nil {
			edit(r)
		}
		return lists(r)
	}
	three := Members{Voters: 3}
	for _, tc := range []struct {
		name      string
		last      *v1alpha1.RaftStatus
		fresh     *v1alpha1.RaftStatus
		keepsLast bool
	}{
		{"settled and only the indexes moved: the copy stays (no write)", copyAt(0, nil), copyAt(10, nil), true},
		{"never read: the fresh copy", nil, copyAt(10, nil), false},
		{"another leader: the fresh copy", copyAt(0, nil), copyAt(10, func(r *v1alpha1.RaftStatus) { r.Leader = "bao-1" }), false},
		{"a server unhealthy now: the fresh copy", copyAt(0, nil), copyAt(10, func(r *v1alpha1.RaftStatus) {
			r.Servers[2].Healthy, r.Healthy, r.FailureTolerance = false, false, 0
		}), false},
		{"the last copy unsettled (a server joining): the fresh copy", copyAt(0, func(r *v1alpha1.RaftStatus) { r.Servers = r.Servers[:2] }), copyAt(10, nil), false},
		{"the failure tolerance changed: the fresh copy", copyAt(0, nil), copyAt(10, func(r *v1alpha1.RaftStatus) { r.FailureTolerance = 2 }), false},
		{"a voter demoted: the fresh copy", copyAt(0, nil), copyAt(10, func(r *v1alpha1.RaftStatus) { r.Servers[1].Voter = false }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Next(tc.last, tc.fresh, three)
			if keeps := got == tc.last; keeps != tc.keepsLast {
				t.Fatalf("Next kept the last copy: %v, want %v", keeps, tc.keepsLast)
			}
			if !tc.keepsLast && got != tc.fresh {
				t.Fatalf("Next returned neither copy")
			}
		})
	}
}

// lists fills Voters and NonVoters from Servers, as Of does.
func lists(r *v1alpha1.RaftStatus) *v1alpha1.RaftStatus {
	r.Voters, r.NonVoters = nil, nil
	for _, s := range r.Servers {
		if s.Voter {
			r.Voters = append(r.Voters, s.ID)
		} else {
			r.NonVoters = append(r.NonVoters, s.ID)
		}
	}
	return r
}

func TestSettled(t *testing.T) {
	voter := v1alpha1.RaftServer{ID: "a", Voter: true, Healthy: true}
	read := v1alpha1.RaftServer{ID: "a-read-0", Healthy: true}
	if !Settled(lists(&v1alpha1.RaftStatus{Healthy: true, Servers: []v1alpha1.RaftServer{voter}}), Members{Voters: 1}) {
		t.Error("one healthy voter of one replica is settled")
	}
	if !Settled(lists(&v1alpha1.RaftStatus{Healthy: true, Servers: []v1alpha1.RaftServer{voter, read}}), Members{Voters: 1, NonVoters: 1}) {
		t.Error("one healthy voter and the one read replica asked for are settled")
	}
	for name, r := range map[string]*v1alpha1.RaftStatus{
		"fewer servers than replicas":                    {Healthy: true, Servers: []v1alpha1.RaftServer{voter}},
		"a non-voter where a voter belongs (unpromoted)": {Healthy: true, Servers: []v1alpha1.RaftServer{voter, {ID: "b", Healthy: true}}},
		"an unhealthy voter":                             {Healthy: true, Servers: []v1alpha1.RaftServer{voter, {ID: "b", Voter: true}}},
		"autopilot unhealthy":                            {Servers: []v1alpha1.RaftServer{voter, {ID: "b", Voter: true, Healthy: true}}},
	} {
		if Settled(lists(r), Members{Voters: 2}) {
			t.Errorf("%s: settled", name)
		}
	}
	for name, r := range map[string]*v1alpha1.RaftStatus{
		"a read replica missing":    {Healthy: true, Servers: []v1alpha1.RaftServer{voter, {ID: "b", Voter: true, Healthy: true}}},
		"an unhealthy read replica": {Healthy: true, Servers: []v1alpha1.RaftServer{voter, {ID: "b", Voter: true, Healthy: true}, {ID: "a-read-0"}}},
		"a read replica counted as a voter": {Healthy: true, Servers: []v1alpha1.RaftServer{voter, {ID: "b", Voter: true, Healthy: true},
			{ID: "a-read-0", Voter: true, Healthy: true}}},
	} {
		if Settled(lists(r), Members{Voters: 2, NonVoters: 1}) {
			t.Errorf("%s: settled", name)
		}
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
	if !slices.Equal(got.Voters, []string{"bao-0", "bao-1"}) || !slices.Equal(got.NonVoters, []string{"bao-2"}) {
		t.Errorf("voters %v and non-voters %v, want [bao-0 bao-1] and [bao-2] listed apart", got.Voters, got.NonVoters)
	}
}
