package backup

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/identity"
)

// Reasons of a restore drill (condition BackupVerified).
const (
	ReasonDrillCanaryMatched         = "DrillCanaryMatched"
	ReasonDrillRestoredWithoutCanary = "DrillRestoredWithoutCanary"
	ReasonDrillCanaryMismatch        = "DrillCanaryMismatch"
	ReasonDrillRestoreFailed         = "DrillRestoreFailed"
	ReasonDrillTimedOut              = "DrillTimedOut"
	ReasonDrillCopyNameTaken         = "DrillCopyNameTaken"
	ReasonDrillBackupGone            = "DrillBackupGone"
	ReasonDrillIdentityOutdated      = "DrillIdentityOutdated"
	ReasonDrillCopyRefused           = "DrillCopyRefused"
)

// DefaultDrillTimeout bounds a drill whose spec sets no timeout.
const DefaultDrillTimeout = 20 * time.Minute

// DrillPoll is how often a drill under way is looked at.
const DrillPoll = 5 * time.Second

// DrillObserved is what DecideDrill looks at.
type DrillObserved struct {
	Now     time.Time
	Cluster *v1alpha1.OpenBaoCluster
	// Backup is the OpenBaoBackup under drill, or else the newest
	// successful one (status.backup.lastBackupName); nil when gone.
	Backup *v1alpha1.OpenBaoBackup
	// Copy is the cluster named DrillCopyName; nil when it does not exist.
	Copy *v1alpha1.OpenBaoCluster
	// CanaryRead says the copy was asked for the canary (only once it holds
	// the snapshot); Canary is its answer, CanaryErr why there is none.
	CanaryRead bool
	Canary     map[string]any
	CanaryErr  error
}

// DrillDecision is what the drill step does.
type DrillDecision struct {
	// Verifying, LastVerified and LastSuccess are the next values of the
	// status.backup fields of the same names.
	Verifying, LastVerified *v1alpha1.BackupVerification
	LastSuccess             *metav1.Time
	// CreateCopy is the copy to create (one that exists stays).
	CreateCopy *v1alpha1.OpenBaoCluster
	// DeleteCopy deletes the copy.
	DeleteCopy bool
	// Ended is the drill that just ended, to be told.
	Ended *v1alpha1.BackupVerification
	// Waiting says why a drill under way has not ended yet.
	Waiting string
	Requeue time.Duration
}

// DecideDrill runs spec.backup.verify: each new successful backup is
// restored into a throwaway copy, its canary read back and compared, and
// the copy deleted; one drill at a time, its state in status.backup.
func DecideDrill(o DrillObserved) DrillDecision {
	c := o.Cluster
	st := v1alpha1.BackupStatus{}
	if c.Status.Backup != nil {
		st = *c.Status.Backup.DeepCopy()
	}
	d := DrillDecision{Verifying: st.Verifying, LastVerified: st.LastVerified, LastSuccess: st.LastVerifiedSuccess}
	enabled := c.Spec.Backup != nil && c.Spec.Backup.Verify != nil && c.Spec.Backup.Verify.Enabled
	ours := o.Copy != nil && o.Copy.Labels[v1alpha1.LabelDrillOf] == c.Name
	switch {
	case !enabled:
		d.Verifying, d.DeleteCopy = nil, ours
	case d.Verifying == nil && ours:
		d.DeleteCopy, d.Requeue = true, DrillPoll // a copy left over: gone before the next drill
	case d.Verifying == nil:
		d.start(o)
	default:
		d.follow(o, ours)
	}
	return d
}

func (d *DrillDecision) start(o DrillObserved) {
	b := o.Backup
	if b == nil || b.Status.Phase != v1alpha1.BackupSucceeded || (d.LastVerified != nil && d.LastVerified.Backup == b.Name) {
		return
	}
	now := metav1.NewTime(o.Now)
	d.Verifying = &v1alpha1.BackupVerification{Backup: b.Name, Key: b.Status.Key, Copy: o.Cluster.DrillCopyName(), StartTime: &now}
	if rev := identity.RecordedRevision(&o.Cluster.Status); rev < identity.PerRoleRevision {
		// Without the drill role the copy could only be logged in to with
		// a token the source accepts too.
		d.end(o, v1alpha1.DrillFailed, ReasonDrillIdentityOutdated, fmt.Sprintf("backup %s was not drilled: the "+
			"operator's identity in OpenBao is at revision %d and has no drill role before revision %d (condition %s "+
			"says how to add it); a copy can only be logged in to with the drill role, whose token the source refuses",
			b.Name, rev, identity.PerRoleRevision, v1alpha1.ConditionIdentityCurrent))
		return
	}
	d.CreateCopy = DrillCopyFor(o.Cluster, b)
	d.Requeue = DrillPoll
}

