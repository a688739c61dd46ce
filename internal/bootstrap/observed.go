package bootstrap

import (
	"time"

	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/podstate"
)

// Observed is everything Decide looks at, gathered by the reconciler.
type Observed struct {
	// Pod0 is nil while the pod does not exist.
	Pod0 *podstate.Pod
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
	// RootTokenSecretExists says <cluster>-root-token exists. The
	// reconciler reads it only when NeedsRootTokenSecret says so.
	RootTokenSecretExists bool
	// RootTokenSecretName names it, for messages.
	RootTokenSecretName string
	// InitStarted says this operator recorded, before calling sys/init,
	// that it was about to (status.initializationStarted).
	InitStarted bool
	// ResetDone says the operator has wiped pod-0 once already to
	// initialize again after a lost root token (status.bootstrapReset);
	// ResetPending that the pod or volume of the lost initialization still
	// exists, so the wipe is not finished.
	ResetDone    bool
	ResetPending bool

	// InitFailures counts consecutive failed init attempts and
	// LastInitFailure is when the last one failed; they pace retries.
	InitFailures    int
	LastInitFailure time.Time
	Now             time.Time
}

// NeedsHealth says whether Decide wants a sys/health answer: pod-0 runs
// and its label does not say it is uninitialized. A label saying it is
// initialized is confirmed by sys/health before anything is adopted.
func (o Observed) NeedsHealth() bool {
	if !o.NeedsRootTokenSecret() {
		return false
	}
	initialized, known := o.Pod0.LabelState(podstate.LabelInitialized)
	return !known || initialized
}

// NeedsRootTokenSecret says whether Decide may look at the root-token
// Secret: only once pod-0 runs. Until then the decision is a wait, and the
// exact read of a Secret that carries no label of ours can be spared.
func (o Observed) NeedsRootTokenSecret() bool {
	return !o.Initialized && o.Pod0 != nil && o.Pod0.Started()
}
