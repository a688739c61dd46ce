package scale_test

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// The goals the figures are held against. They are printed, not asserted:
// the benchmark measures, and a miss is a finding, not a broken build.
const (
	goalConverge          = 60 * time.Second
	goalRSSMiB            = 200.0
	goalIdleRequests      = 1.0 // per cluster per minute
	goalIdleWrites        = 0.0
	mib                   = 1 << 20
	topPaths              = 15
	markdownPaths         = 12
	reconcileControllerID = "openbaocluster"
)

// figures are the headline numbers, named once for the printout, the
// benchmark metrics and BENCHMARKS.md.
func (r *result) idleReconciles() float64 {
	return r.idle.perClusterMinute(r.idle.reconciles, r.s.clusters)
}
func (r *result) idleRequests() float64 {
	return r.idle.perClusterMinute(r.idle.reads+r.idle.writes, r.s.clusters)
}
func (r *result) idleReads() float64  { return r.idle.perClusterMinute(r.idle.reads, r.s.clusters) }
func (r *result) idleWrites() float64 { return r.idle.perClusterMinute(r.idle.writes, r.s.clusters) }

// operatorWatches is the operator's watches open at the end (audit log).
func (r *result) operatorWatches() float64 { return keyTotal(r.watches.operator) }

// rssPerNamespace is what serving one more namespace added to the
// operator's resident set, before any cluster existed.
func (t *tenantPhase) rssPerNamespace(namespaces int) float64 {
	return (t.servedRSS - t.startRSS) / float64(namespaces)
}

func keyTotal(cs []keyCount) float64 {
	var n float64
	for _, c := range cs {
		n += c.n
	}
	return n
}

// busy is the share of the workers' time spent inside Reconcile.
func (r *result) busy() float64 {
	if r.idle.seconds == 0 || r.workers == 0 {
		return 0
	}
	return r.idle.reconcileSum / (r.idle.seconds * float64(r.workers))
}

// saturated: the workers had no slack in the idle window, so the reconcile
// rate shows their throughput, not what the operator asked for.
func (r *result) saturated() bool { return r.busy() >= 0.9 }

// readVerbs splits the idle reads into get, list and watch per cluster per
// minute; client-go's metric sees only GETs, so this needs the breakdown.
func (r *result) readVerbs() string {
	if !r.s.audit {
		return "n/a: SCALE_AUDIT=0"
	}
	verbs := map[string]float64{}
	for _, c := range byVerb(r.idleByPath) {
		verbs[c.key] = c.n
	}
	return fmt.Sprintf("get %s, list %s, watch %s", r.rate(verbs["get"]), r.rate(verbs["list"]), r.rate(verbs["watch"]))
}

