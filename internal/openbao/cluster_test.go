package openbao_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
)

const serviceAccountJWT = "eyJhbGciOiJSUzI1NiJ9.service-account-claims.signature"

func TestLoginSendsTheJWTInTheBodyAndNeverInAnError(t *testing.T) {
	var sent map[string]string
	ok := server(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &sent)
		if r.URL.Path != "/v1/auth/openbao-operator/login" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"auth": map[string]any{"client_token": "s.issued", "lease_duration": 900}})
	})
	tok, ttl, err := ok.Login(context.Background(), "openbao-operator", "upgrade", openbao.NewToken(serviceAccountJWT))
	if err != nil || tok.Reveal() != "s.issued" || ttl != 15*time.Minute {
		t.Fatalf("login: %v %v", err, ttl)
	}
	if sent["role"] != "upgrade" || sent["jwt"] != serviceAccountJWT {
		t.Errorf("body %v", sent)
	}

	echo := server(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"errors": []string{"error validating token: " + string(body)}})
	})
	_, _, err = echo.Login(context.Background(), "openbao-operator", "upgrade", openbao.NewToken(serviceAccountJWT))
	if !errors.Is(err, openbao.ErrInvalidRequest) {
		t.Fatalf("error %v, want ErrInvalidRequest", err)
	}
	if strings.Contains(err.Error(), serviceAccountJWT) {
		t.Fatalf("the JWT reaches the error: %v", err)
	}
}

func TestLeaderAndAutopilotStateAreRead(t *testing.T) {
	c := server(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/sys/leader":
			_ = json.NewEncoder(w).Encode(map[string]any{"ha_enabled": true, "is_self": true, "raft_committed_index": 120})
		case "/v1/sys/storage/raft/autopilot/state":
			_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{
				"healthy": true, "failure_tolerance": 1, "leader": "bao-0", "voters": []string{"bao-0", "bao-1"},
				"servers": map[string]any{
					"bao-0": map[string]any{"id": "bao-0", "status": "leader", "healthy": true, "last_index": 120, "last_contact": "0s"},
					"bao-1": map[string]any{"id": "bao-1", "status": "voter", "healthy": true, "last_index": 117, "last_contact": "150ms"},
				}}})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	l, err := c.Leader(context.Background())
	if err != nil || !l.IsSelf || l.RaftCommittedIndex != 120 {
		t.Fatalf("leader %+v %v", l, err)
	}
	s, err := c.AutopilotState(context.Background())
	if err != nil || !s.Healthy || s.FailureTolerance != 1 || s.Servers["bao-1"].LastIndex != 117 ||
		s.Servers["bao-1"].LastContact != 150*time.Millisecond || s.Servers["bao-0"].Status != "leader" {
		t.Fatalf("state %+v %v", s, err)
	}
}

// busyCluster plays a cluster taking writes: every sys/leader read anywhere
// moves the log 50 entries on; a follower in step has applied everything
// committed up to the moment it is asked, a stalled one stays where it was.
type busyCluster struct {
	mu      sync.Mutex
	index   uint64
	stalled map[string]uint64
}

type busyServer struct {
	openbaofake.Client
	cluster *busyCluster
	name    string
	leader  bool
}

func (s *busyServer) Leader(context.Context) (openbao.Leader, error) {
	s.cluster.mu.Lock()
	defer s.cluster.mu.Unlock()
	s.cluster.index += 50
	applied := s.cluster.index
	if at, ok := s.cluster.stalled[s.name]; ok {
		applied = at
	}
	return openbao.Leader{IsSelf: s.leader, RaftCommittedIndex: s.cluster.index, RaftAppliedIndex: applied}, nil
}

func TestRaftLagSeesAStalledFollowerButNotTheWritesOfOneRequest(t *testing.T) {
	c := &busyCluster{index: 1000, stalled: map[string]uint64{"bao-2": 700}}
	servers := map[string]openbao.Client{
		"bao-0": &busyServer{cluster: c, name: "bao-0", leader: true},
		"bao-1": &busyServer{cluster: c, name: "bao-1"},
		"bao-2": &busyServer{cluster: c, name: "bao-2"},
	}
	lag, err := openbao.RaftLag(context.Background(), servers)
	if err != nil {
		t.Fatal(err)
	}
	if lag["bao-1"] != 0 || lag["bao-0"] != 0 {
		t.Errorf("servers in step: lag %v, want 0", lag)
	}
	if lag["bao-2"] < 300 {
		t.Errorf("stalled bao-2: lag %d, want at least 300", lag["bao-2"])
	}
}

// fixedServer answers sys/leader with fixed indexes: on a follower,
// raft_committed_index is its own last log index.
type fixedServer struct {
	openbaofake.Client
	leader       bool
	log, applied uint64
}

func (s *fixedServer) Leader(context.Context) (openbao.Leader, error) {
	return openbao.Leader{IsSelf: s.leader, RaftCommittedIndex: s.log, RaftAppliedIndex: s.applied}, nil
}

// TestRaftProgressTellsAServerTheLeaderReachesFromOneItDoesNot: a
// restarted follower has applied what its own disk held; only the
// leader's replication brings its log up to the leader's. One whose log
// reached the leader's but has not applied it all is reached, with a lag.
func TestRaftProgressTellsAServerTheLeaderReachesFromOneItDoesNot(t *testing.T) {
	leader := &fixedServer{leader: true, log: 1000, applied: 1000}
	servers := map[string]openbao.Client{
		"bao-0":     leader,
		"reached":   &fixedServer{log: 1000, applied: 990},
		"restarted": &fixedServer{log: 700, applied: 700},
	}
	p := openbao.RaftProgressTo(context.Background(), leader, servers)
	if !p["bao-0"].Received || p["bao-0"].Lag != 0 {
		t.Errorf("the leader itself: %+v", p["bao-0"])
	}
	if r := p["reached"]; !r.Received || r.Lag != 10 {
		t.Errorf("a follower whose log reached the leader's: %+v, want received with a lag of 10", r)
	}
	if r := p["restarted"]; r.Received || r.Lag != 300 || r.Index != 700 || r.LeaderIndex != 1000 {
		t.Errorf("a restarted follower the leader does not reach: %+v, want not received, lag 300, index 700 of 1000", r)
	}
}

// TestRaftProgressMeasuresNothingAgainstALeaderThatSteppedDown: a server
// asked as the leader that answers as a standby (it stepped down since, or
// a Service routed the question to a standby) gives its own log index,
// which the other servers may have passed: no progress is measured.
func TestRaftProgressMeasuresNothingAgainstALeaderThatSteppedDown(t *testing.T) {
	steppedDown := &haServer{fixedServer: fixedServer{log: 700, applied: 700}}
	servers := map[string]openbao.Client{
		"bao-0": steppedDown,
		"bao-1": &fixedServer{log: 1000, applied: 1000},
	}
	if p := openbao.RaftProgressTo(context.Background(), steppedDown, servers); len(p) != 0 {
		t.Errorf("progress against a standby's index: %+v, want none", p)
	}
	steppedDown.leader = true
	if p := openbao.RaftProgressTo(context.Background(), steppedDown, servers); p["bao-0"].Lag != 0 || !p["bao-1"].Received {
		t.Errorf("progress against the active server: %+v, want both caught up", p)
	}
}

// haServer is a fixedServer on HA storage, as every Raft server is.
type haServer struct{ fixedServer }

func (s *haServer) Leader(ctx context.Context) (openbao.Leader, error) {
	l, err := s.fixedServer.Leader(ctx)
	l.HAEnabled = true
	return l, err
}
