package bootstrap

import (
	"fmt"
	"time"

	"github.com/openbao/operator/internal/podstate"
)

// Action is what the reconciler does with a Decision.
type Action string

// Actions.
const (
	// ActionNone: the cluster is initialized and status says so.
	ActionNone Action = "None"
	// ActionWait: nothing to do yet; requeue after RequeueAfter.
	ActionWait Action = "Wait"
	// ActionInitialize: run Initialize (dry run, sys/init, store the token).
	ActionInitialize Action = "Initialize"
	// ActionAdopt: OpenBao is initialized but not by this operator's
	// sys/init (self-init, or before the operator managed it); set
	// status.initialized and status.selfInitialized = SelfInitialized.
	ActionAdopt Action = "Adopt"
	// ActionMarkInitialized: this operator initialized it (the token is
	// stored) but status was not written; set status.initialized.
	ActionMarkInitialized Action = "MarkInitialized"
	// ActionReset: the root token of this operator's own sys/init reached
	// no one, so no credential exists and no data can have been written:
	// record the reset (once), delete pod-0 and its data volume, and let
	// the StatefulSet bring up an empty pod-0 to initialize again.
	ActionReset Action = "Reset"
	// ActionDegraded: set Degraded with Reason and Message; requeue after
	// RequeueAfter.
	ActionDegraded Action = "Degraded"
)

// Reasons, CamelCase for conditions; they are also the Wait reasons.
const (
	ReasonInitialized      = "Initialized"
	ReasonPodMissing       = "PodMissing"
	ReasonPodStarting      = "PodStarting"
	ReasonHealthUnknown    = "HealthUnknown"
	ReasonAwaitingSelfInit = "AwaitingSelfInit"
	ReasonInitBackoff      = "InitBackoff"
	ReasonSelfInitialized  = "SelfInitialized"
	// ReasonAdopted stays on clusters that earlier releases adopted
	// without a root token; none is adopted that way any more.
	ReasonAdopted              = "Adopted"
	ReasonPodCrashLooping      = "PodCrashLooping"
	ReasonPodNotStarting       = "PodNotStarting"
	ReasonStaleRootTokenSecret = "StaleRootTokenSecret"
	ReasonRootTokenLost        = "RootTokenLost"
	// ReasonInitializedElsewhere: pod-0 was initialized, but not by this
	// operator, during its own bootstrap.
	ReasonInitializedElsewhere = "InitializedElsewhere"
	ReasonInitFailed           = "InitFailed"
	// ReasonResettingLostInitialization: pod-0 is being wiped to
	// initialize again after a lost root token.
	ReasonResettingLostInitialization = "ResettingLostInitialization"
	// ReasonRetainedData: pod-0 is initialized on data the operator must
	// keep (a volume older than the cluster, or a restored snapshot) and
	// no root token is stored: neither initialized nor wiped.
	ReasonRetainedData = "RetainedData"
)

// Requeue intervals.
const (
	// PollInterval is the wait for an answer of OpenBao's that no pod
	// change announces (sys/health while pod-0's labels are unknown).
	PollInterval = 2 * time.Second
	// WatchedWait is the fallback wait for what a change of pod-0 announces
	// (its creation, its container running, its service-registration
	// labels): the pod watch starts the next pass, so polling is only a
	// safety net. Measured with make bench-scale: polling every 2 s kept
	// 200 clusters with unschedulable pods at 30 passes per minute each.
	WatchedWait = 30 * time.Second
	// DegradedRequeue re-checks a degraded bootstrap without a hot loop.
	DegradedRequeue = 30 * time.Second
	// CrashLoopRestarts is the restart count from which a pod that is not
	// ready counts as crash-looping even between CrashLoopBackOff waits.
	CrashLoopRestarts = 3
)

// Decision is what Decide returns.
type Decision struct {
	Action          Action
	Reason          string
	Message         string
	RequeueAfter    time.Duration
	SelfInitialized bool // ActionAdopt
}

// notStartingReasons are waiting reasons after which the container will
// not run without a change.
var notStartingReasons = map[string]bool{
	"ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true,
}

