package scale_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// sectionOf names a mode's section of BENCHMARKS.md, which is also the
// make target that writes it.
func sectionOf(mode string) string {
	if mode == modeTenancy {
		return "bench-scale-tenancy"
	}
	return "bench-scale"
}

func markersOf(mode string) (begin, end string) {
	return "<!-- " + sectionOf(mode) + ":begin -->", "<!-- " + sectionOf(mode) + ":end -->"
}

// writeMarkdown rewrites the mode's section of path, between its markers,
// so that other benchmarks can keep sections of their own in the same
// file. A file without the markers gets the section appended.
func writeMarkdown(path string, r *result) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	markBegin, markEnd := markersOf(r.s.mode)
	section := markBegin + "\n" + r.markdown() + markEnd
	text := string(old)
	if text == "" {
		text = "# Benchmarks\n\nFigures measured on this project's machines; each section is rewritten by the make target it names.\n"
	}
	begin, end := strings.Index(text, markBegin), strings.Index(text, markEnd)
	if begin >= 0 && end > begin {
		text = text[:begin] + section + text[end+len(markEnd):]
	} else {
		text = strings.TrimRight(text, "\n") + "\n\n" + section + "\n"
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

func (r *result) markdown() string {
	var sb strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&sb, format+"\n", args...) }
	r.markdownIntro(p)
	p("")
	p("Measured %s on %s.", time.Now().Format("2006-01-02 15:04 MST"), machineFacts())
	p("")
	p("| figure | measured | goal | |")
	p("|---|---|---|---|")
	r.markdownTenants(p)
	p("| all clusters applied after creation began | %.1f s (p50 %.1f s) | ≤ %.0f s | %s |", r.converge.Seconds(), r.p50.Seconds(), goalConverge.Seconds(), met(r.converge <= goalConverge))
	p("| operator peak RSS (VmHWM) | %.1f MiB | ≤ %.0f MiB | %s |", r.peakRSS/mib, goalRSSMiB, met(r.peakRSS/mib <= goalRSSMiB))
	p("| operator RSS at the end | %.1f MiB | | |", r.endRSS/mib)
	p("| watches open on the API server at the end: all clients / before the operator started | %.0f / %.0f | | |", total(r.watches.end), total(r.watches.before))
	p("| kube-apiserver RSS at the end / before the operator started | %.0f MiB / %.0f MiB | | |", r.watches.apiserverEnd/mib, r.watches.apiserverBefore/mib)
	if r.s.audit {
		p("| the operator's watches open at the end (audit log) | %.0f (%.1f per namespace) | | |", r.operatorWatches(), r.operatorWatches()/float64(r.s.namespaces))
	}
	p("| idle reconciles / cluster / min | %.2f | | |", r.idleReconciles())
	p("| idle API requests / cluster / min | %.2f | ≤ %.0f | %s |", r.idleRequests(), goalIdleRequests, met(r.idleRequests() <= goalIdleRequests))
	p("| idle reads / cluster / min (%s) | %.2f | | |", r.readVerbs(), r.idleReads())
	p("| idle writes / cluster / min (less %.0f reviews of the benchmark's own metrics scrapes) | %.2f | %.0f | %s |",
		r.scrapeReviews, r.idleWrites(), goalIdleWrites, met(r.idle.writes == 0))
	p("| reconcile time per pass, converging / idle | %.2f ms / %.2f ms | | |", 1000*r.conv.reconcileMean(), 1000*r.idle.reconcileMean())
	p("| render time per pass, converging / idle | %s / %s | | |", renderMean(r.conv), renderMean(r.idle))
	p("| idle: workers busy, mean wait in the queue | %.0f %%, %.0f ms | | |", 100*r.busy(), 1000*r.idle.queueWaitMean())
	p("| CPU cores used while converging | %s | | |", r.convCPU)
	p("| CPU cores used while idle | %s | | |", r.idleCPU)
	p("")
	if r.saturated() {
		p("The %d workers were saturated in the idle window: its reconcile and request rates show their", r.workers)
		p("throughput, not what the operator asked for.")
		p("")
	}
	p("Idle window %s after %s. Clusters at its end: %s.", time.Duration(r.idle.seconds*float64(time.Second)).Round(time.Second),
		settleNote(r), formatCounts(r.states))
	p("")
	p("Idle requests by verb and path, per cluster per minute:")
	p("")
	p("| verb and path | per cluster / min |")
	p("|---|---|")
	for i, c := range r.idleByPath {
		if i == markdownPaths {
			break
		}
		p("| `%s` | %.2f |", c.key, r.idle.perClusterMinute(c.n, r.s.clusters))
	}
	r.markdownWatches(p)
	return sb.String()
}