func (d *DrillDecision) follow(o DrillObserved, ours bool) {
	v := d.Verifying
	d.Requeue = DrillPoll
	fb := (*v1alpha1.FromBackupStatus)(nil)
	if ours {
		fb = o.Copy.Status.FromBackup
	}
	switch {
	case o.Copy != nil && !ours:
		d.end(o, v1alpha1.DrillFailed, ReasonDrillCopyNameTaken, fmt.Sprintf(
			"OpenBaoCluster %s exists and is not this cluster's drill copy (label %s); rename it or disable backup.verify", v.Copy, v1alpha1.LabelDrillOf))
	case o.Backup == nil:
		d.end(o, v1alpha1.DrillFailed, ReasonDrillBackupGone, "OpenBaoBackup "+v.Backup+" was deleted during its drill")
	case fb != nil && fb.Failed != "":
		d.end(o, v1alpha1.DrillFailed, ReasonDrillRestoreFailed, fmt.Sprintf("backup %s (%s) did not restore into copy %s (%s): %s",
			v.Backup, v.Key, v.Copy, fb.Failed, fb.FailedMessage))
	case fb != nil && fb.CompletedAt != nil && o.CanaryRead && o.CanaryErr == nil:
		d.compare(o)
	case o.Now.Sub(v.StartTime.Time) >= drillTimeout(o.Cluster):
		d.end(o, v1alpha1.DrillFailed, ReasonDrillTimedOut, fmt.Sprintf("backup %s was not restored and read back within %s: %s",
			v.Backup, drillTimeout(o.Cluster), d.waiting(o, fb)))
	case o.Copy == nil:
		d.CreateCopy = DrillCopyFor(o.Cluster, o.Backup)
		d.Waiting = "creating copy " + v.Copy
	default:
		d.Waiting = d.waiting(o, fb)
	}
}

func (d *DrillDecision) waiting(o DrillObserved, fb *v1alpha1.FromBackupStatus) string {
	switch {
	case o.Copy == nil:
		return "copy " + d.Verifying.Copy + " does not exist"
	case fb != nil && fb.CompletedAt != nil && o.CanaryErr != nil:
		return "reading the canary from copy " + d.Verifying.Copy + ": " + o.CanaryErr.Error()
	case fb != nil && fb.CompletedAt != nil:
		return "reading the canary from copy " + d.Verifying.Copy
	}
	return fmt.Sprintf("copy %s is %s: %s", d.Verifying.Copy, orUnknown(string(o.Copy.Status.Phase)),
		conditionMessage(o.Copy, v1alpha1.ConditionRestoredFromBackup))
}

// compare checks the canary the copy holds against the one the backup
// recorded: the copy must hold the data the backup was taken from.
func (d *DrillDecision) compare(o DrillObserved) {
	b := o.Backup
	if b.Status.Canary == "" {
		d.end(o, v1alpha1.DrillPassed, ReasonDrillRestoredWithoutCanary, fmt.Sprintf(
			"backup %s restored into a copy; it recorded no canary to read back (its cluster's identity predates the canary)", b.Name))
		return
	}
	if err := CanaryMatches(o.Canary, b.Name, b.Status.Canary); err != nil {
		d.end(o, v1alpha1.DrillFailed, ReasonDrillCanaryMismatch, fmt.Sprintf("backup %s restored, but the copy does not hold "+
			"the data it was taken from: %v", b.Name, err))
		return
	}
	d.end(o, v1alpha1.DrillPassed, ReasonDrillCanaryMatched, fmt.Sprintf(
		"backup %s restored into a copy, which holds the canary written at %s before its snapshot", b.Name, b.Status.Canary))
}

