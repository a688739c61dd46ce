package upgrade

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
)

// roll advances a rollout as far as what was observed allows: steps that
// need no wait follow each other in one pass.
func roll(o Observed, up *v1alpha1.UpgradeStatus, d *Decision) {
	d.Upgrade, d.Partition = up, up.CurrentPartition
	adopt(o, up, d)
	if up.Halted != "" && !resume(o, up, d) {
		return
	}
	// Each pod takes at most four advances (verify, health, sync, release).
	for i := 0; i < 4*int(o.Replicas)+4; i++ {
		if !advance(o, up, d) {
			break
		}
	}
	d.Partition = up.CurrentPartition
	if d.Upgrade != nil && d.Upgrading == nil && up.Halted == "" {
		d.upgrading(true, v1alpha1.ReasonUpgradeInProgress, progress(o, up))
	}
}

// adopt takes on a release the StatefulSet already holds but the status
// does not: a pass verified the pod above, lowered the partition and lost
// its status write. Rendering the recorded partition would raise it again,
// and the StatefulSet controller would recreate the released pod, which it
// may be replacing, on the old template, only to replace it once more at
// the next release. The rollout goes on from the live partition instead,
// the released pod to be verified; the pods above it passed verify in the
// lost pass (a release follows only a verified pod).
func adopt(o Observed, up *v1alpha1.UpgradeStatus, d *Decision) {
	if !o.LivePartitionKnown || !o.StatefulSetObserved || o.UpdateRevision != up.TargetRevision ||
		o.LivePartition < 0 || o.LivePartition >= up.CurrentPartition || up.Halted != "" {
		return
	}
	for ord := o.LivePartition + 1; ord <= up.CurrentPartition && ord < o.Replicas; ord++ {
		if name := podName(o, ord); !slices.Contains(up.CompletedPods, name) {
			up.CompletedPods = append(up.CompletedPods, name)
		}
	}
	d.event(false, "UpgradeReleaseAdopted", fmt.Sprintf("the StatefulSet holds partition %d, below the %d status.upgrade records: "+
		"the pass that released %s lost its status write; the rollout goes on from it rather than roll that pod back",
		o.LivePartition, up.CurrentPartition, podName(o, o.LivePartition)))
	up.CurrentPartition = o.LivePartition
	next(o, up, StepPodReady)
}

// resume lifts a halt once spec.upgrade.resumeRequest has a new value;
// otherwise the halt holds, and stays told.
func resume(o Observed, up *v1alpha1.UpgradeStatus, d *Decision) bool {
	if o.Settings.ResumeRequest == up.ResumeRequest {
		msg := haltMessage(up)
		if what := blocker(o, up); what != "" {
			msg += ". Now: " + what
		}
		d.Problem = &Condition{Status: true, Reason: up.Halted, Message: msg}
		d.upgrading(true, v1alpha1.ReasonUpgradeHalted, msg)
		return false
	}
	d.event(false, "UpgradeResumed", fmt.Sprintf("spec.upgrade.resumeRequest changed to %q: the rollout to %s resumes after %s",
		o.Settings.ResumeRequest, up.TargetVersion, up.Halted))
	up.Halted, up.ResumeRequest = "", o.Settings.ResumeRequest
	up.StepStartedAt = ptrTime(o.Now)
	return true
}

// advance takes one step; false means the rollout waits (or is over).
func advance(o Observed, up *v1alpha1.UpgradeStatus, d *Decision) bool {
	if up.CurrentPartition < o.Replicas && up.Step != "" && up.Step != StepStepDown {
		return verify(o, up, d)
	}
	if problem := releasedProblem(o, up); problem != "" {
		return waitOrHalt(o, up, d, o.Settings.PodReadyTimeout, v1alpha1.ReasonPodReadyTimeout, problem)
	}
	if up.CurrentPartition <= 0 {
		complete(o, up, d)
		return false
	}
	if !readFirst(o, up, d) {
		return false
	}
	return release(o, up, d)
}

// verify checks the pod released last: Ready on the new template, then
// also initialized and unsealed, then also caught up with the Raft log.
// Each step checks the ones before it again, so the pod is recorded as
// done only when all hold in one observation.
func verify(o Observed, up *v1alpha1.UpgradeStatus, d *Decision) bool {
	name := podName(o, up.CurrentPartition)
	steps := checks(o, up, name)
	for i, s := range steps {
		if problem := s.problem(); problem != "" {
			if s.step == StepRaftSync {
				stepDownEarly(o, up, d)
			}
			// A check of an earlier step that fails again waits under the
			// current step's timeout.
			cur := steps[min(stepIndex(up.Step), len(steps)-1)]
			return waitOrHalt(o, up, d, cur.timeout, cur.reason, problem)
		}
		if s.step == up.Step {
			if i+1 < len(steps) {
				next(o, up, steps[i+1].step)
				return true
			}
			break
		}
	}
	up.CompletedPods = append(up.CompletedPods, name)
	next(o, up, "")
	d.event(false, "PodRolled", fmt.Sprintf("%s runs the new template, is unsealed and caught up (%d of %d)",
		name, len(up.CompletedPods), o.Replicas))
	return true
}