// rate formats an idle count per cluster per minute; small rates keep
// their digits (one watch in a window is not zero).
func (r *result) rate(n float64) string {
	v := r.idle.perClusterMinute(n, r.s.clusters)
	if v > 0 && v < 0.01 {
		return fmt.Sprintf("%.4f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// renderMean formats the mean render time of a window, or says why not.
func renderMean(w window) string {
	switch {
	case !w.renderPresent:
		return "n/a"
	case w.renders == 0:
		return "no renders"
	}
	return fmt.Sprintf("%.2f ms (%d renders)", 1000*w.renderSum/w.renders, int(w.renders))
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// report hands the figures to the benchmark framework; ns/op of a single
// long run would only repeat the total.
func (r *result) report(b *testing.B) {
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(r.converge.Seconds(), "converge-s")
	b.ReportMetric(r.peakRSS/mib, "peak-RSS-MiB")
	b.ReportMetric(r.endRSS/mib, "end-RSS-MiB")
	b.ReportMetric(r.idleReconciles(), "idle-reconciles/cluster/min")
	b.ReportMetric(r.idleRequests(), "idle-requests/cluster/min")
	b.ReportMetric(r.idleReads(), "idle-reads/cluster/min")
	b.ReportMetric(r.idleWrites(), "idle-writes/cluster/min")
	b.ReportMetric(1000*r.idle.reconcileMean(), "idle-reconcile-ms/pass")
	b.ReportMetric(1000*r.conv.reconcileMean(), "converge-reconcile-ms/pass")
	b.ReportMetric(100*r.busy(), "idle-workers-busy-%")
	b.ReportMetric(total(r.watches.end), "apiserver-watches")
	if r.s.audit {
		b.ReportMetric(r.operatorWatches(), "operator-watches")
	}
	if t := r.tenants; t != nil {
		b.ReportMetric(t.rssPerNamespace(r.s.namespaces)/1024, "RSS-KiB/namespace")
	}
	b.ReportMetric(1000*r.idle.queueWaitMean(), "idle-queue-wait-ms")
	for name, w := range map[string]window{"idle": r.idle, "converge": r.conv} {
		if w.renderPresent && w.renders > 0 {
			b.ReportMetric(1000*w.renderSum/w.renders, name+"-render-ms/pass")
		}
	}
}

// print writes the human-readable block.
func (r *result) print(out io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	p("")
	p("=== %s (%s install): %d OpenBaoClusters in %d namespaces, one operator (%d workers, reconcilePeriod %s)",
		sectionOf(r.s.mode), r.s.mode, r.s.clusters, r.s.namespaces, r.workers, resyncPeriod)
	p("    reconcilePeriod is 1m, the smallest allowed: the worst case of the periodic resync,")
	p("    so the idle window holds resync passes. No scheduler or kubelet: pods stay Pending.")
	p("    API requests are counted at the operator's client (rest_client_requests_total).")
	p("setup: operator build %s; total run %s", r.build.Round(time.Second), r.total.Round(time.Second))
	if t := r.tenants; t != nil {
		p("tenants: %d Ready after %s; the operator's watches settled after %s (%.0f open on the API server, %.0f before the operator)",
			r.s.namespaces, t.ready.Round(100*time.Millisecond), t.served.Round(time.Second), total(t.watches), total(r.watches.before))
		p("  operator RSS: %.1f MiB serving no namespace, %.1f MiB serving %d (%.0f KiB per namespace)",
			t.startRSS/mib, t.servedRSS/mib, r.s.namespaces, t.rssPerNamespace(r.s.namespaces)/1024)
	}
	p("create: %d clusters submitted in %s (%d goroutines)", r.s.clusters, r.create.Round(time.Millisecond), createWorkers)
	p("converge: all applied after %s (p50 %s)                 goal <= %s: %s",
		r.converge.Round(100*time.Millisecond), r.p50.Round(100*time.Millisecond), goalConverge, met(r.converge <= goalConverge))
	r.printPhase(p, "converging", r.conv)
	p("  CPU cores used while converging: %s", r.convCPU)
	p("RSS: peak (VmHWM) %.1f MiB, after convergence %.1f MiB, at end %.1f MiB   goal peak <= %.0f MiB: %s",
		r.peakRSS/mib, r.convergeRSS/mib, r.endRSS/mib, goalRSSMiB, met(r.peakRSS/mib <= goalRSSMiB))
	if r.settled {
		p("settle: no update, patch or delete by the operator for %s after %s", r.s.settleQuiet, r.settleWait.Round(time.Second))
	} else {
		p("settle: NOT quiet: the operator's updates, patches and deletes never stopped for %s within %s; measuring anyway", r.s.settleQuiet, r.s.settleMax)
	}
	p("idle window %s:", time.Duration(r.idle.seconds*float64(time.Second)).Round(time.Second))
	p("  clusters at its end: %s", formatCounts(r.states))
	p("  reconciles/cluster/min %.2f (%s)", r.idleReconciles(), formatCounts(r.idle.byResult))
	p("  requests/cluster/min   %.2f   goal <= %.0f: %s", r.idleRequests(), goalIdleRequests, met(r.idleRequests() <= goalIdleRequests))
	p("    reads  %.2f (%s)", r.idleReads(), r.readVerbs())
	p("    writes %.2f   goal %.0f: %s (less %.0f reviews of the benchmark's own metrics scrapes)",
		r.idleWrites(), goalIdleWrites, met(r.idle.writes == 0), r.scrapeReviews)
	p("    by method (requests in the window): %s", formatCounts(r.idle.byMethod))
	r.printPhase(p, "idle", r.idle)
	p("  CPU cores used: %s", r.idleCPU)
	p("  watches open on the API server at its end: %.0f (%s); before the operator: %.0f",
		total(r.watches.end), formatCounts(r.watches.end), total(r.watches.before))
	p("  kube-apiserver RSS: %.0f MiB at its end, %.0f MiB before the operator started", r.watches.apiserverEnd/mib, r.watches.apiserverBefore/mib)
	if r.s.audit {
		p("  the operator's watches open at its end (audit log): %.0f (%.1f per namespace): %s",
			r.operatorWatches(), r.operatorWatches()/float64(r.s.namespaces), formatKeyCounts(r.watches.operator))
	}
	if t := r.tenants; t != nil && r.s.audit {
		p("  the provisioner's requests per tenant per minute: %.2f (%s)",
			r.idle.perClusterMinute(keyTotal(t.provisionerIdle), r.s.namespaces), formatKeyCounts(t.provisionerIdle))
	}
	p("  workers busy %.1f%%, mean queue wait %.0f ms, queue depth at end %.0f", 100*r.busy(), 1000*r.idle.queueWaitMean(), r.queueDepth)
	if r.saturated() {
		p("  SATURATED: the %d workers had no slack, so the idle rates show their throughput, not the demand", r.workers)
	}
	r.printPaths(p)
}

func (r *result) printPhase(p func(string, ...any), name string, w window) {
	p("  %s: %d reconciles (%.1f per cluster), reconcile %.2f ms/pass, render %s, requests %d reads + %d writes",
		name, int(w.reconciles), w.reconciles/float64(r.s.clusters), 1000*w.reconcileMean(), renderMean(w),
		int(w.reads), int(w.writes))
}

// printPaths shows which requests make up the idle traffic.
func (r *result) printPaths(p func(string, ...any)) {
	if !r.s.audit {
		p("  (no split by verb and path: SCALE_AUDIT=0)")
		return
	}
	p("  idle requests by verb and path (audit log), top %d:", topPaths)
	for i, c := range r.idleByPath {
		if i == topPaths {
			break
		}
		p("    %8d  %6s/cluster/min  %s", int(c.n), r.rate(c.n), c.key)
	}
	p("  requests while converging by verb (audit log): %s", formatKeyCounts(byVerb(r.convByPath)))
	p("  requests while converging by verb and path (audit log), top %d:", topPaths)
	for i, c := range r.convByPath {
		if i == topPaths {
			break
		}
		p("    %8d  %6.2f/cluster  %s", int(c.n), c.n/float64(r.s.clusters), c.key)
	}
}

func formatCounts(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, int(m[k])))
	}
	return strings.Join(parts, ", ")
}

func formatKeyCounts(cs []keyCount) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s %d", c.key, int(c.n)))
	}
	return strings.Join(parts, ", ")
}
