package controllers

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/day2"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/internal/upgrade"
)

// SnapshotTaker takes the pre-upgrade snapshot of a rollout.
type SnapshotTaker interface {
	// PreUpgradeSnapshot makes sure a snapshot of the cluster is taken for
	// the rollout to revision, and says whether it succeeded; problem
	// explains why it cannot be taken (backups are not configured).
	PreUpgradeSnapshot(ctx context.Context, c *v1alpha1.OpenBaoCluster, revision string) (done bool, problem string, err error)
}

// statefulSet reads the cluster's StatefulSet from the cache; nil when it
// does not exist yet.
func (r *OpenBaoClusterReconciler) statefulSet(ctx context.Context, c *v1alpha1.OpenBaoCluster) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.StatefulSetName()}, sts)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read StatefulSet %s: %w", c.StatefulSetName(), err)
	}
	return sts, nil
}

// reconcileRollout owns Upgrading and status.upgrade: it rolls a changed
// pod template through internal/upgrade and sets the partition the chart
// renders in this pass.
func (r *OpenBaoClusterReconciler) reconcileRollout(ctx context.Context, p *pass) error {
	if !p.status.Initialized {
		return nil // one bootstrapping server; its template is the first
	}
	o, err := r.observeRollout(ctx, p)
	if err != nil {
		return err
	}
	d := upgrade.Decide(o)
	if o.Upgrade == nil && !d.Started && !d.TakeSnapshot {
		// Decided afresh not to start: no longer in the way of others.
		r.Operations.ReleaseKind(day2.ClusterOf(p.cluster), day2.Rollout)
		r.RolloutSlots.Release(client.ObjectKeyFromObject(p.cluster))
	}
	if d.Settled != 0 {
		p.status.SettledGeneration = d.Settled
	}
	if d.StepDown != "" {
		if err := r.stepDown(ctx, p, d.StepDown, "rollout"); err != nil {
			ctrl.LoggerFrom(ctx).Info("step-down failed; retrying", "pod", d.StepDown, "reason", err.Error())
			// Ask again next pass: a release's step-down from its start, one
			// asked while the pod before catches up (upgrade.stepDownEarly)
			// from the step that pod is verified in.
			if d.Upgrade.Step == upgrade.StepStepDown {
				d.Upgrade.Step = ""
			}
			d.Upgrade.LastStepDownTime = nil
		}
	}
	p.status.Upgrade = d.Upgrade
	if d.Upgrading != nil {
		p.setCondition(v1alpha1.ConditionUpgrading, d.Upgrading.Status, d.Upgrading.Reason, d.Upgrading.Message)
	}
	if d.Problem != nil {
		p.degrade(d.Problem.Reason, d.Problem.Message)
	}
	for _, e := range d.Events {
		p.record(kindOf(e.Warning), e.Reason, "Rollout", e.Message)
	}
	p.requeueAfter(d.Requeue)
	recordRollout(p.cluster, o, d, p.now)
	return nil
}

// observeRollout gathers what upgrade.Decide looks at; OpenBao is asked
// only while a rollout runs or is due.
func (r *OpenBaoClusterReconciler) observeRollout(ctx context.Context, p *pass) (upgrade.Observed, error) {
	c := p.cluster
	sts, err := r.statefulSet(ctx, c)
	if err != nil {
		return upgrade.Observed{}, err
	}
	in := p.input()
	o := upgrade.Observed{
		Now: p.now, Settings: upgrade.SettingsFor(c.Spec.Upgrade), SpecVersion: c.Spec.Version,
		CurrentVersion: p.status.CurrentVersion, SealType: c.Spec.Unseal.Type, Replicas: in.Replicas,
		Name: c.StatefulSetName(), Upgrade: p.status.Upgrade, Pods: rolloutPods(p.servers, nil),
	}
	if cond := meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionUpgrading); cond != nil {
		o.UpgradingReason = cond.Reason
	}
	if sts != nil {
		o.StatefulSetObserved = sts.Status.ObservedGeneration >= sts.Generation
		o.UpdateRevision = sts.Status.UpdateRevision
		if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
			o.LivePartition, o.LivePartitionKnown = *ru.Partition, true
		}
		if sts.Spec.Replicas != nil {
			o.LiveReplicas = *sts.Spec.Replicas
		}
		o.RenderedGeneration = renderedGeneration(sts, c.Status.ObservedGeneration)
	}
	o.SettledGeneration = p.status.SettledGeneration
	o.Cause = upgrade.CauseOf(o.RenderedGeneration, o.SettledGeneration)
	settled := o.Upgrade == nil && o.StatefulSetObserved && len(o.Behind()) == 0
	o.HighestVersion = upgrade.HighestVersion(p.status.HighestVersion, p.status.CurrentVersion, settled, reportedVersions(p.servers))
	p.status.HighestVersion = o.HighestVersion
	if !o.RolloutPending() {
		return o, nil
	}
	if o.Upgrade == nil {
		if o.Slot, err = r.claimSlot(ctx, c, o.Cause, false); err != nil || !o.Slot.OK() {
			return o, err // it waits for a slot: nothing of OpenBao is needed to say so
		}
		ops, err := observeOperations(ctx, r.Client, c, p.status)
		if err != nil {
			return o, err
		}
		// Held in the registry from this decision on; released above when
		// the rollout does not start after all.
		o.Lock = r.Operations.Start(day2.ClusterOf(c), day2.RolloutOp(), ops)
	}
	v := r.view(ctx, p)
	v.measureLag(ctx)
	o.Pods, o.Raft, o.RaftProblem, o.Health = rolloutPods(p.servers, v), v.raft, v.problem, v.health
	// Every release waits for the read replicas (upgrade.ReadBehind), not
	// only the rollout's start.
	if o.Read, err = r.observeReadRollout(ctx, c); err != nil {
		return o, err
	}
	if o.Upgrade == nil {
		// Claimed after OpenBao answered, so the claim is not held across
		// those calls, and before the snapshot, which only a rollout that
		// holds its slot takes.
		if o.Slot, err = r.claimSlot(ctx, c, o.Cause, true); err != nil || !o.Slot.OK() {
			return o, err
		}
	}
	if o.Settings.PreUpgradeSnapshot && o.Upgrade == nil {
		o.SnapshotDone, o.SnapshotProblem, err = r.preUpgradeSnapshot(ctx, c, o.UpdateRevision)
	}
	return o, err
}