// check is one wait of verify, with its timeout and the reason it halts with.
type check struct {
	step    string
	timeout time.Duration
	reason  string
	problem func() string
}

func checks(o Observed, up *v1alpha1.UpgradeStatus, name string) []check {
	return []check{
		{StepPodReady, o.Settings.PodReadyTimeout, v1alpha1.ReasonPodReadyTimeout, func() string { return notReadyProblem(o, up, name) }},
		{StepHealthCheck, o.Settings.HealthCheckTimeout, v1alpha1.ReasonHealthCheckTimeout, func() string { return healthProblem(o, name) }},
		{StepRaftSync, o.Settings.RaftSyncTimeout, v1alpha1.ReasonRaftSyncTimeout, func() string { return syncProblem(o, name) }},
	}
}

// blocker says what the rollout waits on in this observation, as advance
// would: a halted rollout keeps saying what still holds it.
func blocker(o Observed, up *v1alpha1.UpgradeStatus) string {
	if up.CurrentPartition < o.Replicas && up.Step != "" && up.Step != StepStepDown {
		for _, c := range checks(o, up, podName(o, up.CurrentPartition)) {
			if problem := c.problem(); problem != "" {
				return problem
			}
		}
		return ""
	}
	if problem := releasedProblem(o, up); problem != "" || up.CurrentPartition <= 0 {
		return problem
	}
	if behind := ReadBehind(o.Read, o.Raft, o.Settings.MaxRaftLag); behind != "" {
		return readFirstText + behind
	}
	return PeersProblem(o, podName(o, up.CurrentPartition-1))
}

func stepIndex(step string) int {
	switch step {
	case StepHealthCheck:
		return 1
	case StepRaftSync:
		return 2
	}
	return 0
}

func notReadyProblem(o Observed, up *v1alpha1.UpgradeStatus, name string) string {
	p, ok := o.pod(int(up.CurrentPartition))
	if ok && p.Revision == up.TargetRevision && p.Ready {
		return ""
	}
	return fmt.Sprintf("%s is not Ready on the new template%s", name, p.Container.describe())
}

func healthProblem(o Observed, name string) string {
	if h, ok := o.Health[name]; ok && h.Initialized && !h.Sealed {
		return ""
	}
	return fmt.Sprintf("%s does not answer sys/health as initialized and unsealed", name)
}

func syncProblem(o Observed, name string) string {
	if o.Raft == nil {
		return fmt.Sprintf("the Raft state cannot be read to check %s: %s", name, o.RaftProblem)
	}
	s, ok := o.Raft.Servers[name]
	if !ok {
		return fmt.Sprintf("%s is not in the Raft configuration yet", name)
	}
	if problem := leaderViewProblem(o, name, s); problem != "" {
		return problem
	}
	if !s.LagKnown || s.Lag > o.Settings.MaxRaftLag {
		return fmt.Sprintf("%s trails the leader by %s (at most %d count as caught up)%s", name, lagText(s), o.Settings.MaxRaftLag, s.seen())
	}
	return ""
}

// contactSlack covers the kubelet's start time, which is cut to whole
// seconds: a contact is counted from the new server only when it came at
// least this long after the recorded start.
const contactSlack = time.Second

// leaderViewProblem says why the leader itself cannot count the server
// named name towards quorum yet; "" when it can. A restarted server shows
// no lag as soon as it has applied what its own disk held, long before the
// leader replicates to it again (the leader's Raft library backs off for
// up to 10 s between attempts to a server that was down), and autopilot's
// verdict stays from before the restart until the next echo. So the
// leader must count it a healthy voter, have heard from it since its
// container started, and its log must have reached the leader's.
func leaderViewProblem(o Observed, name string, s Server) string {
	if !s.Voter {
		return fmt.Sprintf("the leader does not count %s as a voter yet%s", name, s.seen())
	}
	if !s.Healthy {
		return fmt.Sprintf("autopilot on the leader reports %s unhealthy%s", name, s.seen())
	}
	p, _ := o.podNamed(name)
	if !s.ContactKnown || (!p.Started.IsZero() && o.Now.Add(-s.LastContact).Before(p.Started.Add(contactSlack))) {
		return fmt.Sprintf("the leader has not heard from %s since its server started %s%s", name, since(o.Now, p.Started), s.seen())
	}
	if !s.Received {
		return fmt.Sprintf("the leader's replication has not reached %s yet: its Raft log ends at %d, the leader's at %d%s",
			name, s.Index, s.LeaderIndex, s.seen())
	}
	return ""
}

