// Package upgrade decides a Raft-aware rollout of a cluster's pod template:
// one pod at a time from the highest ordinal, held by the StatefulSet's
// partition, the active server stepped down before its pod restarts, and
// each rolled pod Ready, unsealed and caught up with the Raft log before
// the partition moves again. Decide is pure: the reconciler observes the
// StatefulSet, the pods and OpenBao, and carries the Decision out. All
// progress lives in status.upgrade, so a restarted operator resumes.
//
// Every template change takes this path (a new version, image, config.hcl,
// resources, annotations): the partition stays at the replica count while
// no rollout runs, so a changed template moves no pod until Decide lowers
// it. A timeout halts the rollout and keeps its state; a person resumes it
// through spec.upgrade.resumeRequest, never the operator by itself.
//
// A rollout the operator alone caused (CauseOf: its wrapper image or
// chart changed every cluster's template, not the spec) starts only with
// one of --max-concurrent-rollouts slots shared across the operator's
// clusters (Slots), so that an operator upgrade rolls its clusters a few
// at a time; a rollout the spec asked for never waits for one.
package upgrade

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/day2"
)

// Settings are spec.upgrade with its defaults applied.
type Settings struct {
	StepDownTimeout    time.Duration
	PodReadyTimeout    time.Duration
	HealthCheckTimeout time.Duration
	RaftSyncTimeout    time.Duration
	MaxRaftLag         uint64
	AllowDowngrade     bool
	PreUpgradeSnapshot bool
	ResumeRequest      string
}

// Defaults of spec.upgrade, as the design gives them.
const (
	DefaultStepDownTimeout    = 30 * time.Second
	DefaultPodReadyTimeout    = 5 * time.Minute
	DefaultHealthCheckTimeout = 2 * time.Minute
	DefaultRaftSyncTimeout    = 2 * time.Minute
	DefaultMaxRaftLag         = 100
)

// SettingsFor reads spec.upgrade; unset fields take the defaults.
func SettingsFor(s v1alpha1.UpgradeSpec) Settings {
	out := Settings{
		StepDownTimeout: durationOr(s.StepDownTimeout, DefaultStepDownTimeout), PodReadyTimeout: durationOr(s.PodReadyTimeout, DefaultPodReadyTimeout),
		HealthCheckTimeout: durationOr(s.HealthCheckTimeout, DefaultHealthCheckTimeout), RaftSyncTimeout: durationOr(s.RaftSyncTimeout, DefaultRaftSyncTimeout),
		MaxRaftLag: DefaultMaxRaftLag, AllowDowngrade: s.AllowDowngrade, PreUpgradeSnapshot: s.PreUpgradeSnapshot,
		ResumeRequest: s.ResumeRequest,
	}
	if s.MaxRaftLag != nil && *s.MaxRaftLag >= 0 {
		out.MaxRaftLag = uint64(*s.MaxRaftLag)
	}
	return out
}

// Pod is what a rollout needs of one server pod.
type Pod struct {
	Name    string
	Ordinal int
	// Revision is the pod's controller-revision-hash label.
	Revision string
	Ready    bool
	// Started is when the kubelet last started its OpenBao container
	// (whole seconds); zero when unknown.
	Started time.Time
	// Active says the pod is OpenBao's active server (its
	// service-registration label, or sys/health when the label is
	// unknown).
	Active bool
	// Container is the kubelet's word on the OpenBao container, which a
	// message about a pod that is not Ready repeats.
	Container Container
}

// Container is what the kubelet reports of a server's container: why it
// waits (CrashLoopBackOff, ImagePullBackOff), how often it restarted, and
// how its last run ended (reason, exit code, termination message).
type Container struct {
	Waiting      string
	Restarts     int32
	LastReason   string
	LastExitCode int32
	LastMessage  string
}

// Server is what the leader's autopilot state says about one server.
type Server struct {
	// Lag is how many entries its Raft log trails the leader's committed
	// index; LagKnown says the autopilot state listed it.
	Lag      uint64
	LagKnown bool
	Voter    bool
	// Healthy is autopilot's verdict on the server.
	Healthy bool
	// LastContact is how long before the read the leader last heard from
	// the server (its echo, every 5 s); ContactKnown says autopilot gave
	// one (0 for the leader itself). LastIndex is the applied index that
	// echo carried.
	LastContact  time.Duration
	ContactKnown bool
	LastIndex    uint64
	// Received says the server's own Raft log reached the leader's last
	// index within the catch-up window (openbao.Progress): the leader's
	// replication reaches it now. Index and LeaderIndex are the two
	// indexes read, for messages.
	Received           bool
	Index, LeaderIndex uint64
}

