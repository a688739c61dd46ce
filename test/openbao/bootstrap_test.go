package openbao_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/autopilot"
	"github.com/openbao/operator/internal/baoconfig"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/test/baotest"
)

// formation is a three-node cluster bootstrapped the way the operator
// does it: pod-0 alone until initialized, then the joiners.
type formation struct {
	nodes    []*baotest.Server
	certs    testCerts
	token    openbao.Token
	initTook time.Duration // the Initialize call: dry run, sys/init, store, autopilot write
	sysInit  time.Duration // sys/init alone
	total    time.Duration // from pod-0's start to three voters
	joiners  time.Duration // from the joiners' start to three voters
	raft     openbao.RaftConfiguration
}

// formCluster starts node-0, initializes it through internal/bootstrap
// (setting autopilot when given), starts two joiners and waits for three
// voters.
func formCluster(t testing.TB, timers baoconfig.Timers, autopilot *openbao.AutopilotConfig) formation {
	t.Helper()
	f := formation{certs: newTestCerts(t)}
	key := newUnsealKey(t)
	start := time.Now()
	node0 := startNode(t, f.certs, key, "node-0", nodeConfig{timers: timers})
	c0 := &timedInit{Client: baoClient(t, node0, f.certs.CA, openbao.Token{})}
	waitForDecision(t, c0, false, bootstrap.ActionInitialize, 30*time.Second)

	store := &memoryStore{}
	initStart := time.Now()
	out, err := bootstrap.Initialize(context.Background(), c0, store, bootstrap.InitOptions{
		Autopilot: autopilot,
		ClientWithToken: func(tok openbao.Token) (openbao.Client, error) {
			return openbao.New(openbao.Options{Address: node0.Addr, CACert: f.certs.CA, Token: tok})
		},
	})
	f.initTook, f.sysInit = time.Since(initStart), c0.took
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if out.AutopilotErr != nil {
		t.Fatalf("autopilot after init: %v", out.AutopilotErr)
	}
	f.token = store.Token()
	// Replica gating: the joiners start once pod-0 is initialized.
	f.nodes = []*baotest.Server{node0}
	joinStart := time.Now()
	for _, id := range []string{"node-1", "node-2"} {
		f.nodes = append(f.nodes, startNode(t, f.certs, key, id, nodeConfig{leaderAddr: node0.Addr, timers: timers}))
	}
	f.raft = waitForVoters(t, baoClient(t, node0, f.certs.CA, f.token), 3, 3*time.Minute)
	f.total = time.Since(start)
	f.joiners = time.Since(joinStart)
	return f
}