// seen is the leader's view of a server, for messages: operator logs are
// not kept, and a rollout's wait messages are its timeline.
func (s Server) seen() string {
	contact := "no last contact"
	if s.ContactKnown {
		contact = "last contact " + s.LastContact.Round(100*time.Millisecond).String() + " ago"
	}
	return fmt.Sprintf(" (leader's view: healthy %t, %s, echoed index %d; its log %d, applied lag %s, leader's log %d)",
		s.Healthy, contact, s.LastIndex, s.Index, lagText(s), s.LeaderIndex)
}

func since(now, t time.Time) string {
	if t.IsZero() {
		return "(start time unknown)"
	}
	return now.Sub(t).Round(100*time.Millisecond).String() + " ago"
}

// stepDownEarly asks the active server to step down while the pod
// released before it is Ready and unsealed but not yet counted by the
// leader (RaftSync), when that server is the next to go and a rolled
// server the leader counts caught up can take over (earlyStepDownTarget).
// The leader's Raft library backs off for up to 10 s between attempts to
// a server that was down, and OpenBao holds a stepped-down server's
// shutdown for 10 s; a fresh leader replicates to the restarted server at
// once, and the stepped-down server's wait runs while that pod catches
// up instead of after its release. The step-down is the one its release
// would ask for: no server steps down more often than before.
func stepDownEarly(o Observed, up *v1alpha1.UpgradeStatus, d *Decision) {
	target := earlyStepDownTarget(o, up)
	if target == "" {
		return
	}
	d.StepDown = target
	up.LastStepDownTime = ptrTime(o.Now)
	d.event(false, "StepDown", fmt.Sprintf("%s is the active server and the next to roll: asked it to step down while %s catches up, "+
		"so that a rolled server leads and replicates to it at once", target, podName(o, up.CurrentPartition)))
}

// earlyStepDownTarget names the active server that stepDownEarly may ask
// to step down now; "" when none. With three servers or more: the next
// pod to go is the active one and not rolled; the pod being verified is a
// voter, Ready and unsealed; every other server is Ready and unsealed;
// at least one rolled server other than those two is Ready, unsealed and
// counted caught up by the leader (syncProblem), so that the leadership
// goes to a server that will not roll again in this rollout; and no
// step-down was asked since the pod being verified started (steppedEarly).
func earlyStepDownTarget(o Observed, up *v1alpha1.UpgradeStatus) string {
	k := up.CurrentPartition - 1
	next, ok := o.pod(int(k))
	cur, okCur := o.pod(int(up.CurrentPartition))
	if o.Replicas < 3 || k < 0 || o.Raft == nil || !ok || !okCur || !next.Active || next.Revision == up.TargetRevision ||
		cur.Started.IsZero() || steppedEarly(o, up) || !o.Raft.Servers[cur.Name].Voter {
		return ""
	}
	for _, p := range o.Pods {
		if h, ok := o.Health[p.Name]; p.Name != next.Name && (!p.Ready || !ok || !h.Initialized || h.Sealed) {
			return ""
		}
	}
	for _, name := range up.CompletedPods {
		p, ok := o.podNamed(name)
		if ok && name != cur.Name && name != next.Name && p.Revision == up.TargetRevision && syncProblem(o, name) == "" {
			return next.Name
		}
	}
	return ""
}

// stepDownHold is how long OpenBao keeps a server that stepped down from
// taking the lead again (manualStepDownSleepPeriod): still labelled active
// within it, the label lags; after it, the server may have been elected
// again, and is asked again.
const stepDownHold = 10 * time.Second

// steppedEarly says a step-down was asked since the container of the pod
// released last started: stepDownEarly asked it of the next pod while
// that one caught up. A release's own step-down comes before the pod it
// releases restarts. The start is cut to whole seconds, so it errs
// towards the step-down counting as asked before it.
func steppedEarly(o Observed, up *v1alpha1.UpgradeStatus) bool {
	cur, ok := o.pod(int(up.CurrentPartition))
	return ok && up.CurrentPartition < o.Replicas && !cur.Started.IsZero() && up.LastStepDownTime != nil &&
		!up.LastStepDownTime.Time.Before(cur.Started)
}