// Health is one server's own sys/health answer.
type Health struct {
	Initialized bool
	Sealed      bool
}

// Raft is the cluster's Raft state as the leader reports it.
type Raft struct {
	// Healthy is autopilot's verdict on the whole cluster.
	Healthy          bool
	FailureTolerance int
	// Servers by node id, which is the pod name.
	Servers map[string]Server
}

// Observed is everything Decide looks at.
type Observed struct {
	Now      time.Time
	Settings Settings
	// SpecVersion is spec.version; CurrentVersion is status.currentVersion,
	// the version every server reported last; HighestVersion is
	// status.highestVersion, the newest any server has reported since the
	// last rollout completed. A downgrade is judged against the newer of
	// the two (Reference).
	SpecVersion    string
	CurrentVersion string
	HighestVersion string
	// SealType is spec.unseal.type; some releases drop seals.
	SealType v1alpha1.UnsealType
	// Replicas is what the StatefulSet runs; Name is its name, which
	// with the ordinal names each pod.
	Replicas int32
	Name     string
	// StatefulSetObserved says the StatefulSet's status describes its
	// current spec (observedGeneration == generation); UpdateRevision is
	// then the revision of the current template.
	StatefulSetObserved bool
	UpdateRevision      string
	// LivePartition is the partition the StatefulSet's spec holds, as
	// read; LivePartitionKnown says it was read. A pass that lowered it and
	// then lost its status write (the operator killed in between, or a
	// conflict) leaves it below status.upgrade.currentPartition.
	LivePartition      int32
	LivePartitionKnown bool
	// LiveReplicas is the replica count the StatefulSet's spec holds: a
	// live partition below it with no rollout recorded is a start whose
	// status write was lost.
	LiveReplicas int32
	// Pods of the cluster, any order.
	Pods []Pod
	// Upgrade is status.upgrade; nil while no rollout runs.
	Upgrade *v1alpha1.UpgradeStatus
	// UpgradingReason is the Upgrading condition's reason as read: the
	// outcome of the last rollout stays told until the next one.
	UpgradingReason string
	// Raft is nil when OpenBao could not be asked; RaftProblem says why.
	Raft        *Raft
	RaftProblem string
	// Health holds the sys/health answers of the pods that gave one, by
	// pod name.
	Health map[string]Health
	// Read is the read replicas' StatefulSet and pods, nil without read
	// replicas; a rollout starts only once they run the new template,
	// healthy and caught up (ReadBehind).
	Read *ReadReplicas
	// SnapshotDone says the pre-upgrade snapshot of this rollout
	// succeeded; SnapshotProblem says why one cannot be taken.
	SnapshotDone    bool
	SnapshotProblem string
	// Lock is day2's verdict on a rollout starting beside the cluster's
	// other operations (a restore or a backup under way holds it).
	Lock day2.Verdict
	// RenderedGeneration is the cluster generation the StatefulSet was
	// rendered from; SettledGeneration is status.settledGeneration. Cause
	// is CauseOf the two, and Slot the verdict on an Operator rollout
	// taking a rollout slot (Slots.Claim).
	RenderedGeneration, SettledGeneration int64
	Cause                                 v1alpha1.RolloutCause
	Slot                                  Slot
}

// Behind returns the pods not on the current template.
func (o Observed) Behind() []Pod {
	var out []Pod
	for _, p := range o.Pods {
		if o.UpdateRevision != "" && p.Revision != o.UpdateRevision {
			out = append(out, p)
		}
	}
	return out
}

// RolloutPending says a rollout runs or is due: OpenBao's Raft state is
// needed to decide it.
func (o Observed) RolloutPending() bool {
	return o.Upgrade != nil || (o.StatefulSetObserved && len(o.Behind()) > 0)
}

func (o Observed) pod(ordinal int) (Pod, bool) {
	for _, p := range o.Pods {
		if p.Ordinal == ordinal {
			return p, true
		}
	}
	return Pod{}, false
}

func (o Observed) podNamed(name string) (Pod, bool) {
	for _, p := range o.Pods {
		if p.Name == name {
			return p, true
		}
	}
	return Pod{}, false
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}
