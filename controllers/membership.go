package controllers

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/membership"
	"github.com/openbao/operator/internal/openbao"
)

// reconcileMembership decides how many servers the chart renders once the
// cluster is initialized: a scale-up at once, a scale-down one peer at a
// time after it left the Raft configuration.
func (r *OpenBaoClusterReconciler) reconcileMembership(ctx context.Context, p *pass) error {
	c := p.cluster
	if !p.status.Initialized {
		return nil
	}
	sts, err := r.statefulSet(ctx, c)
	if err != nil {
		return err
	}
	o := membership.Observed{Spec: c.Spec.Replicas, Name: c.StatefulSetName(), RolloutRunning: p.status.Upgrade != nil}
	if sts != nil && sts.Spec.Replicas != nil {
		o.Current = *sts.Spec.Replicas
	}
	if o.Current > o.Spec && !o.RolloutRunning {
		r.observeMembers(ctx, p, &o)
	}
	d := membership.Decide(o)
	if d.StepDown != "" {
		if err := r.stepDown(ctx, p, d.StepDown, "scale-down"); err != nil {
			ctrl.LoggerFrom(ctx).Info("step-down before peer removal failed; retrying", "pod", d.StepDown, "reason", err.Error())
		}
	}
	if d.RemovePeer != "" {
		if err := r.removePeer(ctx, p, d.RemovePeer); err != nil {
			d.Replicas, d.Message, d.Blocked = o.Current, err.Error(), true
		}
	}
	r.reportMembership(p, d)
	p.replicas = &d.Replicas
	return nil
}

// observeMembers fills the Raft membership and the active server.
func (r *OpenBaoClusterReconciler) observeMembers(ctx context.Context, p *pass, o *membership.Observed) {
	v := r.view(ctx, p)
	if v.raft == nil {
		o.Problem = v.problem
		return
	}
	o.Servers = map[string]membership.Server{}
	for id, s := range v.raft.Servers {
		o.Servers[id] = membership.Server{Voter: s.Voter, Healthy: s.Healthy}
	}
	for _, pod := range rolloutPods(p.servers, v) {
		if pod.Active {
			o.ActivePod = pod.Name
		}
	}
}

func (r *OpenBaoClusterReconciler) removePeer(ctx context.Context, p *pass, nodeID string) error {
	tok, err := r.upgradeToken(ctx, p)
	if err != nil {
		return err
	}
	bao, err := r.activeClient(p.cluster, p.tls, tok)
	if err != nil {
		return err
	}
	err = bao.RemovePeer(ctx, nodeID)
	if errors.Is(err, openbao.ErrPermissionDenied) {
		r.forgetUpgradeToken(p.cluster)
	}
	if err != nil {
		return fmt.Errorf("remove %s from the Raft configuration: %w", nodeID, err)
	}
	ctrl.LoggerFrom(ctx).Info("removed a peer from the Raft configuration before its pod goes", "audit", true,
		"event_type", "openbao.raft.remove_peer", "peer", nodeID)
	p.record("Normal", "PeerRemoved", "ScaleDown", fmt.Sprintf("%s left the Raft configuration; its pod goes next", nodeID))
	return nil
}

// reportMembership makes a blocked scale-down Degraded; progress shows in
// the PeerRemoved events and the replica count.
func (r *OpenBaoClusterReconciler) reportMembership(p *pass, d membership.Decision) {
	p.requeueAfter(d.Requeue)
	if d.Blocked {
		p.degrade(v1alpha1.ReasonScaleDownBlocked, d.Message)
	}
}