// release lowers the partition onto the next pod, after stepping its
// server down if it is the active one; a step-down asked while the pod
// before it caught up (stepDownEarly) is not asked again.
func release(o Observed, up *v1alpha1.UpgradeStatus, d *Decision) bool {
	k := up.CurrentPartition - 1
	pod, _ := o.pod(int(k))
	name := podName(o, k)
	if problem := PeersProblem(o, name); problem != "" {
		return waitOrHalt(o, up, d, o.Settings.PodReadyTimeout, v1alpha1.ReasonPeerNotReadyTimeout,
			fmt.Sprintf("%s is not released: %s", name, problem))
	}
	stepped := up.Step == StepStepDown
	if !stepped && pod.Active && steppedEarly(o, up) && o.Now.Sub(up.LastStepDownTime.Time) < stepDownHold {
		next(o, up, StepStepDown) // its label lags: wait for another active as after a release's own step-down
		stepped = true
	}
	if o.Replicas > 1 && pod.Revision != up.TargetRevision {
		if pod.Active && !stepped {
			d.StepDown = name
			up.LastStepDownTime = ptrTime(o.Now)
			next(o, up, StepStepDown)
			d.event(false, "StepDown", fmt.Sprintf("%s is the active server: asked it to step down before its pod is rolled", name))
			d.wait(stepDownInterval)
			return false
		}
		if stepped && (pod.Active || !anotherActive(o, int(k))) {
			return waitOrHalt(o, up, d, o.Settings.StepDownTimeout, v1alpha1.ReasonStepDownTimeout,
				fmt.Sprintf("%s stepped down, but no other server has become active", name))
		}
	}
	up.CurrentPartition = k
	next(o, up, StepPodReady)
	return true
}

func complete(o Observed, up *v1alpha1.UpgradeStatus, d *Decision) {
	took := o.Now.Sub(up.StartedAt.Time).Round(time.Second)
	d.Upgrade, d.Completed = nil, true
	up.CurrentPartition = o.Replicas
	msg := fmt.Sprintf("every server runs the new template (version %s); the rollout took %s", up.TargetVersion, took)
	d.upgrading(false, v1alpha1.ReasonUpgradeComplete, msg)
	d.event(false, v1alpha1.ReasonUpgradeComplete, msg)
}

// releasedProblem finds a pod already rolled that is no longer Ready,
// healthy and caught up (it crashed, or a restarted operator re-verifies
// it): releasing another pod then could cost quorum.
func releasedProblem(o Observed, up *v1alpha1.UpgradeStatus) string {
	for ord := up.CurrentPartition; ord < o.Replicas; ord++ {
		name := podName(o, ord)
		if p, ok := o.pod(int(ord)); !ok || !p.Ready || p.Revision != up.TargetRevision {
			return fmt.Sprintf("%s, already rolled, is not Ready on the new template%s", name, p.Container.describe())
		}
		if problem := healthProblem(o, name); problem != "" {
			return problem
		}
		if problem := syncProblem(o, name); problem != "" {
			return problem
		}
	}
	return ""
}

func anotherActive(o Observed, except int) bool {
	for _, p := range o.Pods {
		if p.Ordinal != except && p.Active {
			return true
		}
	}
	return false
}

// waitOrHalt waits for the current step, or halts the rollout once the
// step's timeout has passed since it began.
func waitOrHalt(o Observed, up *v1alpha1.UpgradeStatus, d *Decision, timeout time.Duration, reason, what string) bool {
	if up.StepStartedAt == nil {
		up.StepStartedAt = ptrTime(o.Now)
	}
	if o.Now.Sub(up.StepStartedAt.Time) < timeout {
		d.upgrading(true, v1alpha1.ReasonUpgradeInProgress, fmt.Sprintf("%s; waiting (%s left)", what,
			(timeout-o.Now.Sub(up.StepStartedAt.Time)).Round(time.Second)))
		if up.Step == StepStepDown {
			d.wait(stepDownInterval)
		} else {
			d.wait(verifyInterval)
		}
		return false
	}
	up.Halted = reason
	msg := haltMessage(up) + ": " + what + " after " + timeout.String()
	d.Problem = &Condition{Status: true, Reason: reason, Message: msg}
	d.upgrading(true, v1alpha1.ReasonUpgradeHalted, msg)
	d.event(true, reason, msg)
	return false
}

func haltMessage(up *v1alpha1.UpgradeStatus) string {
	return fmt.Sprintf("the rollout to %s halted at partition %d (%s); the pods already rolled keep running. "+
		"Fix the cause, then set spec.upgrade.resumeRequest to a new value to resume",
		up.TargetVersion, up.CurrentPartition, up.Halted)
}

func progress(o Observed, up *v1alpha1.UpgradeStatus) string {
	return fmt.Sprintf("rolling to %s: %d of %d servers done, partition %d, step %s",
		up.TargetVersion, len(up.CompletedPods), o.Replicas, up.CurrentPartition, orNone(up.Step))
}

func next(o Observed, up *v1alpha1.UpgradeStatus, step string) {
	up.Step = step
	up.StepStartedAt = ptrTime(o.Now)
}

func podName(o Observed, ordinal int32) string {
	if p, ok := o.pod(int(ordinal)); ok {
		return p.Name
	}
	return fmt.Sprintf("%s-%d", o.Name, ordinal)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
