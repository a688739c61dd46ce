// Package podstate reads what an OpenBao server pod says about itself: the
// labels OpenBao's Kubernetes service registration keeps on it, and the
// kubelet's view of its container. It is pure: the reconciler lists the
// pods, this package interprets them. Bootstrap, status and upgrades all
// read servers through it.
package podstate

import (
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Labels that OpenBao's Kubernetes service registration maintains on its pod.
const (
	LabelInitialized = "openbao-initialized"
	LabelSealed      = "openbao-sealed"
	LabelActive      = "openbao-active"
	LabelVersion     = "openbao-version"
)

// ContainerName is the OpenBao container in the chart's pod template.
const ContainerName = "openbao"

// Pod is what the operator needs of one server pod.
type Pod struct {
	Name string
	UID  types.UID
	// Ordinal is the StatefulSet ordinal from the name; -1 when the name
	// carries none.
	Ordinal int
	Phase   corev1.PodPhase
	Labels  map[string]string
	// Running says the kubelet reports the OpenBao container running;
	// Terminated that it reports it exited.
	Running    bool
	Terminated bool
	Ready      bool
	// RunningSince is when the kubelet started the running container
	// (whole seconds); zero when it does not run.
	RunningSince time.Time
	// WaitingReason is the container's waiting reason, for example
	// CrashLoopBackOff or ImagePullBackOff.
	WaitingReason string
	// LastTerminationReason, LastExitCode and LastTerminationMessage
	// describe the previous run (Error, OOMKilled; the message is what the
	// container left in its termination-message file, or its last log
	// lines under FallbackToLogsOnError).
	LastTerminationReason  string
	LastExitCode           int32
	LastTerminationMessage string
	RestartCount           int32
	// Revision is the StatefulSet revision of the pod's template.
	Revision string
	// IP is the pod's address; empty until the kubelet reports one.
	IP string
}

// FromKube extracts Pod from a Kubernetes pod.
func FromKube(p *corev1.Pod) Pod {
	out := Pod{Name: p.Name, UID: p.UID, Ordinal: ordinalOf(p.Name), Phase: p.Status.Phase, Labels: p.Labels,
		Revision: p.Labels[appsv1.ControllerRevisionHashLabelKey], IP: p.Status.PodIP}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			out.Ready = true
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != ContainerName {
			continue
		}
		out.Running = cs.State.Running != nil
		if cs.State.Running != nil {
			out.RunningSince = cs.State.Running.StartedAt.Time
		}
		out.Terminated = cs.State.Terminated != nil
		out.RestartCount = cs.RestartCount
		if cs.State.Waiting != nil {
			out.WaitingReason = cs.State.Waiting.Reason
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			out.LastTerminationReason, out.LastExitCode, out.LastTerminationMessage = t.Reason, t.ExitCode, t.Message
		}
	}
	return out
}

func ordinalOf(name string) int {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// Started says OpenBao's process runs: the kubelet reports the container
// running, or the service registration has labelled a pod whose container
// never restarted nor exited. OpenBao writes the labels as it starts, about
// a second before the kubelet's next status report; after a restart they
// may be the previous process's, so only the kubelet's word counts then.
func (p Pod) Started() bool {
	if p.Running {
		return true
	}
	_, labelled := p.LabelState(LabelInitialized)
	return labelled && p.RestartCount == 0 && !p.Terminated
}

// LabelState reads a boolean label of the service registration; known is
// false when the label is missing or unreadable.
func (p Pod) LabelState(label string) (value, known bool) {
	v, ok := p.Labels[label]
	if !ok {
		return false, false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, false
	}
	return b, true
}

// Active says the service registration marks the pod as the active server.
func (p Pod) Active() bool {
	active, _ := p.LabelState(LabelActive)
	return active
}

// Version is the OpenBao version the service registration reports.
func (p Pod) Version() string { return p.Labels[LabelVersion] }

// Snapshot is the server pods of one cluster, by ordinal, as read at the
// start of a reconcile pass.
type Snapshot []Pod

// NewSnapshot interprets the listed pods, sorted by ordinal.
func NewSnapshot(pods []corev1.Pod) Snapshot {
	out := make(Snapshot, 0, len(pods))
	for i := range pods {
		out = append(out, FromKube(&pods[i]))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Ordinal < out[j].Ordinal })
	return out
}

// Get returns the pod of that name.
func (s Snapshot) Get(name string) (Pod, bool) {
	for _, p := range s {
		if p.Name == name {
			return p, true
		}
	}
	return Pod{}, false
}

// Leader returns the ready pod that the service registration marks active,
// or "" when there is none.
func (s Snapshot) Leader() string {
	for _, p := range s {
		if p.Ready && p.Active() {
			return p.Name
		}
	}
	return ""
}

// CommonVersion returns the version every server runs, once at least
// replicas pods are ready and all of them report the same one; "" otherwise.
func (s Snapshot) CommonVersion(replicas int32) string {
	versions := map[string]bool{}
	ready := 0
	for _, p := range s {
		if !p.Ready {
			continue
		}
		ready++
		versions[p.Version()] = true
	}
	if ready < int(replicas) || len(versions) != 1 {
		return ""
	}
	for v := range versions {
		return v
	}
	return ""
}
