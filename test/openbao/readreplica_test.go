package openbao_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/autopilot"
	"github.com/openbao/operator/internal/baoconfig"
	"github.com/openbao/operator/internal/openbao"
)

// nonVoterStanza is the line the operator renders into a read replica's
// storage stanza, taken from the golden file, so that this test runs what
// the read StatefulSet's config.hcl says.
func nonVoterStanza(t *testing.T) string {
	t.Helper()
	for _, line := range strings.Split(readGolden(t, "read-replica.hcl"), "\n") {
		if strings.Contains(line, "retry_join_as_non_voter") {
			return line
		}
	}
	t.Fatal("read-replica.hcl has no retry_join_as_non_voter")
	return ""
}

// TestReadReplicaJoinsAsANonVoterAndLeavesTheQuorumAlone: a fourth server
// configured as a read replica (the rendered stanza; loopback has no
// Kubernetes, so it joins the leader by address instead of auto_join)
// joins as a non-voter, stays one past autopilot's stabilization, takes
// in the log, answers a read, and autopilot's failure tolerance and voter
// count are those of the three voters alone.
func TestReadReplicaJoinsAsANonVoterAndLeavesTheQuorumAlone(t *testing.T) {
	t.Parallel()
	want := autopilot.For(3, autopilot.Overrides{}, autopilot.PhaseBootstrap)
	f := formCluster(t, baoconfig.Timers{}, &want)
	ctx := context.Background()
	var raft openbao.RaftConfiguration
	leader := baoClient(t, f.nodes[0], f.certs.CA, f.token)
	before := waitForAutopilot(t, leader, func(s openbao.AutopilotState) bool { return s.Healthy && len(s.Voters) == 3 })

	key, err := os.ReadFile(filepath.Join(f.nodes[0].Dir, "unseal.key"))
	if err != nil {
		t.Fatal(err)
	}
	nc := nodeConfig{leaderAddr: f.nodes[0].Addr}
	config := strings.Replace(renderNodeConfig(t, nc), "  retry_join {", nonVoterStanza(t)+"\n\n  retry_join {", 1)
	if !strings.Contains(config, "retry_join_as_non_voter") {
		t.Fatal("the stanza did not apply; the rendered config changed shape")
	}
	read := startGoldenWith(t, f.certs, key, "read-0", config)
	t.Cleanup(func() { dumpLog(t, read) })

	// Past the stabilization time (1s in the bootstrap phase) and a few
	// autopilot rounds a voter-to-be would have been promoted.
	after := waitForAutopilot(t, leader, func(s openbao.AutopilotState) bool {
		r, ok := s.Servers["read-0"]
		return ok && r.Healthy && s.Healthy
	})
	// A non-voter that stays one is a property over time: watch five
	// autopilot rounds, each long enough to promote a stable server.
	for range 5 {
		time.Sleep(autopilotRound())
		if s, err := leader.AutopilotState(ctx); err == nil && s.Servers["read-0"].Status != "non-voter" {
			t.Fatalf("autopilot turned read-0 into a %s", s.Servers["read-0"].Status)
		}
	}
	after = waitForAutopilot(t, leader, func(s openbao.AutopilotState) bool { return s.Servers["read-0"].Healthy })
	if got := after.Servers["read-0"].Status; got != "non-voter" {
		t.Errorf("autopilot reports read-0 as %q, want non-voter", got)
	}
	if after.FailureTolerance != before.FailureTolerance || len(after.Voters) != 3 || slices.Contains(after.Voters, "read-0") {
		t.Errorf("with the read replica: tolerance %d voters %v; without it: tolerance %d voters %v",
			after.FailureTolerance, after.Voters, before.FailureTolerance, before.Voters)
	}
	raft, err = leader.RaftConfiguration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(raft.NonVoters(), "read-0") || len(raft.Voters()) != 3 {
		t.Errorf("Raft configuration: voters %v non-voters %v, want read-0 a non-voter beside 3 voters", raft.Voters(), raft.NonVoters())
	}

	// A value written on the leader reaches read-0's log, and a read sent
	// to read-0 returns it (OpenBao 2.4 forwards a standby's requests to
	// the active server, so the answer itself does not prove a local read).
	if err := leader.Write(ctx, "sys/mounts/kv", map[string]any{"type": "kv"}); err != nil {
		t.Fatal(err)
	}
	if err := leader.Write(ctx, "kv/probe", map[string]any{"value": "replicated"}); err != nil {
		t.Fatal(err)
	}
	now := waitForAutopilot(t, leader, func(openbao.AutopilotState) bool { return true })
	written := now.Servers[now.Leader].LastIndex
	waitForAutopilot(t, leader, func(s openbao.AutopilotState) bool { return s.Servers["read-0"].LastIndex >= written })
	readClient := baoClient(t, read, f.certs.CA, f.token)
	got, err := readClient.Read(ctx, "kv/probe")
	if err != nil || got["value"] != "replicated" {
		t.Fatalf("read through read-0: %v %v", got, err)
	}

	// What OpenBao 2.4 does with that read: with the voters gone read-0
	// still holds the value, yet cannot answer it, since a standby serves
	// no read itself and has no active server to forward it to (standby
	// reads come with 2.5, where this read would be answered).
	for _, n := range f.nodes {
		n.Stop(t)
	}
	stopped, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if got, err := readClient.Read(stopped, "kv/probe"); err == nil {
		t.Errorf("read-0 answered %v with no active server: OpenBao now serves standby reads; update docs/configure.md", got)
	}
}

// autopilotRound is the operator's default autopilot reconcile interval,
// after which autopilot would have promoted a stable non-voter it may
// promote.
func autopilotRound() time.Duration { return baoconfig.DefaultAutopilotReconcileInterval }

func waitForAutopilot(t *testing.T, c openbao.Client, ok func(openbao.AutopilotState) bool) openbao.AutopilotState {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last openbao.AutopilotState
	var err error
	for time.Now().Before(deadline) {
		if last, err = c.AutopilotState(context.Background()); err == nil && ok(last) {
			return last
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("autopilot state never as wanted: %+v (last error %v)", last, err)
	return last
}
