package scale_test

import (
	"context"
	"fmt"
	"testing"
	"time"
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
	idleByPath                   []keyCount // nil without the proxy
	convByPath                   []keyCount
	convCPU, idleCPU             string // cores used per process
}

// run creates the clusters, waits for them to be applied, waits for the
// operator to go quiet, and measures an idle window.
func (h *harness) run(b *testing.B) *result {
	b.Helper()
	ctx := context.Background()
	r := &result{s: h.s, workers: h.op.workers, build: h.build}
	m0 := h.mustScrape(b)
	p0, cpu0 := h.proxyCounts(), cpuTimes()
	cv := &convergence{start: time.Now(), at: map[string]time.Duration{}}
	if err := createClusters(ctx, h.k8s, h.s.clusters); err != nil {
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
	r.convByPath = diffCounts(p0, h.proxyCounts())
	r.convCPU = cpuShare(cpu0, cpuTimes(), m1.at.Sub(m0.at))
	_, r.convergeRSS = h.mustRSS(b)
	b.Logf("all %d applied after %s; waiting up to %s for %s without a reconcile", h.s.clusters,
		r.converge.Round(time.Millisecond), h.s.settleMax, h.s.settleQuiet)
	r.settled, r.settleWait = h.settle(b)
	h.measureIdle(b, r)
	return r
}

// measureIdle scrapes the operator before and after the idle window.
func (h *harness) measureIdle(b *testing.B, r *result) {
	b.Helper()
	b.Logf("measuring an idle window of %s", h.s.idle)
	m2, p2, cpu2 := h.mustScrape(b), h.proxyCounts(), cpuTimes()
	time.Sleep(h.s.idle)
	m3, p3, cpu3 := h.mustScrape(b), h.proxyCounts(), cpuTimes()
	r.idle = diff(m2, m3)
	r.idleCPU = cpuShare(cpu2, cpu3, m3.at.Sub(m2.at))
	if h.proxy != nil {
		r.idleByPath = diffCounts(p2, p3)
	}
	r.queueDepth = m3.sum(metricQueueDepth, map[string]string{"name": reconcileControllerID})
	r.peakRSS, r.endRSS = h.mustRSS(b)
}

// settle waits until the reconcile counter stays still for settleQuiet,
// or settleMax passes: an operator that polls never goes quiet, and the
// window then measures it as it is.
func (h *harness) settle(b *testing.B) (bool, time.Duration) {
	b.Helper()
	start := time.Now()
	ours := map[string]string{"controller": reconcileControllerID}
	last := h.mustScrape(b).sum(metricReconciles, ours)
	lastChange := start
	for time.Since(start) < h.s.settleMax {
		time.Sleep(2 * time.Second)
		n := h.mustScrape(b).sum(metricReconciles, ours)
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
	s, err := scrapeMetrics(ctx, h.op.metricsURL)
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

func (h *harness) proxyCounts() map[string]float64 {
	if h.proxy == nil {
		return nil
	}
	return h.proxy.snapshot()
}
