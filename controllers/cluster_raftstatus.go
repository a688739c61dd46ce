package controllers

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/raftstatus"
)

// publishRaft owns status.raft. It reuses the view a rollout or scale-down
// read in this pass; otherwise it reads OpenBao only when the copy in the
// status is about one resync period old, or, while the copy shows the
// cluster unsettled (servers joining, promoted, recovering), every 10 s.
// A settled idle cluster costs one read of OpenBao per resync, never one
// per pass, and no status write while the read tells what the copy does
// (raftstatus.Next; the read's time is remembered instead). A read that
// fails keeps the last copy: its observedAt shows its age.
func (r *OpenBaoClusterReconciler) publishRaft(ctx context.Context, p *pass) error {
	if !p.status.Initialized || !r.canUseUpgradeToken(p) {
		return nil
	}
	want := raftMembers(p.cluster)
	// Observed by the servers step, earlier in the pass.
	down := sealedServers(p) > 0 || p.status.ReadyReplicas < p.cluster.Spec.Replicas
	key := client.ObjectKeyFromObject(p.cluster)
	var readAt time.Time
	r.memory.with(key, p.cluster.UID, func(m *clusterMemory) { readAt = m.raftReadAt })
	if p.openbao == nil && !raftstatus.Due(p.status.Raft, want, p.now, r.ResyncPeriod, down, readAt) {
		p.requeueUnlessSettled(want, down)
		return nil
	}
	v := r.view(ctx, p)
	if v.autopilot == nil {
		return nil
	}
	p.status.Raft = raftstatus.Next(p.status.Raft, raftstatus.Of(*v.autopilot, v.raft, p.now), want)
	r.memory.with(key, p.cluster.UID, func(m *clusterMemory) { m.raftReadAt = p.now })
	p.requeueUnlessSettled(want, down)
	return nil
}

// requeueUnlessSettled looks again soon at a cluster whose Raft copy shows
// it still forming, promoting or recovering, or whose pods show a server
// down, even when no event comes.
func (p *pass) requeueUnlessSettled(want raftstatus.Members, down bool) {
	if down || !raftstatus.Settled(p.status.Raft, want) {
		p.requeueAfter(raftstatus.UnsettledInterval)
	}
}

// raftMembers is what a settled cluster's Raft configuration holds: the
// spec's voters, and its read replicas as non-voters.
func raftMembers(c *v1alpha1.OpenBaoCluster) raftstatus.Members {
	want := raftstatus.Members{Voters: c.Spec.Replicas}
	if r := c.Spec.ReadReplicas; r != nil {
		want.NonVoters = r.Replicas
	}
	return want
}

// canUseUpgradeToken says whether upgradeToken has a way to a token: a
// client factory and the operator's identity, a JWT role or a token Secret
// named in spec.upgrade. Without one, reading autopilot would fail on
// every pass that tried.
func (r *OpenBaoClusterReconciler) canUseUpgradeToken(p *pass) bool {
	u := p.cluster.Spec.Upgrade
	return r.OpenBao != nil && (p.status.IdentityConfigured || u.JWTAuthRole != "" || u.TokenSecretRef != nil)
}
