package upgrade

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
)

// Steps of a rollout, as status.upgrade.step names them.
const (
	StepStepDown    = "StepDown"
	StepPodReady    = "PodReady"
	StepHealthCheck = "HealthCheck"
	StepRaftSync    = "RaftSync"
	// StepReadReplicas is the wait, at the start of a rollout, for the
	// read replicas to run the new template first (ReadBehind).
	StepReadReplicas = "ReadReplicas"
)

// Requeue intervals while a rollout waits. Pod events wake the reconciler
// sooner; OpenBao's health and Raft state are polled. A released pod is
// polled often: every second it waits is a second the cluster runs one
// server short, and a pass while it waits costs a few reads.
const (
	pollInterval     = 2 * time.Second
	verifyInterval   = 500 * time.Millisecond
	stepDownInterval = 500 * time.Millisecond
	preflightRetry   = 10 * time.Second
)

// Condition is a condition's status, reason and message.
type Condition struct {
	Status  bool
	Reason  string
	Message string
}

// Event is a Kubernetes event to emit.
type Event struct {
	Warning bool
	Reason  string
	Message string
}

// Decision is what the reconciler carries out.
type Decision struct {
	// Partition is the StatefulSet partition to render.
	Partition int32
	// Upgrade is status.upgrade after this pass; nil when no rollout runs.
	Upgrade *v1alpha1.UpgradeStatus
	// StepDown names the pod whose server is asked to step down now.
	StepDown string
	// TakeSnapshot asks for the pre-upgrade snapshot of this rollout.
	TakeSnapshot bool
	// Upgrading is the Upgrading condition; nil leaves it as it is.
	Upgrading *Condition
	// Problem makes the cluster Degraded with its reason and message.
	Problem *Condition
	Events  []Event
	Requeue time.Duration
	// Started and Completed mark the rollout's ends, for metrics.
	Started, Completed bool
	// Settled, when not 0, is status.settledGeneration after this pass:
	// every server runs the template rendered from that generation.
	Settled int64
}

func (d *Decision) upgrading(status bool, reason, msg string) {
	d.Upgrading = &Condition{Status: status, Reason: reason, Message: msg}
}

func (d *Decision) event(warning bool, reason, msg string) {
	d.Events = append(d.Events, Event{Warning: warning, Reason: reason, Message: msg})
}

func (d *Decision) wait(after time.Duration) {
	if d.Requeue == 0 || after < d.Requeue {
		d.Requeue = after
	}
}

// Decide returns the next step of the rollout for what was observed.
func Decide(o Observed) Decision {
	d := Decision{Partition: o.Replicas}
	up := o.Upgrade.DeepCopy()
	if up != nil && o.StatefulSetObserved && up.TargetRevision != o.UpdateRevision {
		d.event(false, "UpgradeRestarted", fmt.Sprintf(
			"the pod template changed during the rollout to %s; the rollout starts over with the new template (spec.version %s)",
			up.TargetVersion, o.SpecVersion))
		up = nil
	}
	if up != nil && core(o.SpecVersion) != core(up.TargetVersion) {
		lock(o, up, &d)
		return d
	}
	if up == nil && o.Upgrade == nil {
		up = lostStart(o, &d)
	}
	if up == nil {
		up = preflight(o, &d)
		if up == nil {
			return d
		}
	}
	roll(o, up, &d)
	return d
}

// lostStart takes on a rollout whose first release the StatefulSet holds
// but whose status write was lost (a conflict with a stale cache, or the
// operator killed in between): the live partition is below the live
// replica count and no rollout is recorded. The preflight would find the
// released pod not Ready and hold, rendering the partition at the replica
// count again, and the StatefulSet controller would recreate that pod on
// the old template, to replace it once more when the rollout starts. A
// refused version or an operation in the way is left to the preflight,
// which holds every pod on purpose.
func lostStart(o Observed, d *Decision) *v1alpha1.UpgradeStatus {
	if !o.LivePartitionKnown || !o.StatefulSetObserved || o.LivePartition < 0 || o.LivePartition >= o.LiveReplicas ||
		o.LiveReplicas != o.Replicas || len(o.Behind()) == 0 || !o.Lock.OK() || !o.Slot.OK() {
		return nil
	}
	if reason, _ := refused(o); reason != "" {
		return nil
	}
	if o.Settings.PreUpgradeSnapshot && !o.SnapshotDone {
		return nil
	}
	d.Started = true
	d.event(false, "UpgradeReleaseAdopted", fmt.Sprintf("the StatefulSet holds partition %d with no rollout recorded: the pass that "+
		"started the rollout to %s lost its status write; the rollout goes on from it rather than roll %s back",
		o.LivePartition, o.SpecVersion, podName(o, o.LivePartition)))
	up := &v1alpha1.UpgradeStatus{
		TargetVersion: o.SpecVersion, FromVersion: Reference(o.CurrentVersion, o.HighestVersion), TargetRevision: o.UpdateRevision,
		StartedAt: metav1.NewTime(o.Now), CurrentPartition: o.LivePartition, ResumeRequest: o.Settings.ResumeRequest,
		Cause: o.Cause, Step: StepPodReady, StepStartedAt: ptrTime(o.Now),
	}
	for ord := o.LivePartition + 1; ord < o.Replicas; ord++ {
		up.CompletedPods = append(up.CompletedPods, podName(o, ord))
	}
	return up
}

