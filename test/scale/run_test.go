package scale_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/openbao/operator/test/auditlog"
)

// result is what one run measured.
type result struct {
	s                            settings
	workers                      int
	build, create, converge, p50 time.Duration
	total                        time.Duration
	peakRSS, convergeRSS, endRSS float64 // bytes
	conv, idle                   window
	settled                      bool
	settleWait                   time.Duration
	queueDepth                   float64
	idleByPath                   []keyCount // nil with SCALE_AUDIT=0
	convByPath                   []keyCount
	convCPU, idleCPU             string             // cores used per process
	states                       map[string]float64 // clusters by phase and bootstrap reason, after the window
	watches                      watchCounts
	// scrapeReviews are the idle window's TokenReviews and
	// SubjectAccessReviews of the benchmark's own metrics scrapes, taken
	// out of its writes (audit log; 0 with SCALE_AUDIT=0).
	scrapeReviews float64
	tenants       *tenantPhase // tenancy mode only
}

// watchCounts are the watches open on the API server (all clients, by
// resource) before the operator started and at the end of the idle
// window, and the operator's own then, by path, from the audit log.
type watchCounts struct {
	before, end map[string]float64
	// kube-apiserver's VmRSS then, in bytes.
	apiserverBefore, apiserverEnd float64
	operator                      []keyCount // empty with SCALE_AUDIT=0
}

// tenantPhase is what handing the namespaces over cost, before any
// cluster existed: the provisioner binding the tenant role in each, then
// the operator opening the informers of each.
type tenantPhase struct {
	ready, served       time.Duration      // since the tenants' creation began
	startRSS, servedRSS float64            // VmRSS with no namespace served and with all
	watches             map[string]float64 // on the API server once served
	provisionerIdle     []keyCount         // the provisioner's idle requests; empty with SCALE_AUDIT=0
}

// run creates the clusters, waits for them to be applied, waits for the
// operator to go quiet, and measures an idle window.
func (h *harness) run(b *testing.B) *result {
	b.Helper()
	ctx := context.Background()
	r := &result{s: h.s, workers: h.op.workers, build: h.build}
	r.watches.before, r.watches.apiserverBefore = h.watchesBefore, h.apiserverBefore
	if h.s.mode == modeTenancy {
		r.tenants = h.handOver(b)
	}
	m0 := h.mustScrape(b)
	cpu0 := cpuTimes()
	cv := &convergence{start: time.Now(), at: map[string]time.Duration{}}
	if err := createClusters(ctx, h.k8s, h.s.clusters, h.s.namespaces); err != nil {
		h.fatal(b, err)
	}
	r.create = time.Since(cv.start)
	b.Logf("created %d clusters in %s; waiting for them to be applied", h.s.clusters, r.create.Round(time.Millisecond))
	var err error
	if r.converge, err = cv.waitConverged(ctx, h.k8s, h.s.clusters, h.s.convergeMax); err != nil {
		h.describeStragglers(b, cv)
		h.fatal(b, fmt.Errorf("convergence: %w", err))
	}
	r.p50 = cv.percentile(0.5)
	m1 := h.mustScrape(b)
	r.conv = diff(m0, m1)
	r.convCPU = cpuShare(cpu0, cpuTimes(), m1.at.Sub(m0.at))
	_, r.convergeRSS = h.mustRSS(b)
	b.Logf("all %d applied after %s; waiting up to %s for %s without an update, patch or delete by the operator", h.s.clusters,
		r.converge.Round(time.Millisecond), h.s.settleMax, h.s.settleQuiet)
	r.settled, r.settleWait = h.settle(b)
	m2, m3 := h.measureIdle(b, r)
	if h.audit != "" {
		h.readAudit(b, r, auditlog.Span{From: m0.at, To: m1.at}, auditlog.Span{From: m2.at, To: m3.at})
	}
	return r
}

// handOver creates an OpenBaoTenant per namespace and waits until the
// provisioner reports each ready and the operator's watches stop growing:
// it then serves every namespace.
func (h *harness) handOver(b *testing.B) *tenantPhase {
	b.Helper()
	ctx := context.Background()
	t := &tenantPhase{}
	_, t.startRSS = h.mustRSS(b)
	start := time.Now()
	if err := createTenants(ctx, h.k8s, h.s.namespaces); err != nil {
		h.fatal(b, err)
	}
	if err := waitTenantsReady(ctx, h.k8s, h.s.namespaces, h.s.convergeMax); err != nil {
		h.fatal(b, fmt.Errorf("tenants: %w", err))
	}
	t.ready = time.Since(start)
	b.Logf("%d tenants ready after %s; waiting for the operator's watches to stop growing", h.s.namespaces, t.ready.Round(time.Millisecond))
	var err error
	if t.watches, err = h.watchesSettled(ctx, start); err != nil {
		h.fatal(b, err)
	}
	t.served = time.Since(start) - watchesQuiet
	_, t.servedRSS = h.mustRSS(b)
	b.Logf("%.0f watches open on the API server %s after the tenants' creation began", total(t.watches), t.served.Round(time.Second))
	return t
}