func (d *DrillDecision) end(o DrillObserved, result v1alpha1.DrillResult, reason, msg string) {
	now := metav1.NewTime(o.Now)
	v := d.Verifying.DeepCopy()
	v.CompletionTime, v.Result, v.Reason, v.Message = &now, result, reason, msg
	d.LastVerified, d.Ended, d.Verifying = v, v, nil
	if result == v1alpha1.DrillPassed {
		d.LastSuccess = &now
	}
	d.DeleteCopy = o.Copy != nil && o.Copy.Labels[v1alpha1.LabelDrillOf] == o.Cluster.Name
	d.Requeue = 0
}

func drillTimeout(c *v1alpha1.OpenBaoCluster) time.Duration {
	if t := c.Spec.Backup.Verify.Timeout; t != nil && t.Duration > 0 {
		return t.Duration
	}
	return DefaultDrillTimeout
}

func conditionMessage(c *v1alpha1.OpenBaoCluster, condType string) string {
	if cond := meta.FindStatusCondition(c.Status.Conditions, condType); cond != nil {
		return cond.Reason + ": " + cond.Message
	}
	return "no " + condType + " condition yet"
}

func orUnknown(s string) string {
	if s == "" {
		return "without a phase yet"
	}
	return s
}

// DrillCopyFor is the throwaway copy of cluster c that restores backup b:
// one server formed from b's object with b's digest, logging in with c's
// identity (the snapshot's), deleted whole with its volume and Secrets,
// and owned by c. It receives c's seal key and data, so it inherits every
// protection of c: its spec starts as a copy of c's (image verification,
// network policy and its API clients, scheduling constraints, config,
// values, and any field added later) and only the fields in
// DrillCopyOverrides differ, each for the reason given there.
func DrillCopyFor(c *v1alpha1.OpenBaoCluster, b *v1alpha1.OpenBaoBackup) *v1alpha1.OpenBaoCluster {
	fb := &v1alpha1.BackupBootstrap{
		Target: c.Spec.Backup.Target, SourceCluster: c.Name, Key: b.Status.Key, ExpectedSHA256: b.Status.SHA256,
		KeepSourceIdentity: true,
	}
	if c.Spec.Unseal.Type == v1alpha1.UnsealStatic || c.Spec.Unseal.Type == "" {
		fb.UnsealKeySecretRef = &v1alpha1.SecretKeyRef{Name: c.UnsealKeySecretName()}
	}
	spec := *c.Spec.DeepCopy()
	spec.Replicas = 1                                           // one server proves the snapshot
	spec.Paused, spec.StepDownRequest = false, ""               // the source's operations are not the copy's
	spec.RestartRequest = ""                                    // nor its restarts
	spec.Upgrade.JWTAuthRole, spec.Upgrade.JWTAuthPath = "", "" // the copy's own identity, then the source's drill role:
	spec.Upgrade.TokenSecretRef = nil                           // never a token the source accepts
	spec.TLS = v1alpha1.TLSSpec{}                               // certificates for the copy's own names, from its own CA
	spec.Ingress, spec.Gateway = nil, nil                       // the source's hosts and routes stay the source's
	spec.Backup = nil                                           // a copy never writes to the source's target
	spec.SelfInit = nil                                         // formed from the snapshot, never initialized by requests
	spec.RootToken = nil                                        // the snapshot brings the source's recovery keys; the API refuses recoveryKeys with fromBackup
	spec.DeletionPolicy = v1alpha1.DeletionPolicyDeleteAll      // nothing of a drill outlives it
	spec.Bootstrap = &v1alpha1.BootstrapSpec{FromBackup: fb}
	return &v1alpha1.OpenBaoCluster{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name: c.DrillCopyName(), Namespace: c.Namespace,
			Labels:          map[string]string{v1alpha1.LabelDrillOf: c.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c, v1alpha1.GroupVersion.WithKind(v1alpha1.Kind))},
		},
		Spec: spec,
	}
}

// DrillCopyOverrides are the spec fields (Go names) in which a drill copy
// differs from its source, set in DrillCopyFor; every other field is the
// source's. A test holds the two lists together.
var DrillCopyOverrides = []string{
	"Replicas", "Paused", "StepDownRequest", "RestartRequest", "Upgrade", "TLS", "Ingress", "Gateway", "Backup", "SelfInit", "RootToken",
	"DeletionPolicy", "Bootstrap",
}