// lock decides the pass in which spec.version changed during a rollout:
// the chart renders the new template in this very pass, one pass before
// the StatefulSet reports its revision, and the StatefulSet controller
// replaces the pods at or above the partition onto it by itself, one at
// a time. No further pod is released in this pass. When the new version
// is refused (older than a release a server ran, or one that cannot run
// the seal), every pod is held (partition at the replica count), so that
// no server is taken onto it; otherwise the partition stays, so that a
// rolled pod that crash-loops on the old target can be rolled forward by
// a fixed release. Once the StatefulSet reports the new revision, the
// rollout starts over from the highest ordinal (Decide) or is refused by
// the preflight. A rebuild of the same release (2.4.1 and 2.4.1-<hash>) is
// not a change of version here.
func lock(o Observed, up *v1alpha1.UpgradeStatus, d *Decision) {
	d.Upgrade, d.Partition = up, up.CurrentPartition
	held := "no further pod is released"
	if reason, _ := VersionRefused(o.CurrentVersion, o.HighestVersion, o.SpecVersion, o.Settings.AllowDowngrade, o.SealType); reason != "" {
		up.CurrentPartition, up.Step, up.StepStartedAt = o.Replicas, "", ptrTime(o.Now)
		d.Partition, held = o.Replicas, "every pod is held, as it is refused ("+reason+")"
	}
	d.upgrading(true, v1alpha1.ReasonUpgradeInProgress, fmt.Sprintf("spec.version changed to %s during the rollout to %s: "+
		"%s until the StatefulSet reports the new template", o.SpecVersion, up.TargetVersion, held))
	d.wait(pollInterval)
}

// preflight starts a rollout when one is due and safe, and says what holds
// it otherwise; it returns the new status.upgrade, or nil.
func preflight(o Observed, d *Decision) *v1alpha1.UpgradeStatus {
	if !o.StatefulSetObserved {
		d.wait(pollInterval)
		return nil
	}
	if len(o.Behind()) == 0 {
		d.Settled = o.RenderedGeneration
		if o.UpgradingReason != v1alpha1.ReasonUpgradeComplete {
			d.upgrading(false, v1alpha1.ReasonUpToDate, "every server runs the current pod template")
		}
		return nil
	}
	if reason, msg, retry := hold(o); reason != "" {
		if o.Lock.OK() && o.Slot.OK() { // an operation or a rollout slot in the way is work under way, not a fault
			d.Problem = &Condition{Status: true, Reason: reason, Message: msg}
		}
		d.upgrading(false, reason, msg)
		d.wait(retry)
		return nil
	}
	if o.Settings.PreUpgradeSnapshot && !o.SnapshotDone {
		d.TakeSnapshot = true
		d.upgrading(true, v1alpha1.ReasonUpgradeInProgress, "taking the pre-upgrade snapshot before the first pod is rolled")
		d.wait(pollInterval)
		return nil
	}
	d.Started = true
	d.event(false, "UpgradeStarted", fmt.Sprintf("rolling %d servers to the new pod template (version %s, from %s)",
		o.Replicas, o.SpecVersion, orUnknown(Reference(o.CurrentVersion, o.HighestVersion))))
	up := &v1alpha1.UpgradeStatus{
		TargetVersion: o.SpecVersion, FromVersion: Reference(o.CurrentVersion, o.HighestVersion), TargetRevision: o.UpdateRevision,
		StartedAt: metav1.NewTime(o.Now), CurrentPartition: o.Replicas, ResumeRequest: o.Settings.ResumeRequest,
		Cause: o.Cause,
	}
	if o.Read != nil && o.Read.Replicas > 0 {
		// The read StatefulSet took the new template in the same apply and
		// rolls now; its wait is timed from here (readFirst).
		next(o, up, StepReadReplicas)
	}
	return up
}