// watchesQuiet is how long the count of watches must stay still to count
// as settled; the operator opens a namespace's in well under a second.
const watchesQuiet = 15 * time.Second

// watchesSettled polls the API server's open watches until their count
// stays still for watchesQuiet, and returns them.
func (h *harness) watchesSettled(ctx context.Context, since time.Time) (map[string]float64, error) {
	var last map[string]float64
	lastChange := time.Now()
	for time.Since(since) < h.s.convergeMax {
		w, err := h.api.watches(ctx)
		if err != nil {
			return nil, err
		}
		if last == nil || total(w) != total(last) {
			last, lastChange = w, time.Now()
		}
		if time.Since(lastChange) >= watchesQuiet {
			return last, nil
		}
		time.Sleep(time.Second)
	}
	return nil, fmt.Errorf("the watches open on the API server still changed %s after the tenants' creation began", h.s.convergeMax)
}

// measureIdle scrapes the operator before and after the idle window.
func (h *harness) measureIdle(b *testing.B, r *result) (m2, m3 scrape) {
	b.Helper()
	b.Logf("measuring an idle window of %s", h.s.idle)
	cpu2 := cpuTimes()
	m2 = h.mustScrape(b)
	time.Sleep(h.s.idle)
	m3 = h.mustScrape(b)
	cpu3 := cpuTimes()
	r.idle = diff(m2, m3)
	r.idleCPU = cpuShare(cpu2, cpu3, m3.at.Sub(m2.at))
	r.queueDepth = m3.sum(metricQueueDepth, map[string]string{"name": reconcileControllerID})
	r.peakRSS, r.endRSS = h.mustRSS(b)
	h.op.logHeap(b, h.s.logDir)
	var err error
	if r.watches.end, err = h.api.watches(context.Background()); err != nil {
		h.fatal(b, err)
	}
	r.watches.apiserverEnd = childRSS("kube-apiserver")
	if r.states, err = clusterStates(context.Background(), h.k8s); err != nil {
		h.fatal(b, err)
	}
	return m2, m3
}

// readAudit splits the operator's requests by verb and path from the API
// server's audit log, once its batches are written.
func (h *harness) readAudit(b *testing.B, r *result, converging, idle auditlog.Span) {
	b.Helper()
	time.Sleep(auditFlush)
	user := operatorUserOf(h.s.mode)
	counts, err := countAudit(h.audit, user, converging, idle)
	if err != nil {
		h.fatal(b, err)
	}
	r.convByPath, r.idleByPath = diffCounts(nil, counts[0]), diffCounts(nil, counts[1])
	if r.scrapeReviews, err = scrapeReviews(h.audit, user, idle); err != nil {
		h.fatal(b, err)
	}
	r.idle.writes -= r.scrapeReviews
	if r.idle.byMethod["POST"] -= r.scrapeReviews; r.idle.byMethod["POST"] == 0 {
		delete(r.idle.byMethod, "POST")
	}
	open, err := openWatches(h.audit, user, idle.To)
	if err != nil {
		h.fatal(b, err)
	}
	r.watches.operator = diffCounts(nil, open)
	if r.tenants != nil {
		prov, err := countAudit(h.audit, provisionerUser, idle)
		if err != nil {
			h.fatal(b, err)
		}
		r.tenants.provisionerIdle = diffCounts(nil, prov[0])
	}
}

// auditFlush is ample for the log backend's batches (buffered, not timed).
const auditFlush = 2 * time.Second

// settle waits until the operator has sent no update, patch or delete for
// settleQuiet, or settleMax passes. Reconciles never stop (resync passes of
// a thousand clusters come every few milliseconds), but writes do once
// what the clusters wait for has settled too: kube-controller-manager
// creating their pods, each of which moves its cluster's bootstrap and is
// written to its status. An operator that keeps writing is measured as it
// is when settleMax runs out.
func (h *harness) settle(b *testing.B) (bool, time.Duration) {
	b.Helper()
	start := time.Now()
	last := h.mustScrape(b).changes()
	lastChange := start
	for time.Since(start) < h.s.settleMax {
		time.Sleep(2 * time.Second)
		n := h.mustScrape(b).changes()
		if n != last {
			last, lastChange = n, time.Now()
		}
		if time.Since(lastChange) >= h.s.settleQuiet {
			return true, time.Since(start)
		}
	}
	return false, time.Since(start)
}

func (h *harness) mustScrape(b *testing.B) scrape {
	b.Helper()
	if h.op.exited() {
		h.fatal(b, fmt.Errorf("the operator exited"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := scrapeMetrics(ctx, h.op.metricsURL, h.op.metricsToken)
	if err != nil {
		h.fatal(b, err)
	}
	return s
}

func (h *harness) mustRSS(b *testing.B) (hwm, rss float64) {
	b.Helper()
	hwm, rss, err := procStatus(h.op.cmd.Process.Pid)
	if err != nil {
		h.fatal(b, err)
	}
	return hwm, rss
}