func TestStandardInitFormsThreeVotersAfterAutopilotPromotion(t *testing.T) {
	t.Parallel()
	want := autopilot.For(3, autopilot.Overrides{}, autopilot.PhaseBootstrap)
	f := formCluster(t, baoconfig.Timers{}, &want)
	t.Logf("operator timers: sys/init %s, Initialize %s, joiners to 3 voters %s, pod-0 start to 3 voters %s",
		seconds(f.sysInit), seconds(f.initTook), seconds(f.joiners), seconds(f.total))
	if f.token.IsZero() {
		t.Fatal("no root token stored")
	}
	assertNotInLogs(t, f.token.Reveal(), f.nodes...)

	// The next reconcile finds its own Secret: mark initialized, not adopt.
	h, err := baoClient(t, f.nodes[0], f.certs.CA, openbao.Token{}).Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d := bootstrap.Decide(bootstrap.Observed{Pod0: &podstate.Pod{Name: "node-0", Running: true}, Health: &h, RootTokenSecretExists: true})
	if d.Action != bootstrap.ActionMarkInitialized {
		t.Errorf("after init: %s (%s), want MarkInitialized", d.Action, d.Reason)
	}

	leader := baoClient(t, f.nodes[0], f.certs.CA, f.token)
	got, err := leader.AutopilotConfiguration(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if autopilot.NeedsUpdate(got, want) {
		t.Errorf("autopilot %+v, want %+v", got, want)
	}
	// All replicas vote: the steady stabilization time returns.
	if autopilot.PhaseOf(f.raft, 3) != autopilot.PhaseSteady {
		t.Fatalf("3 voters is not steady: %+v", f.raft)
	}
	steady := autopilot.For(3, autopilot.Overrides{}, autopilot.PhaseSteady)
	if err := leader.SetAutopilotConfiguration(context.Background(), steady); err != nil {
		t.Fatal(err)
	}
	if got, err = leader.AutopilotConfiguration(context.Background()); err != nil || autopilot.NeedsUpdate(got, steady) {
		t.Errorf("steady autopilot %+v (%v), want %+v", got, err, steady)
	}
	// A second init is refused and its error carries no body.
	_, err = baoClient(t, f.nodes[0], f.certs.CA, openbao.Token{}).Init(context.Background(), openbao.InitRequest{})
	if err == nil {
		t.Fatal("a second sys/init succeeded")
	}
	// Init answers may hold keys and tokens: the error keeps OpenBao's
	// status, never its words.
	var status *openbao.StatusError
	if !errors.As(err, &status) || status.Code != http.StatusBadRequest || len(status.Messages) != 0 ||
		strings.Contains(err.Error(), "initialized") {
		t.Errorf("second sys/init: %v (%#v), want a bare HTTP 400 status", err, status)
	}
}

func TestOpenBaoRefusesWhatValidateAutopilotRejects(t *testing.T) {
	t.Parallel()
	certs := newTestCerts(t)
	node := startNode(t, certs, newUnsealKey(t), "node-0", nodeConfig{})
	c := baoClient(t, node, certs.CA, openbao.Token{})
	waitForDecision(t, c, false, bootstrap.ActionInitialize, 30*time.Second)
	store := &memoryStore{}
	if _, err := bootstrap.Initialize(context.Background(), c, store, bootstrap.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForActive(t, c, 30*time.Second)
	c = baoClient(t, node, certs.CA, store.Token())
	for _, tc := range []struct {
		name string
		cfg  openbao.AutopilotConfig
	}{
		{"min_quorum 2 with cleanup", openbao.AutopilotConfig{CleanupDeadServers: true, MinQuorum: 2}},
		{"a dead-server threshold of 30s with cleanup", openbao.AutopilotConfig{CleanupDeadServers: true, DeadServerLastContactThreshold: 30 * time.Second, MinQuorum: 3}},
		{"a dead-server threshold of 30s without cleanup", openbao.AutopilotConfig{DeadServerLastContactThreshold: 30 * time.Second, MinQuorum: 3}},
	} {
		err := c.SetAutopilotConfiguration(context.Background(), tc.cfg)
		t.Logf("%s: ValidateAutopilot: %v; OpenBao: %v", tc.name, autopilot.Validate(tc.cfg), err)
		if (autopilot.Validate(tc.cfg) != nil) != errorsIsInvalid(err) {
			t.Errorf("%s: ValidateAutopilot and OpenBao disagree", tc.name)
		}
	}
}

// BenchmarkTimeToThreeVotersDefaultVsTuned (make bench-timers) measures
// formation on loopback with OpenBao's own timers (and no autopilot change)
// against the operator's rendered defaults plus the bootstrap autopilot
// configuration. Figures only; BOOTSTRAP_BENCH_RUNS sets the runs.
func BenchmarkTimeToThreeVotersDefaultVsTuned(b *testing.B) {
	runs := 1
	if n, err := strconv.Atoi(os.Getenv("BOOTSTRAP_BENCH_RUNS")); err == nil && n > 0 {
		runs = n
	}
	tuned := autopilot.For(3, autopilot.Overrides{}, autopilot.PhaseBootstrap)
	var sumDefault, sumTuned time.Duration
	for i := 0; i < runs; i++ {
		d := formCluster(b, openbaoDefaultTimers, nil)
		u := formCluster(b, baoconfig.Timers{}, &tuned)
		b.Logf("run %d: defaults: sys/init %s, joiners %s, 3 voters %s; tuned: sys/init %s, joiners %s, 3 voters %s",
			i+1, seconds(d.sysInit), seconds(d.joiners), seconds(d.total), seconds(u.sysInit), seconds(u.joiners), seconds(u.total))
		sumDefault += d.total
		sumTuned += u.total
	}
	b.ReportMetric((sumDefault / time.Duration(runs)).Seconds(), "defaults-s")
	b.ReportMetric((sumTuned / time.Duration(runs)).Seconds(), "tuned-s")
	b.Logf("mean over %d run(s): defaults %s, tuned %s, ratio %.1fx",
		runs, seconds(sumDefault/time.Duration(runs)), seconds(sumTuned/time.Duration(runs)), float64(sumDefault)/float64(sumTuned))
}

// timedInit measures sys/init alone.
type timedInit struct {
	openbao.Client
	took time.Duration
}

func (c *timedInit) Init(ctx context.Context, req openbao.InitRequest) (openbao.InitResult, error) {
	start := time.Now()
	defer func() { c.took = time.Since(start) }()
	return c.Client.Init(ctx, req)
}