// hold says why a due rollout may not start, each message saying what to
// do, and when to look again: a refused spec waits for the user (whose
// change wakes the reconciler anyway); a cluster settling after a restart
// or a rollout, one being restored or backed up, or one waiting for a
// rollout slot (read from the cache; OpenBao is not asked) is polled.
func hold(o Observed) (reason, message string, retry time.Duration) {
	if !o.Lock.OK() {
		return o.Lock.Reason, o.Lock.Message, pollInterval
	}
	if !o.Slot.OK() {
		return v1alpha1.ReasonWaitingForRolloutSlot, o.Slot.Message(), pollInterval
	}
	if reason, message := refused(o); reason != "" {
		return reason, message, preflightRetry
	}
	if message := unsafe(o); message != "" {
		return v1alpha1.ReasonPreflightFailed, message, pollInterval
	}
	return "", "", 0
}

// VersionRefused says why a rollout to target must not run: a downgrade
// without allowDowngrade from the newest release the servers run or ran
// (Reference of current and highest), or a release that cannot run the
// cluster's seal. The admission webhook refuses the same change of
// spec.version with the same words.
func VersionRefused(current, highest, target string, allowDowngrade bool, seal v1alpha1.UnsealType) (reason, message string) {
	ran := Reference(current, highest)
	if IsDowngrade(ran, target) && !allowDowngrade {
		who := "the running " + ran
		if core(ran) != core(current) {
			who = ran + ", which a server ran since the last rollout completed (status.highestVersion)"
		}
		return v1alpha1.ReasonDowngradeBlocked, fmt.Sprintf("spec.version %s is older than %s, and Raft data written by a "+
			"newer release may not be readable by an older one. Set spec.version back to %s or later, or restore a backup taken "+
			"on the older release and set spec.upgrade.allowDowngrade", target, who, ran)
	}
	if msg := Incompatible(target, seal); msg != "" {
		return v1alpha1.ReasonPreflightFailed, msg
	}
	return "", ""
}

// refused says why the spec asks for a rollout that must not run.
func refused(o Observed) (reason, message string) {
	if reason, message := VersionRefused(o.CurrentVersion, o.HighestVersion, o.SpecVersion, o.Settings.AllowDowngrade, o.SealType); reason != "" {
		return reason, message
	}
	if o.Settings.PreUpgradeSnapshot && o.SnapshotProblem != "" {
		return v1alpha1.ReasonPreflightFailed, "spec.upgrade.preUpgradeSnapshot: " + o.SnapshotProblem
	}
	return "", ""
}

// unsafe says why the cluster cannot lose a server now.
func unsafe(o Observed) string {
	if names := notReady(o.Pods); len(names) > 0 {
		return fmt.Sprintf("not every server is Ready (%s): a rollout starts only on a healthy "+
			"cluster, and starts by itself once they are", strings.Join(names, ", "))
	}
	if o.Raft == nil {
		return "the Raft state cannot be read, so quorum cannot be checked: " + o.RaftProblem
	}
	if !o.Raft.Healthy && !onlyNonVotersUnhealthy(o.Raft) {
		return "autopilot reports the cluster unhealthy; the rollout starts once every server is healthy"
	}
	if lagging := laggingVoters(o); len(lagging) > 0 {
		return fmt.Sprintf("voters trail the leader by more than %d Raft entries (%s); the rollout "+
			"starts once they catch up", o.Settings.MaxRaftLag, strings.Join(lagging, ", "))
	}
	return ""
}

// onlyNonVotersUnhealthy says autopilot's verdict is down to non-voters
// (read replicas) alone: they hold no vote, so a sick one costs the
// voters' quorum nothing and does not hold the voters' rollout.
func onlyNonVotersUnhealthy(r *Raft) bool {
	sick := 0
	for _, s := range r.Servers {
		if s.Healthy {
			continue
		}
		if s.Voter {
			return false
		}
		sick++
	}
	return sick > 0
}

func notReady(pods []Pod) []string {
	var out []string
	for _, p := range pods {
		if !p.Ready {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

func laggingVoters(o Observed) []string {
	var out []string
	for id, s := range o.Raft.Servers {
		if s.Voter && (!s.LagKnown || s.Lag > o.Settings.MaxRaftLag) {
			out = append(out, fmt.Sprintf("%s by %s", id, lagText(s)))
		}
	}
	sort.Strings(out)
	return out
}

func lagText(s Server) string {
	if !s.LagKnown {
		return "an unknown number of Raft entries"
	}
	return fmt.Sprintf("%d Raft entries", s.Lag)
}

func orUnknown(v string) string {
	if v == "" {
		return "an unknown version"
	}
	return v
}
