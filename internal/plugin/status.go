// Package plugin holds the commands of kubectl-openbao. They act with the
// caller's own Kubernetes rights, through the clients they are given, and
// never read the root token: the status comes from the OpenBaoCluster's
// status (which the operator fills, Raft included), the pods' labels and
// the public certificates of the TLS Secrets.
package plugin

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/podstate"
)

// StatusInput is everything `status` shows, gathered before it is printed.
type StatusInput struct {
	Cluster *v1alpha1.OpenBaoCluster
	Pods    []corev1.Pod
	// ReadPods are the read replicas (spec.readReplicas), listed after
	// the voters.
	ReadPods []corev1.Pod
	// Certificates are the expiry of each certificate by what it is ("server",
	// "ca"); a missing entry prints the reason in CertificateProblems.
	Certificates        map[string]time.Time
	CertificateProblems map[string]string
	Now                 time.Time
}

// WriteStatus prints the cluster at a glance, as a plain-text report.
func WriteStatus(w io.Writer, in StatusInput) error {
	c, st := in.Cluster, in.Cluster.Status
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(cells ...any) { fmt.Fprintln(tw, joinCells(cells)) }
	row("Cluster:", c.Namespace+"/"+c.Name)
	row("Phase:", orNone(string(st.Phase)))
	row("Version:", fmt.Sprintf("%s (spec %s)", orNone(st.CurrentVersion), c.Spec.Version))
	row("Ready:", fmt.Sprintf("%d/%d", st.ReadyReplicas, c.Spec.Replicas))
	row("Active server:", orNone(st.ActiveLeader))
	row("Paused:", strconv.FormatBool(c.Spec.Paused))
	row("Root token:", RootTokenState(c, in.Now))
	row("Recovery keys:", RecoveryKeysState(c))
	row("Raft:", raftSummary(st.Raft, in.Now))
	for _, what := range []string{"server", "ca"} {
		row("Certificate ("+what+"):", certificateLine(in, what))
	}
	row("Last backup:", lastBackup(st.Backup, in.Now))
	if sd := st.StepDown; sd != nil {
		row("Last step-down:", fmt.Sprintf("%s %s (%s ago, request %s)", sd.Result, orNone(sd.Server), ago(in.Now, sd.Time.Time), sd.Request))
	}
	if st.Upgrade != nil {
		row("Upgrade:", fmt.Sprintf("to %s, partition %d, halted: %s", st.Upgrade.TargetVersion,
			st.Upgrade.CurrentPartition, orNone(st.Upgrade.Halted)))
	}
	row()
	writeServers(tw, in)
	row()
	row("CONDITION", "STATUS", "REASON", "MESSAGE")
	for _, cond := range st.Conditions {
		row(cond.Type, string(cond.Status), cond.Reason, cond.Message)
	}
	return tw.Flush()
}

// writeServers prints one line per server (see servers).
func writeServers(tw io.Writer, in StatusInput) {
	fmt.Fprintln(tw, "SERVER\tROLE\tSEALED\tREADY\tRAFT\tHEALTHY\tLAG\tLAST CONTACT")
	for _, s := range servers(in) {
		healthy, lag := "-", "-"
		if s.Healthy != nil {
			healthy, lag = strconv.FormatBool(*s.Healthy), strconv.FormatInt(*s.Lag, 10)
		}
		fmt.Fprintln(tw, joinCells([]any{s.Name, s.Role, s.Sealed, strconv.FormatBool(s.Ready), s.Raft, healthy, lag, orNone(s.LastContact)}))
	}
}

func raftRole(s v1alpha1.RaftServer, leader string) string {
	switch {
	case s.ID == leader:
		return "leader"
	case s.Voter:
		return "voter"
	default:
		return "non-voter"
	}
}

func labelWord(p podstate.Pod, label, yes, no string) string {
	v, known := p.LabelState(label)
	switch {
	case !known:
		return "unknown"
	case v:
		return yes
	default:
		return no
	}
}

func raftSummary(r *v1alpha1.RaftStatus, now time.Time) string {
	if r == nil {
		return "not read yet"
	}
	health := "healthy"
	if !r.Healthy {
		health = "UNHEALTHY"
	}
	return fmt.Sprintf("%s, leader %s, failure tolerance %d (read %s ago)", health, orNone(r.Leader),
		r.FailureTolerance, ago(now, r.ObservedAt.Time))
}

func certificateLine(in StatusInput, what string) string {
	expiry, ok := in.Certificates[what]
	if !ok {
		return "unknown: " + orNone(in.CertificateProblems[what])
	}
	left := expiry.Sub(in.Now)
	if left <= 0 {
		return fmt.Sprintf("EXPIRED at %s", expiry.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("expires %s (in %s)", expiry.UTC().Format(time.RFC3339), roughly(left))
}

func lastBackup(b *v1alpha1.BackupStatus, now time.Time) string {
	if b == nil || b.LastBackupTime == nil {
		return "none"
	}
	line := fmt.Sprintf("%s (%s ago), %s, %d bytes", b.LastBackupTime.UTC().Format(time.RFC3339),
		ago(now, b.LastBackupTime.Time), orNone(b.LastBackupName), b.LastBackupSize)
	if b.ConsecutiveFailures > 0 {
		line += fmt.Sprintf("; %d failed since: %s", b.ConsecutiveFailures, b.LastFailureReason)
	}
	return line
}

// CertificateExpiry reads the NotAfter of the first certificate in PEM.
func CertificateExpiry(pemBytes []byte) (time.Time, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		return time.Time{}, fmt.Errorf("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse the certificate: %w", err)
	}
	return cert.NotAfter, nil
}

func ago(now, then time.Time) string { return roughly(now.Sub(then)) }

// roughly prints a duration the way kubectl prints ages.
func roughly(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func joinCells(cells []any) string {
	out := ""
	for i, c := range cells {
		if i > 0 {
			out += "\t"
		}
		out += fmt.Sprint(c)
	}
	return out
}