// Decide returns the next bootstrap step for the observed state.
func Decide(o Observed) Decision {
	if o.Initialized {
		return Decision{Action: ActionNone, Reason: ReasonInitialized}
	}
	if o.ResetPending {
		return reset(o)
	}
	if o.Pod0 == nil {
		return wait(ReasonPodMissing, "waiting for pod-0 to be created", WatchedWait)
	}
	if d, bad := podTrouble(*o.Pod0, o.SelfInit); bad {
		return d
	}
	if !o.Pod0.Started() {
		return wait(ReasonPodStarting, fmt.Sprintf("waiting for the OpenBao container of %s to run", o.Pod0.Name), WatchedWait)
	}
	// sys/health over verified TLS in this pass decides, either way: a
	// sealed server is labelled initialized=false by service registration
	// whatever its volume holds (a retained cluster waiting for its KMS),
	// and whoever can patch pods can set a label.
	if o.Health == nil {
		return wait(ReasonHealthUnknown, fmt.Sprintf("confirming with sys/health whether %s is initialized", o.Pod0.Name), PollInterval)
	}
	initialized := o.Health.Initialized
	if initialized {
		return adopt(o)
	}
	if o.SelfInit {
		return wait(ReasonAwaitingSelfInit, fmt.Sprintf("waiting for %s to initialize itself", o.Pod0.Name), WatchedWait)
	}
	return initialize(o)
}

func adopt(o Observed) Decision {
	switch {
	case o.SelfInit:
		return Decision{Action: ActionAdopt, Reason: ReasonSelfInitialized, SelfInitialized: true,
			Message: "OpenBao initialized itself from its self-init requests"}
	case o.RootTokenSecretExists:
		return Decision{Action: ActionMarkInitialized, Reason: ReasonInitialized,
			Message: fmt.Sprintf("initialized; the root token is in Secret %s", o.RootTokenSecretName)}
	case o.InitStarted && !o.ResetDone && o.provenEmpty():
		// This operator called sys/init on a server sys/health had just
		// called uninitialized, on a volume made for this cluster, and the
		// answer reached nobody (it was killed inside the call, or could
		// not store the token): no credential exists, so nobody can have
		// written data. Starting over loses nothing; once, so that a fault
		// that repeats is shown.
		return reset(o)
	case o.InitStarted && !o.ResetDone, o.retainedData():
		// Data the operator cannot prove it made empty: never wiped, and
		// never adopted without its root token.
		return retained(o)
	case o.InitStarted:
		return Decision{Action: ActionAdopt, Reason: ReasonRootTokenLost, Message: fmt.Sprintf(
			"the root token of the operator's sys/init was lost again after pod-0 had already been wiped once "+
				"to initialize anew, so it was never stored in Secret %s and the operator does not wipe again. "+
				"The cluster holds no data: find why the token could not be stored (the operator's logs and Events), "+
				"then delete the OpenBaoCluster and pod-0's volume (data-<cluster>-0) and create it again", o.RootTokenSecretName)}
	}
	// Nobody the operator knows initialized it: whoever reached port 8200
	// first may hold the root token. That is a security event, never an
	// adoption; a root token stored in the Secret is the proof that turns
	// it into one.
	return degraded(ReasonInitializedElsewhere, fmt.Sprintf(
		"%s answers sys/health as initialized, but this operator never called sys/init for it and Secret %s does not exist: "+
			"whoever initialized it holds its root token. If nobody you trust did, treat the cluster as compromised: delete the "+
			"OpenBaoCluster and its pods' data volumes and create it again. If it was you (for example the volumes of an earlier "+
			"cluster of this name), store its root token in Secret %s under the key token and the operator adopts it",
		o.Pod0.Name, o.RootTokenSecretName, o.RootTokenSecretName))
}

// provenEmpty says a wipe of pod-0 can lose nothing the operator did not
// make: its claim was read, is not older than the cluster, and no restore
// of a cluster formed from a backup can have begun.
func (o Observed) provenEmpty() bool {
	return !o.mayHoldRestoredSnapshot() && o.Pod0Claim != nil && !o.Pod0Claim.PredatesCluster(o.ClusterCreated)
}

// retainedData says pod-0's data is known to predate this cluster's own
// initialization: a restored snapshot, or a volume older than the cluster.
func (o Observed) retainedData() bool {
	return o.mayHoldRestoredSnapshot() || o.Pod0Claim != nil && o.Pod0Claim.PredatesCluster(o.ClusterCreated)
}

// mayHoldRestoredSnapshot says pod-0's data may be a restored snapshot: a
// cluster formed from a backup whose restore may have begun. Before that,
// a lost sys/init of such a cluster left the same empty data as any other.
func (o Observed) mayHoldRestoredSnapshot() bool {
	return o.FromBackup && o.FromBackupRecorded
}

