package controllers

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/internal/values"
)

// pass is one reconcile of one cluster. Every step reads the cluster as it
// was read, builds on the status in memory, and leaves its wishes here; the
// status is written once, after the last step.
type pass struct {
	// cluster is the object as read. Steps do not change it, except that a
	// step writing the cluster itself (recordInitStart) takes the new
	// resourceVersion, so the final status write does not conflict.
	cluster *v1alpha1.OpenBaoCluster
	// status is the status being built. The chart renders from it, so a
	// decision a step makes (initialized, a partition) is applied in the
	// same pass.
	status *v1alpha1.OpenBaoClusterStatus
	now    time.Time
	// events are emitted only after the status write they describe.
	events []event
	// tls is what the TLS step hands the later steps.
	tls servedTLS
	// pods are the cluster's server pods, listed once from the cache at the
	// start of the pass; servers is what they say about themselves.
	pods    []corev1.Pod
	servers podstate.Snapshot
	// restoring: an OpenBaoRestore of the cluster runs (day2.Observe), as
	// the cache showed it at the start of the pass; anyRestore: one exists.
	restoring, anyRestore bool
	// openbao is OpenBao's view of the cluster, read once by the first
	// step that needs it.
	openbao *openbaoView
	// replicas is the replica count a step decided (a scale-down in
	// steps); nil leaves the spec's.
	replicas *int32
	// readReplicas is the read replica count the read-replicas step
	// decided, nil to render no read replica objects; readDecided says
	// the step ran, so the spec's count does not stand in for it.
	readReplicas *int32
	readDecided  bool
	// issuer is the service-account issuer, read for a self-init cluster
	// that has not started.
	issuer *identity.Issuer
	// claimTemplateSize is the storage request of the live StatefulSet's
	// volume claim template, which the chart keeps (the volumes step).
	claimTemplateSize string
	// rootTokenSecret is <cluster>-root-token as the first step that needs
	// it read it in this pass (rootTokenRead): nil when it does not exist.
	rootTokenSecret *corev1.Secret
	rootTokenRead   bool
	// platformVerified: the image step verified under the platform's
	// signature policy, whose digest in status is pinned as the spec's is.
	platformVerified bool
	// problems make the cluster Degraded; the first, in step order, names
	// the condition's reason. reconciled is the children step's message
	// when everything rendered was applied.
	problems   []problem
	reconciled string
	// requeue is the soonest time any step wants to look again; zero for
	// none.
	requeue time.Duration
	// effects run, in order, only after the status write succeeded: an
	// at-most-once effect whose idempotent name the status records first.
	effects []func(context.Context) error
}

// event is one Kubernetes event of the pass.
type event struct {
	kind, reason, action, note string
}

// errStop ends a pass early without an error: the status built so far is
// written and the pass comes back after its requeue wish. A step returns it
// when the later steps must not run (the cluster is paused), like
// CloudNativePG's ErrNextLoop.
var errStop = errors.New("stop this pass")

// step is one guarded stage of a pass; it returns errStop or an error to
// end the pass.
type step struct {
	name string
	run  func(ctx context.Context, p *pass) error
}

// runSteps runs the steps in order until one ends the pass.
func runSteps(ctx context.Context, p *pass, steps []step) error {
	for _, s := range steps {
		err := s.run(ctx, p)
		if err == nil {
			continue
		}
		log.FromContext(ctx).V(1).Info("pass ended early", "step", s.name, "reason", err.Error())
		if errors.Is(err, errStop) {
			return nil
		}
		return err
	}
	return nil
}

// requeueAfter records a wish to look again after d; the soonest wins.
func (p *pass) requeueAfter(d time.Duration) {
	if d > 0 && (p.requeue == 0 || d < p.requeue) {
		p.requeue = d
	}
}

// setCondition sets one condition of the status being built.
func (p *pass) setCondition(condType string, value bool, reason, message string) {
	setCondition(p.status, p.cluster, p.now, condType, value, reason, message)
}

// afterWrite queues an effect for after the status write that records it.
func (p *pass) afterWrite(effect func(context.Context) error) {
	p.effects = append(p.effects, effect)
}

// record queues an event for after the status write.
func (p *pass) record(kind, reason, action, note string) {
	p.events = append(p.events, event{kind, reason, action, note})
}

// problem is one reason a cluster is Degraded.
type problem struct{ reason, message string }

// degrade records a problem for the Degraded condition.
func (p *pass) degrade(reason, message string) {
	p.problems = append(p.problems, problem{reason, message})
}

// hold stops the pass on a problem a person must fix: Degraded with
// reason, and a Warning event of action, both saying msg.
func (p *pass) hold(reason, action, msg string) error {
	p.degrade(reason, msg)
	p.record("Warning", reason, action, msg)
	return errStop
}

// input is what the chart renders from: the spec and this pass's decisions.
func (p *pass) input() values.Input {
	in := values.InputFor(p.cluster, p.status)
	if v := p.status.ImageVerification; p.platformVerified && v != nil && v.Image == in.Image.String() {
		in.Image.Digest = v.Digest
	}
	if p.replicas != nil && p.status.Initialized {
		in = in.WithReplicas(*p.replicas, p.status.Upgrade)
	}
	if p.readDecided {
		in.ReadReplicas = p.readReplicas
	}
	in.Issuer = p.issuer
	in.ClaimTemplateSize = p.claimTemplateSize
	return in
}