// claimSlot takes (claim) or checks for a rollout slot for an
// operator-caused rollout of c (Slots.Claim, Slots.Check), counting the
// clusters whose status shows one under way: after a restart the cache,
// not memory, says who holds the slots. A cluster being deleted has
// abandoned its rollout.
func (r *OpenBaoClusterReconciler) claimSlot(ctx context.Context, c *v1alpha1.OpenBaoCluster, cause v1alpha1.RolloutCause, claim bool) (upgrade.Slot, error) {
	if r.RolloutSlots == nil || cause != v1alpha1.RolloutCauseOperator {
		return upgrade.Slot{}, nil
	}
	all := &v1alpha1.OpenBaoClusterList{}
	if err := r.Client.List(ctx, all); err != nil {
		return upgrade.Slot{}, fmt.Errorf("list OpenBaoClusters for the rollout slots: %w", err)
	}
	var shown []types.NamespacedName
	for i := range all.Items {
		o := &all.Items[i]
		if up := o.Status.Upgrade; up != nil && up.Cause == v1alpha1.RolloutCauseOperator && o.DeletionTimestamp.IsZero() {
			shown = append(shown, client.ObjectKeyFromObject(o))
		}
	}
	if !claim {
		return r.RolloutSlots.Check(client.ObjectKeyFromObject(c), cause, shown), nil
	}
	return r.RolloutSlots.Claim(client.ObjectKeyFromObject(c), c.UID, cause, shown), nil
}

// renderedGeneration reads the StatefulSet's
// openbao.org/rendered-generation. One rendered before the annotation
// existed (by an older operator) was rendered from the generation the
// last pass observed, which is the best word on it: without it, the
// first upgrade to an operator that bounds rollouts would not be bounded.
func renderedGeneration(sts *appsv1.StatefulSet, observed int64) int64 {
	v, ok := sts.Annotations[v1alpha1.AnnotationRenderedGeneration]
	if !ok {
		return observed
	}
	g, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0 // not ours to trust: the rollout counts as the spec's
	}
	return g
}

// reportedVersions are the versions the servers' service registration
// reports, Ready or not: a server that ran a release and crashed still
// wrote its data with it.
func reportedVersions(servers podstate.Snapshot) []string {
	out := make([]string, 0, len(servers))
	for _, s := range servers {
		out = append(out, s.Version())
	}
	return out
}

func (r *OpenBaoClusterReconciler) preUpgradeSnapshot(ctx context.Context, c *v1alpha1.OpenBaoCluster, revision string) (bool, string, error) {
	if r.PreUpgradeSnapshot == nil {
		return false, "backups are not available in this operator; unset spec.upgrade.preUpgradeSnapshot or configure spec.backup", nil
	}
	return r.PreUpgradeSnapshot.PreUpgradeSnapshot(ctx, c, revision)
}

// stepDown asks the server of pod to give up leadership, with the upgrade
// role's token, once it confirmed it is active (a standby would forward
// the request), and leaves an audit line.
func (r *OpenBaoClusterReconciler) stepDown(ctx context.Context, p *pass, pod, why string) error {
	tok, err := r.upgradeToken(ctx, p)
	if err != nil {
		return err
	}
	if err := r.confirmActive(ctx, p.cluster, p.tls, p.servers, ordinalOf(p, pod)); err != nil {
		return err
	}
	bao, err := r.podClient(p, ordinalOf(p, pod), tok)
	if err != nil {
		return err
	}
	err = bao.StepDown(ctx)
	if errors.Is(err, openbao.ErrPermissionDenied) {
		r.forgetUpgradeToken(p.cluster)
	}
	if err != nil {
		return fmt.Errorf("step down %s: %w", pod, err)
	}
	upgradeStepDowns.WithLabelValues(p.cluster.Namespace, p.cluster.Name).Inc()
	ctrl.LoggerFrom(ctx).Info("asked the active server to step down", "audit", true,
		"event_type", "openbao.raft.step_down", "pod", pod, "reason", why)
	return nil
}

func ordinalOf(p *pass, pod string) int {
	if s, ok := p.servers.Get(pod); ok && s.Ordinal >= 0 {
		return s.Ordinal
	}
	return 0
}

func kindOf(warning bool) string {
	if warning {
		return "Warning"
	}
	return "Normal"
}