// retained reports an initialized pod-0 whose data the operator must keep:
// a volume older than the OpenBaoCluster, or a cluster formed from a
// backup, with no root token stored. It says what the user must do.
func retained(o Observed) Decision {
	why := fmt.Sprintf("its data volume %s was created before this OpenBaoCluster: it holds the data of an earlier "+
		"cluster of this name, kept by deletionPolicy Retain", o.Pod0ClaimName)
	if o.Pod0Claim == nil {
		why = fmt.Sprintf("its data volume %s could not be read, so the operator cannot tell whether it holds earlier data", o.Pod0ClaimName)
	}
	if o.mayHoldRestoredSnapshot() {
		why = "this cluster is formed from a backup (spec.bootstrap.fromBackup): its data is a restored snapshot, whose root token the operator voids"
	}
	return degraded(ReasonRetainedData, fmt.Sprintf(
		"%s is initialized and %s. No root token is stored in Secret %s, so the operator neither initializes nor wipes it, "+
			"and scales out no further. To adopt the data, store a root token of that cluster in Secret %s under the key token "+
			"(one made with bao operator generate-root if the original is gone). To discard the data instead, delete the "+
			"OpenBaoCluster and the volume claims data-<cluster>-<n> yourself, then create it again",
		o.Pod0.Name, why, o.RootTokenSecretName, o.RootTokenSecretName))
}

func reset(o Observed) Decision {
	return Decision{Action: ActionReset, Reason: ReasonResettingLostInitialization, RequeueAfter: PollInterval, Message: fmt.Sprintf(
		"the operator's sys/init call was cut off before the root token was stored in Secret %s, so nobody holds a "+
			"credential and no data can have been written: pod-0 and its data volume are being deleted to initialize "+
			"again, once", o.RootTokenSecretName)}
}

func initialize(o Observed) Decision {
	if o.RootTokenSecretExists {
		// A token from an earlier cluster of this name: the operator never
		// overwrites a token it cannot prove is stale.
		return degraded(ReasonStaleRootTokenSecret, fmt.Sprintf(
			"OpenBao is not initialized but Secret %s exists; delete it to let the operator initialize", o.RootTokenSecretName))
	}
	if o.InitFailures > 0 {
		next := o.LastInitFailure.Add(InitBackoff(o.InitFailures))
		if o.Now.Before(next) {
			return wait(ReasonInitBackoff, fmt.Sprintf("init failed %d time(s); retrying in %s",
				o.InitFailures, next.Sub(o.Now).Round(time.Second)), next.Sub(o.Now))
		}
	}
	return Decision{Action: ActionInitialize, Reason: ReasonInitialized}
}

// podTrouble reports a pod-0 that will not come up by itself.
func podTrouble(p podstate.Pod, selfInit bool) (Decision, bool) {
	if notStartingReasons[p.WaitingReason] {
		return degraded(ReasonPodNotStarting, fmt.Sprintf("%s cannot start its OpenBao container: %s", p.Name, p.WaitingReason)), true
	}
	crashing := p.WaitingReason == "CrashLoopBackOff" || (!p.Ready && p.RestartCount >= CrashLoopRestarts)
	if !crashing {
		return Decision{}, false
	}
	msg := fmt.Sprintf("%s restarted %d time(s)", p.Name, p.RestartCount)
	if p.LastTerminationReason != "" {
		msg += fmt.Sprintf("; last exit: %s (code %d)", p.LastTerminationReason, p.LastExitCode)
	}
	if selfInit {
		msg += "; a failed self-init leaves storage initialized and unusable: check the self-init requests, then wipe pod-0's volume"
	}
	return degraded(ReasonPodCrashLooping, msg), true
}

func wait(reason, msg string, after time.Duration) Decision {
	return Decision{Action: ActionWait, Reason: reason, Message: msg, RequeueAfter: after}
}

func degraded(reason, msg string) Decision {
	return Decision{Action: ActionDegraded, Reason: reason, Message: msg, RequeueAfter: DegradedRequeue}
}

// Init retry pacing: 5 s after the first failure, doubling to 5 min.
const (
	InitBackoffBase = 5 * time.Second
	InitBackoffMax  = 5 * time.Minute
)

// InitBackoff is the wait after the given number of consecutive failures.
func InitBackoff(failures int) time.Duration {
	if failures <= 0 {
		return 0
	}
	d := InitBackoffBase
	for i := 1; i < failures; i++ {
		d *= 2
		if d >= InitBackoffMax {
			return InitBackoffMax
		}
	}
	return d
}
