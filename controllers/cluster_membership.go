package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	o := membership.Observed{Spec: c.Spec.Replicas, Name: c.StatefulSetName(), RolloutRunning: p.status.Upgrade != nil,
		ClusterCreated: c.CreationTimestamp.Time}
	if reset := p.status.BootstrapReset; reset != nil {
		o.ResetAt = reset.Started.Time
	}
	if sts != nil && sts.Spec.Replicas != nil {
		o.Current = *sts.Spec.Replicas
	}
	if o.Current > 0 && o.Spec > o.Current && !o.RolloutRunning {
		if o.LeftVolumes, err = r.leftVolumes(ctx, c, o.Current, o.Spec); err != nil {
			return err
		}
	}
	if o.Current > o.Spec && !o.RolloutRunning || len(o.LeftVolumes) > 0 {
		r.observeMembers(ctx, p, &o)
	}
	d := membership.Decide(o)
	if err := r.deleteLeftVolumes(ctx, p, d.DeleteVolumes); err != nil {
		return err
	}
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

// leftVolumes reads, exactly, the data volumes at the ordinals a scale-up
// adds (from..to-1): a scale-down under the Retain policy leaves them.
func (r *OpenBaoClusterReconciler) leftVolumes(ctx context.Context, c *v1alpha1.OpenBaoCluster, from, to int32) (map[string]membership.Volume, error) {
	out := map[string]membership.Volume{}
	for k := from; k < to; k++ {
		claim := &corev1.PersistentVolumeClaim{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.DataVolumeName(int(k))}, claim)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read volume claim %s: %w", c.DataVolumeName(int(k)), err)
		}
		out[c.PodName(int(k))] = membership.Volume{Name: claim.Name, Terminating: claim.DeletionTimestamp != nil,
			Created: claim.CreationTimestamp.Time}
	}
	return out, nil
}

// deleteLeftVolumes deletes the volumes of removed peers before a
// scale-up starts servers on them.
func (r *OpenBaoClusterReconciler) deleteLeftVolumes(ctx context.Context, p *pass, names []string) error {
	for _, name := range names {
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: p.cluster.Namespace, Name: name}}
		if err := r.Client.Delete(ctx, claim); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete volume claim %s: %w", name, err)
		}
		ctrl.LoggerFrom(ctx).Info("deleted the volume of a server that left the Raft configuration, before a scale-up reuses its ordinal",
			"audit", true, "event_type", "openbao.cluster.volume_deleted", "claim", name)
		p.record("Normal", "StaleVolumeDeleted", "ScaleUp", fmt.Sprintf(
			"deleted volume claim %s: its server left the Raft configuration at an earlier scale-down and could never rejoin on it", name))
	}
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
	bao, err := r.activeClient(ctx, p.cluster, p.tls, p.servers, tok)
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
	switch {
	case d.Blocked && p.cluster.Spec.Replicas > d.Replicas:
		p.degrade(v1alpha1.ReasonScaleUpBlocked, d.Message)
	case d.Blocked:
		p.degrade(v1alpha1.ReasonScaleDownBlocked, d.Message)
	}
}
