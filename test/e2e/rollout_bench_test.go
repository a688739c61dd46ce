package e2e_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// BenchmarkRollout (make bench-rollout): a 3-server cluster on the local
// node, the e2e tier's writer (one write every 100 ms through the client
// Service, one retry after 100 ms: what it fails so is a plain client's
// failed write), and ROLLOUT_BENCH_RUNS (default 3) rollouts of a config
// change, each timed as TestRolloutsKeepWritesFlowing times its rollouts
// (rollTo): the total against the sum of the pods' restarts, and each pod's
// part split into phases (podPhases). It writes BENCHMARKS.md.
func BenchmarkRollout(b *testing.B) {
	cl := installOperator(b)
	ctx := context.Background()
	ns := createNamespace(ctx, b, cl, "bench-rollout")
	createClusterWith(ctx, b, cl, ns, "bao", nil)
	token, caPEM := waitRunning(ctx, b, cl, ns, replicas)
	w := startWriter(ctx, b, cl, ns, token, caPEM)
	var runs []rolloutRun
	for i := 1; i <= envInt(b, "ROLLOUT_BENCH_RUNS", 3); i++ {
		// Each rollout starts from a settled cluster: the one before has
		// completed, and the leader's autopilot counts every server again.
		w.waitAutopilotHealthy(ctx, b)
		w.resetGap()
		_, failedBefore, _ := w.mark()
		m := rollTo(ctx, b, cl, ns, map[string]any{"config": map[string]any{"default_lease_ttl": fmt.Sprintf("%dh", 720+i)}}, 0)
		_, failedAfter, gap := w.mark()
		r := rolloutRun{rolloutFigures: m, failed: failedAfter - failedBefore, gap: gap, gapEnd: w.longestGapEnd()}
		b.Logf("run %d: %s", i, r)
		runs = append(runs, r)
	}
	w.finish(b)
	writeBenchSection(b, "<!-- bench-rollout:begin -->", "<!-- bench-rollout:end -->", rolloutSection(runs))
}

// rolloutRun is one rollout of the benchmark with what the writer saw
// during it.
type rolloutRun struct {
	rolloutFigures
	failed int
	gap    time.Duration
	gapEnd time.Time
}

func (r rolloutRun) String() string {
	return fmt.Sprintf("total %s, sum of restarts %s (%.2fx), %d failed writes, longest gap %s (ending %s)",
		r.total, r.restarts, r.ratio(), r.failed, r.gap.Round(10*time.Millisecond), r.gapEnd.UTC().Format("15:04:05.000"))
}

// phaseSums adds the phases of a run's pods: where its total went.
func (r rolloutRun) phaseSums() (release, stop, start, count time.Duration) {
	for _, p := range r.pods {
		release, stop, start, count = release+p.release, stop+p.stop, start+p.start, count+p.count
	}
	return
}

// measuredOnTheNode says when and at which commit a benchmark on the
// local node ran, for its BENCHMARKS.md section.
func measuredOnTheNode() string {
	commit, _ := exec.Command("git", "describe", "--always", "--dirty").Output()
	return fmt.Sprintf("Measured %s on the local node (`nproc` 2, shared), commit %s",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), strings.TrimSpace(string(commit)))
}

func rolloutSection(runs []rolloutRun) string {
	var s strings.Builder
	fmt.Fprintf(&s, "<!-- bench-rollout:begin -->\n## Rollouts (make bench-rollout)\n\n")
	fmt.Fprintf(&s, "%s; `make bench-rollout` (ROLLOUT_BENCH_RUNS, default 3).\n\n", measuredOnTheNode())
	s.WriteString("A 3-server cluster; a client writes every 100 ms through the client Service and retries a failed write " +
		"once after 100 ms (a write whose retry fails is a failed write); each run rolls a config change " +
		"(`spec.config.default_lease_ttl`) through every server, from a settled cluster (the leader's autopilot healthy " +
		"with a failure tolerance). Total: from the spec change to `UpgradeComplete`. A pod's restart: from its deletion " +
		"to its successor Ready; the ratio is the total over their sum (goal ≤ 1.5× with 0 failed writes and the longest " +
		"gap ≤ 1 s). Each pod's part is split into phases, each from the end of the one before: the wait for its release " +
		"(the pod before it counted, or the preflight, then a step-down if its server is active) up to its deletion; " +
		"deletion to its container stopped (the successor pod object appears); to the successor Ready; Ready to the " +
		"operator recording it rolled (the release rule, the leader's view of it, holds).\n\n")
	s.WriteString("| Run | Total | Sum of restarts | Ratio | Failed writes | Longest gap | Release waits | Deletion → stop | Stop → Ready | Ready → counted |\n")
	s.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	sec := func(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
	for i, r := range runs {
		rel, stop, start, count := r.phaseSums()
		fmt.Fprintf(&s, "| %d | %s | %s | %.2f× | %d | %.2f s | %s | %s | %s | %s |\n", i+1, sec(r.total), sec(r.restarts), r.ratio(),
			r.failed, r.gap.Seconds(), sec(rel), sec(stop), sec(start), sec(count))
	}
	phase := func(f func(r rolloutRun) time.Duration) func(rolloutRun) float64 {
		return func(r rolloutRun) float64 { return f(r).Seconds() }
	}
	fmt.Fprintf(&s, "| median | %.1f s | %.1f s | %.2f× | %.0f | %.2f s | %.1f s | %.1f s | %.1f s | %.1f s |\n",
		medianOf(runs, phase(func(r rolloutRun) time.Duration { return r.total })),
		medianOf(runs, phase(func(r rolloutRun) time.Duration { return r.restarts })),
		medianOf(runs, rolloutRun.ratio),
		medianOf(runs, func(r rolloutRun) float64 { return float64(r.failed) }),
		medianOf(runs, phase(func(r rolloutRun) time.Duration { return r.gap })),
		medianOf(runs, phase(func(r rolloutRun) time.Duration { a, _, _, _ := r.phaseSums(); return a })),
		medianOf(runs, phase(func(r rolloutRun) time.Duration { _, b, _, _ := r.phaseSums(); return b })),
		medianOf(runs, phase(func(r rolloutRun) time.Duration { _, _, c, _ := r.phaseSums(); return c })),
		medianOf(runs, phase(func(r rolloutRun) time.Duration { _, _, _, d := r.phaseSums(); return d })))
	s.WriteString("\nTimeline per pod, in the order the pods went:\n\n")
	for i, r := range runs {
		fmt.Fprintf(&s, "- run %d:", i+1)
		for _, p := range r.pods {
			fmt.Fprintf(&s, "\n  - %s", p)
		}
		s.WriteString("\n")
	}
	s.WriteString("<!-- bench-rollout:end -->\n")
	return s.String()
}
