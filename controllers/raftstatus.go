package controllers

import (
	"context"

	"github.com/openbao/operator/internal/raftstatus"
)

// publishRaft owns status.raft. It reuses the view a rollout or scale-down
// read in this pass; otherwise it reads OpenBao only when the copy in the
// status is about one resync period old, so an idle cluster costs one read
// of OpenBao (and one status write) per resync, never one per pass. A read
// that fails keeps the last copy: its observedAt shows its age.
func (r *OpenBaoClusterReconciler) publishRaft(ctx context.Context, p *pass) error {
	if !p.status.Initialized || !r.canUseUpgradeToken(p) {
		return nil
	}
	if p.openbao == nil && !raftstatus.Due(p.status.Raft, p.now, r.ResyncPeriod) {
		return nil
	}
	v := r.view(ctx, p)
	if v.autopilot == nil {
		return nil
	}
	p.status.Raft = raftstatus.Of(*v.autopilot, v.raft, p.now)
	return nil
}

// canUseUpgradeToken says whether upgradeToken has a way to a token: a
// client factory and the operator's identity, a JWT role or a token Secret
// named in spec.upgrade. Without one, reading autopilot would fail on
// every pass that tried.
func (r *OpenBaoClusterReconciler) canUseUpgradeToken(p *pass) bool {
	u := p.cluster.Spec.Upgrade
	return r.OpenBao != nil && (p.status.IdentityConfigured || u.JWTAuthRole != "" || u.TokenSecretRef != nil)
}
