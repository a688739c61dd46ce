package e2e_test

import (
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	drBenchBegin = "<!-- bench-dr:begin -->"
	drBenchEnd   = "<!-- bench-dr:end -->"
	// drSchedule is the primary's backup interval (cron "* * * * *").
	drSchedule = time.Minute
	// drGoalRTO and drGoalRPO are issue 32's goals.
	drGoalRTO = 30 * time.Second
	drGoalRPO = drSchedule + 30*time.Second
)

// BenchmarkDR (make bench-dr) takes DR_BENCH_RUNS (default 3) runs of the
// e2e standby test's drill (startDRDrill, follow, lose, promote): a
// one-server primary backing up every minute to MinIO on the node, a
// one-server standby in another namespace following it (poll 30 s), the
// primary deleted with DeleteAll, `kubectl openbao promote --yes --wait`,
// writes through the standby's client Service until one is acknowledged.
// Each run loses its primary at another second of the minute, spread over
// the schedule interval, since the RPO depends on where in it the loss
// falls. It reports the RPO (the age of the newest data the standby
// serves, at the loss and once it took the primary's last snapshot) and
// the RTO (the promote call to the first acknowledged write), and writes
// them into BENCHMARKS.md.
//
// A loss deletes the primary, so each run forms a new primary and a new
// standby; the operator, MinIO and the plugin serve every run.
func BenchmarkDR(b *testing.B) {
	installOperator(b)
	cl := backupClient(b)
	ctx := context.Background()
	m := startBridgeMinIO(b)
	plugin := buildPlugin(b)
	n := envInt(b, "DR_BENCH_RUNS", 3)
	var runs []drRun
	for i := range n {
		phase := time.Duration(2*i+1) * drSchedule / time.Duration(2*n)
		d := startDRDrill(ctx, b, cl, m, plugin, fmt.Sprintf("bench-dr%d", i+1), nil)
		r := drRun{phase: phase.Round(time.Second)}
		r.follow = d.follow(ctx, b, nil)
		waitForSecondOfMinute(r.phase)
		r.loss = d.lose(ctx, b)
		r.rto = d.promote(ctx, b, nil)
		d.checkPromoted(ctx, b, r.loss.served)
		b.Logf("run %d: RTO %s; RPO %s: %s", i+1, r.rto.Round(100*time.Millisecond), r.loss.rpo().Round(time.Second), r.loss)
		runs = append(runs, r)
		// The promoted standby backs up every minute: gone, it does not
		// load the node under the next run.
		deleteNamespace(ctx, b, cl, d.siteB)
		deleteNamespace(ctx, b, cl, d.siteA)
	}
	writeDRBenchmarks(b, n, runs)
}

// drRun is one run of BenchmarkDR.
type drRun struct {
	// phase is the second of the minute at which the primary is lost.
	phase  time.Duration
	follow time.Duration
	loss   drLoss
	rto    time.Duration
}

// waitForSecondOfMinute sleeps until the next time the clock shows that
// second of a minute, at least a second from now.
func waitForSecondOfMinute(second time.Duration) {
	now := time.Now()
	at := now.Truncate(time.Minute).Add(second)
	for at.Before(now.Add(time.Second)) {
		at = at.Add(time.Minute)
	}
	time.Sleep(time.Until(at))
}

func verdict(d, goal time.Duration) string {
	if d <= goal {
		return "met"
	}
	return "**missed**"
}

// benchCommit is the commit the bench ran on, marked when the tree had
// changes.
func benchCommit(b *testing.B) string {
	out, err := exec.Command("git", "-C", node.RepoRoot, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		b.Fatal(err)
	}
	commit := strings.TrimSpace(string(out))
	if dirty, _ := exec.Command("git", "-C", node.RepoRoot, "status", "--porcelain", "--untracked-files=no").Output(); len(dirty) > 0 {
		commit += " (with uncommitted changes)"
	}
	return commit
}

