package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/autopilot"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/values"
)

// autopilotRetry paces the autopilot step while joiners become voters.
const autopilotRetry = 3 * time.Second

// reconcileAutopilot keeps autopilot at the bootstrap values while joiners
// are promoted, and at the steady ones once every replica votes, with the
// upgrade role's token (never the root token). Self-initialized clusters
// got the steady values as a self-init request; clusters the operator
// cannot log in to are left as OpenBao has them. A generation settled with
// every replica a voter costs no OpenBao request per pass.
func (r *OpenBaoClusterReconciler) reconcileAutopilot(ctx context.Context, p *pass) error {
	c := p.cluster
	if !p.status.Initialized || p.status.SelfInitialized || !p.tls.ready || r.OpenBao == nil || r.autopilotSettled(c) {
		return nil
	}
	if c.DrillSource() != "" && c.IdentityOwner() != c {
		return nil // a drill's copy holding the snapshot: its drill role reads, never writes
	}
	tok, err := r.upgradeToken(ctx, p)
	if errors.Is(err, errNoUpgradeAuth) {
		return nil
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("autopilot: cannot log in yet", "reason", err.Error())
		p.requeueAfter(autopilotRetry)
		return nil
	}
	log := ctrl.LoggerFrom(ctx)
	bao, err := r.activeClient(ctx, c, p.tls, p.servers, tok)
	if err != nil {
		log.V(1).Info("autopilot: no active server confirmed yet", "reason", err.Error())
		p.requeueAfter(autopilotRetry)
		return nil
	}
	raft, err := bao.RaftConfiguration(ctx)
	if err != nil {
		log.V(1).Info("autopilot: Raft configuration not readable yet", "reason", err.Error())
		p.requeueAfter(autopilotRetry)
		return nil
	}
	phase := autopilot.PhaseOf(raft, c.Spec.Replicas)
	want := autopilot.For(c.Spec.Replicas, values.AutopilotOverrides(c), phase)
	if err := autopilot.Validate(want); err != nil {
		return fmt.Errorf("autopilot: %w", err) // admission rules should have refused it
	}
	current, err := bao.AutopilotConfiguration(ctx)
	if err == nil && autopilot.NeedsUpdate(current, want) {
		err = bao.SetAutopilotConfiguration(ctx, want)
	}
	if errors.Is(err, openbao.ErrPermissionDenied) {
		r.forgetUpgradeToken(c)
	}
	if err != nil {
		log.V(1).Info("autopilot: not configured yet", "reason", err.Error())
		p.requeueAfter(autopilotRetry)
		return nil
	}
	if phase != autopilot.PhaseSteady {
		p.requeueAfter(autopilotRetry)
		return nil
	}
	log.Info("autopilot configured for the steady state", "voters", len(raft.Voters()),
		"minQuorum", want.MinQuorum, "serverStabilizationTime", want.ServerStabilizationTime.String())
	r.memory.with(client.ObjectKeyFromObject(c), c.UID, func(m *clusterMemory) {
		m.autopilotSettled, m.autopilotGeneration = true, c.Generation
	})
	return nil
}

func (r *OpenBaoClusterReconciler) autopilotSettled(c *v1alpha1.OpenBaoCluster) bool {
	var settled bool
	r.memory.with(client.ObjectKeyFromObject(c), c.UID, func(m *clusterMemory) {
		settled = m.autopilotSettled && m.autopilotGeneration == c.Generation
	})
	return settled
}
