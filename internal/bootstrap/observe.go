package bootstrap

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/openbao/operator/internal/openbao"
)

// Labels that OpenBao's Kubernetes service registration maintains on its pod.
const (
	LabelInitialized = "openbao-initialized"
	LabelSealed      = "openbao-sealed"
	LabelActive      = "openbao-active"
)

// ContainerName is the OpenBao container in the chart's pod template.
const ContainerName = "openbao"

// Pod is what the decision needs of pod-0.
type Pod struct {
	Name   string
	Phase  corev1.PodPhase
	Labels map[string]string
	// Running says the kubelet reports the OpenBao container running;
	// Terminated that it reports it exited.
	Running    bool
	Terminated bool
	Ready      bool
	// WaitingReason is the container's waiting reason, for example
	// CrashLoopBackOff or ImagePullBackOff.
	WaitingReason string
	// LastTerminationReason and LastExitCode describe the previous run
	// (Error, OOMKilled).
	LastTerminationReason string
	LastExitCode          int32
	RestartCount          int32
}

// PodFromKube extracts Pod from a Kubernetes pod.
func PodFromKube(p *corev1.Pod) Pod {
	out := Pod{Name: p.Name, Phase: p.Status.Phase, Labels: p.Labels}
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
		out.Terminated = cs.State.Terminated != nil
		out.RestartCount = cs.RestartCount
		if cs.State.Waiting != nil {
			out.WaitingReason = cs.State.Waiting.Reason
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			out.LastTerminationReason, out.LastExitCode = t.Reason, t.ExitCode
		}
	}
	return out
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

// Observed is everything Decide looks at, gathered by the reconciler.
type Observed struct {
	// Pod0 is nil while the pod does not exist.
	Pod0 *Pod
	// Health is pod-0's sys/health answer, nil when not asked or when the
	// request failed (HealthErr). The reconciler asks only when Pod0's
	// labels do not say whether the cluster is initialized.
	Health    *openbao.Health
	HealthErr error

	// Status: status.initialized and status.selfInitialized.
	Initialized     bool
	SelfInitialized bool
	// SelfInit is spec.selfInit.enabled.
	SelfInit bool
	// RootTokenSecretExists says <cluster>-root-token exists.
	RootTokenSecretExists bool
	// RootTokenSecretName names it, for messages.
	RootTokenSecretName string
	// InitStarted says this operator recorded, before calling sys/init,
	// that it was about to (status.initializationStarted).
	InitStarted bool

	// InitFailures counts consecutive failed init attempts and
	// LastInitFailure is when the last one failed; they pace retries.
	InitFailures    int
	LastInitFailure time.Time
	Now             time.Time
}

// NeedsHealth says whether Decide wants a sys/health answer: pod-0 runs
// and its labels do not tell whether it is initialized.
func (o Observed) NeedsHealth() bool {
	if o.Initialized || o.Pod0 == nil || !o.Pod0.Started() {
		return false
	}
	_, known := o.Pod0.LabelState(LabelInitialized)
	return !known
}