func writeDRBenchmarks(b *testing.B, n int, runs []drRun) {
	med := func(f func(drRun) time.Duration) time.Duration {
		return time.Duration(medianOf(runs, func(r drRun) float64 { return float64(f(r)) }))
	}
	rto := med(func(r drRun) time.Duration { return r.rto })
	rpoAtLoss := med(func(r drRun) time.Duration { return r.loss.rpoAtLoss() })
	rpo := med(func(r drRun) time.Duration { return r.loss.rpo() })
	worstAtLoss := slices.MaxFunc(runs, func(x, y drRun) int { return cmp.Compare(x.loss.rpoAtLoss(), y.loss.rpoAtLoss()) }).loss.rpoAtLoss()
	b.ReportMetric(rto.Seconds(), "RTO-s")
	b.ReportMetric(rpoAtLoss.Seconds(), "RPO-at-loss-s")
	b.ReportMetric(rpo.Seconds(), "RPO-caught-up-s")
	var rows strings.Builder
	for i, r := range runs {
		l := r.loss
		fmt.Fprintf(&rows, "| %d | %s | :%02d | %s | %.0f s | %s | %.0f s | %.0f s | %.1f s | %.0f s |\n", i+1,
			l.lost.UTC().Format("15:04:05"), int(r.phase.Seconds()), l.servedAtLoss.ServedTakenAt.UTC().Format("15:04:05"),
			l.rpoAtLoss().Seconds(), snapshotTime(l.last), l.caughtUp.Seconds(), l.rpo().Seconds(), r.rto.Seconds(), r.follow.Seconds())
	}
	section := fmt.Sprintf(`%s
## Disaster recovery standby (make bench-dr)

%s, commit %s, %s, on the 2-core local node: %d runs of
the e2e standby test's drill. Each run: a one-server primary backing up
every minute (cron `+"`* * * * *`"+`) to MinIO on the node's bridge address, and
a one-server standby in another namespace following its snapshots (poll
%s). A key is written to the primary and the standby follows it; the
primary is then deleted with DeleteAll at a set second of the minute,
spread over the schedule interval (the RPO depends on where in it the loss
falls); once the standby serves the primary's last snapshot,
`+"`kubectl openbao promote dr --yes --wait`"+`, then writes through the
standby's client Service every 100 ms until one is acknowledged. A loss
deletes its primary, so each run forms a new primary and standby; one
operator, one MinIO and one plugin build serve all runs.

- RTO: the promote call to the first acknowledged write.
- RPO at the loss: the loss time minus the time the snapshot the standby
  served at that moment was taken (what a promotion at once keeps).
- RPO once caught up: the same for the primary's last snapshot, which the
  standby serves some seconds after the loss (what the promotion here kept).

Medians over %d runs: RTO **%.1f s** (goal ≤ %s: %s); RPO at the loss
**%.0f s** (worst %.0f s), once caught up **%.0f s** (goal ≤ the schedule
interval + 30 s = %s: %s at the loss, %s caught up).

| run | primary lost at | second of the minute | standby served at the loss: taken | RPO at the loss | primary's last snapshot | standby serves it after the loss | RPO caught up | RTO | standby follows a write within |
|---|---|---|---|---|---|---|---|---|---|
%s%s
`, drBenchBegin, time.Now().UTC().Format("2006-01-02"), benchCommit(b), "`make bench-dr`"+fmt.Sprintf(" (DR_BENCH_RUNS=%d)", n), n,
		standbyPoll, n, rto.Seconds(), drGoalRTO, verdict(rto, drGoalRTO), rpoAtLoss.Seconds(), worstAtLoss.Seconds(), rpo.Seconds(),
		drGoalRPO, verdict(rpoAtLoss, drGoalRPO), verdict(rpo, drGoalRPO), rows.String(), drBenchEnd)
	writeBenchSection(b, drBenchBegin, drBenchEnd, section)
}

// snapshotTime is the time in a snapshot's name (<YYYYMMDDThhmmssZ>-...).
func snapshotTime(key string) string {
	name := key[strings.LastIndex(key, "/")+1:]
	if len(name) < 16 {
		return name
	}
	return name[:16]
}