// markdownIntro says what the mode runs and how a cluster counts as applied.
func (r *result) markdownIntro(p func(string, ...any)) {
	if r.s.mode == modeTenancy {
		p("## Many tenants, one operator (`make bench-scale-tenancy`)")
		p("")
		p("The tenancy install: the operator runs with `--tenancy` as the controller's ServiceAccount and the")
		p("provisioner (`openbao-operator provisioner`) as its own, each with exactly config/tenancy's rights.")
		p("%d namespaces are each handed over by an OpenBaoTenant of their own; once the provisioner reports", r.s.namespaces)
		p("every tenant Ready and the watches open on the API server stop growing, %d OpenBaoClusters", r.s.clusters)
		p("(only `spec.version` set) are created at once, from %d goroutines, round-robin over the namespaces.", createWorkers)
	} else {
		p("## Many clusters, one operator (`make bench-scale`)")
		p("")
		p("%d OpenBaoClusters (only `spec.version` set) are created at once, from %d goroutines, in %d namespaces", r.s.clusters, createWorkers, r.s.namespaces)
		p("against one operator binary (a cluster admin, the cluster-wide install).")
	}
	p("On envtest (kube-apiserver and etcd from `make tools`) with the real")
	p("kube-controller-manager (StatefulSet and garbage-collector controllers). There is no scheduler or")
	p("kubelet: pods stay Pending, and each cluster waits in its bootstrap step. A cluster is applied when its")
	p("status has `Degraded=False` (reason `Reconciled`) for its generation and its StatefulSet exists.")
	p("`reconcilePeriod` is 1m, the smallest allowed: the worst case of the periodic resync, so the idle")
	p("window holds resync passes; %d reconcile workers. Requests are counted at the operator's client", r.workers)
	p("(`rest_client_requests_total`): reads are GETs (get, list, watch), writes POST, PUT, PATCH, DELETE;")
	p("the API server's audit log (Metadata level, the operator's users only) splits them by verb and path.")
	p("Watches open are kube-apiserver's `apiserver_longrunning_requests{verb=\"WATCH\"}` (every client) and,")
	p("for the operator alone, the audit log's watches started and not yet completed.")
	p("")
	p("```sh")
	if r.s.mode == modeTenancy {
		p("make bench-scale-tenancy   # SCALE_CLUSTERS (default 1000), SCALE_NAMESPACES (default 500), SCALE_IDLE (default 12m)")
	} else {
		p("make bench-scale   # SCALE_CLUSTERS (default 200), SCALE_NAMESPACES (default 20), SCALE_IDLE (default 3m)")
	}
	p("```")
}

// markdownTenants gives the figures of handing the namespaces over.
func (r *result) markdownTenants(p func(string, ...any)) {
	t := r.tenants
	if t == nil {
		return
	}
	p("| all %d tenants Ready (provisioner) / watches settled (operator), after their creation began | %.1f s / %.1f s | | |",
		r.s.namespaces, t.ready.Seconds(), t.served.Seconds())
	p("| operator RSS with no namespace served / all %d served, no cluster yet | %.1f MiB / %.1f MiB (%.0f KiB per namespace) | | |",
		r.s.namespaces, t.startRSS/mib, t.servedRSS/mib, t.rssPerNamespace(r.s.namespaces)/1024)
	p("| watches open on the API server once served, all clients | %.0f (%.1f more per namespace than before the operator) | | |",
		total(t.watches), (total(t.watches)-total(r.watches.before))/float64(r.s.namespaces))
	if r.s.audit {
		p("| the provisioner's idle requests / tenant / min | %.2f | | |", r.idle.perClusterMinute(keyTotal(t.provisionerIdle), r.s.namespaces))
	}
}

// markdownWatches lists the operator's open watches by path.
func (r *result) markdownWatches(p func(string, ...any)) {
	if !r.s.audit {
		return
	}
	p("")
	p("The operator's watches open at the end of the idle window, by path (audit log):")
	p("")
	p("| path | watches | per namespace |")
	p("|---|---|---|")
	for _, c := range r.watches.operator {
		p("| `%s` | %.0f | %.2f |", c.key, c.n, c.n/float64(r.s.namespaces))
	}
}

func settleNote(r *result) string {
	if r.settled {
		return fmt.Sprintf("%s without an update, patch or delete by the operator", r.s.settleQuiet)
	}
	return fmt.Sprintf("%s in which the operator's updates, patches and deletes never stopped for %s", r.s.settleMax, r.s.settleQuiet)
}

// machineFacts describes where the figures come from: CPUs, memory, load
// (other builds may share the machine), Go and the commit measured.
func machineFacts() string {
	facts := []string{fmt.Sprintf("%d CPUs (`nproc`)", runtime.NumCPU())}
	if model := procField("/proc/cpuinfo", "model name"); model != "" {
		facts = append(facts, model)
	}
	var memKB float64
	if n, _ := fmt.Sscanf(procField("/proc/meminfo", "MemTotal"), "%f kB", &memKB); n == 1 {
		facts = append(facts, fmt.Sprintf("%.0f GiB", memKB/(1<<20)))
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		facts = append(facts, "load average "+strings.Join(strings.Fields(string(load))[:3], " ")+" at the end")
	}
	facts = append(facts, runtime.Version())
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		facts = append(facts, "commit "+strings.TrimSpace(string(out)))
	}
	return strings.Join(facts, ", ")
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == key {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return ""
}
