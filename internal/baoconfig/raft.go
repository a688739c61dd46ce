package baoconfig

import (
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2/hclwrite"
)

func renderRaft(body *hclwrite.Body, r Raft) error {
	body.AppendNewline()
	rb := body.AppendNewBlock("storage", []string{"raft"}).Body()
	rb.SetAttributeRaw("path", stringTokens(orDefault(r.Path, DefaultDataPath)))
	if err := renderTimers(rb, r.Timers); err != nil {
		return err
	}
	if r.NonVoter {
		if !r.Initialized {
			return invalidf("storage: a non-voter joins an initialized cluster; it cannot take part in the bootstrap")
		}
		rb.SetAttributeRaw("retry_join_as_non_voter", boolTokens(true))
	}
	rb.AppendNewline()
	jb := rb.AppendNewBlock("retry_join", nil).Body()
	if r.Initialized {
		if err := renderAutoJoin(jb, r.AutoJoin); err != nil {
			return err
		}
	} else {
		if r.LeaderAPIAddr == "" {
			return invalidf("storage: the bootstrap join needs the leader API address of pod-0")
		}
		jb.SetAttributeRaw("leader_api_addr", stringTokens(r.LeaderAPIAddr))
	}
	if r.LeaderCAFile != "" {
		jb.SetAttributeRaw("leader_ca_cert_file", stringTokens(r.LeaderCAFile))
	}
	if r.LeaderTLSServerName != "" {
		jb.SetAttributeRaw("leader_tls_servername", stringTokens(r.LeaderTLSServerName))
	}
	return nil
}

// renderTimers writes the timers. OpenBao refuses to start when the
// effective reconcile interval is shorter than the update interval, so the
// check is made here against the values OpenBao will use.
func renderTimers(rb *hclwrite.Body, t Timers) error {
	pm := t.PerformanceMultiplier
	if pm == 0 {
		pm = DefaultPerformanceMultiplier
	}
	if pm < 1 || pm > 10 {
		return invalidf("storage: performance multiplier %d: want 1 to 10", pm)
	}
	reconcile := durationOr(t.AutopilotReconcileInterval, DefaultAutopilotReconcileInterval)
	update := durationOr(t.AutopilotUpdateInterval, DefaultAutopilotUpdateInterval)
	if reconcile < time.Second || update < time.Second {
		return invalidf("storage: autopilot intervals %s and %s: want at least 1s each, to bound the leader's load", reconcile, update)
	}
	if reconcile < update {
		return invalidf("storage: autopilot reconcile interval %s is shorter than the update interval %s", reconcile, update)
	}
	rb.SetAttributeRaw("performance_multiplier", intTokens(int64(pm)))
	rb.SetAttributeRaw("autopilot_reconcile_interval", stringTokens(formatDuration(reconcile)))
	rb.SetAttributeRaw("autopilot_update_interval", stringTokens(formatDuration(update)))
	return nil
}

func renderAutoJoin(jb *hclwrite.Body, a AutoJoin) error {
	if a.Namespace == "" || a.LabelSelector == "" {
		return invalidf("storage: the Kubernetes auto_join needs a namespace and a label selector")
	}
	port := a.Port
	if port == 0 {
		port = DefaultAutoJoinPort
	}
	if port < 1 || port > 65535 {
		return invalidf("storage: auto_join port %d out of range", port)
	}
	query := "provider=k8s namespace=" + discoverQuote(a.Namespace) +
		" label_selector=" + discoverQuote(a.LabelSelector)
	jb.SetAttributeRaw("auto_join", stringTokens(query))
	jb.SetAttributeRaw("auto_join_scheme", stringTokens("https"))
	jb.SetAttributeRaw("auto_join_port", intTokens(int64(port)))
	return nil
}

// discoverQuote quotes a go-discover value the way go-discover's own
// Config.String does, and also when it holds "=", which its parser would
// otherwise take for the next key (label selectors do).
func discoverQuote(s string) string {
	if s == "" || strings.ContainsAny(s, " \"\\=") {
		return strconv.Quote(s)
	}
	return s
}

func durationOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// formatDuration writes a duration as OpenBao's parseutil reads it, in the
// largest unit that divides it ("24h", "90s"), else in Go's form ("1.5s").
func formatDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}
