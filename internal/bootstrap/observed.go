package bootstrap

import (
	"time"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/podstate"
)

// Observed is everything Decide looks at, gathered by the reconciler.
type Observed struct {
	// Pod0 is nil while the pod does not exist.
	Pod0 *podstate.Pod
	// Health is pod-0's sys/health answer over verified TLS in this pass,
	// nil when not asked or when the request failed (HealthErr). It is
	// the only evidence of whether OpenBao is initialized: service
	// registration labels a sealed server "initialized=false" whatever it
	// holds, so no label stands in for it.
	Health    *openbao.Health
	HealthErr error
	// Pod0Claim is pod-0's data volume claim as read exactly, nil when it
	// was not read (NeedsPod0Claim) or does not exist. ClusterCreated is
	// the OpenBaoCluster's creation time: a claim older than the cluster
	// holds data kept from an earlier cluster of this name (deletionPolicy
	// Retain), never a lost initialization of this one.
	Pod0Claim      *Claim
	Pod0ClaimName  string
	ClusterCreated time.Time
	// FromBackup is spec.bootstrap.fromBackup: the cluster's data is a
	// restored snapshot, whose root token the operator voids by design.
	// FromBackupRecorded says its restore may have begun: status records
	// the from-backup restore, or an OpenBaoRestore of the cluster exists.
	// Until then the data can only be the operator's own sys/init: a
	// restore starts only once status says the cluster is initialized
	// (the from-backup step, and every restore's preflight), which this
	// operator writes only after storing the root token.
	FromBackup         bool
	FromBackupRecorded bool

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

// Claim is what Decide knows of a data volume claim.
type Claim struct {
	Created time.Time
}

// PredatesCluster says the claim was created before the OpenBaoCluster
// (timestamps have whole seconds: a claim of the same second is the
// cluster's own, since its StatefulSet made it after the cluster).
func (c Claim) PredatesCluster(clusterCreated time.Time) bool {
	return v1alpha1.CreatedBefore(c.Created, clusterCreated)
}

// NeedsHealth says whether Decide wants a sys/health answer: whenever
// pod-0 runs and the cluster is not initialized in status. sys/init is
// called only after sys/health said "not initialized" in the same pass.
func (o Observed) NeedsHealth() bool {
	return o.NeedsRootTokenSecret()
}

// NeedsPod0Claim says whether Decide wants pod-0's claim: sys/health said
// initialized and no root token is stored, so a reset, or the message
// about retained data, depends on how old the volume is.
func (o Observed) NeedsPod0Claim() bool {
	return o.Health != nil && o.Health.Initialized && !o.RootTokenSecretExists && !o.SelfInit
}

// NeedsRootTokenSecret says whether Decide may look at the root-token
// Secret: only once pod-0 runs. Until then the decision is a wait, and the
// exact read of a Secret that carries no label of ours can be spared.
func (o Observed) NeedsRootTokenSecret() bool {
	return !o.Initialized && o.Pod0 != nil && o.Pod0.Started()
}
