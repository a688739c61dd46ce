package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/values"
)

// autopilotRetry paces the autopilot step while joiners become voters.
const autopilotRetry = 3 * time.Second

// settledGenerations remembers, per cluster, the generation whose autopilot
// configuration is in place with every replica a voter, so a settled
// cluster costs no OpenBao request per reconcile.
type settledGenerations struct {
	mu  sync.Mutex
	gen map[types.UID]int64
}

func (s *settledGenerations) settled(uid types.UID, generation int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.gen[uid]
	return ok && g == generation
}

func (s *settledGenerations) set(uid types.UID, generation int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == nil {
		s.gen = map[types.UID]int64{}
	}
	s.gen[uid] = generation
}

// reconcileAutopilot keeps autopilot at the bootstrap values while joiners
// are promoted, and at the steady ones once every replica votes. It needs
// the root token the operator stored, so self-initialized and adopted
// clusters are left as OpenBao has them.
func (r *OpenBaoClusterReconciler) reconcileAutopilot(ctx context.Context, c *v1alpha1.OpenBaoCluster,
	status *v1alpha1.OpenBaoClusterStatus, served servedTLS) (ctrl.Result, error) {
	if status.SelfInitialized || r.autopilotSettled.settled(c.UID, c.Generation) {
		return ctrl.Result{}, nil
	}
	secret, err := r.readSecret(ctx, r.Client, c.Namespace, c.RootTokenSecretName())
	if err != nil || secret == nil || len(secret.Data[bootstrap.RootTokenDataKey]) == 0 {
		return ctrl.Result{}, err
	}
	bao, err := r.activeClient(c, served, openbao.NewToken(string(secret.Data[bootstrap.RootTokenDataKey])))
	if err != nil {
		return ctrl.Result{}, err
	}
	log := ctrl.LoggerFrom(ctx)
	raft, err := bao.RaftConfiguration(ctx)
	if err != nil {
		log.V(1).Info("autopilot: Raft configuration not readable yet", "reason", err.Error())
		return ctrl.Result{RequeueAfter: autopilotRetry}, nil
	}
	phase := bootstrap.PhaseOf(raft, c.Spec.Replicas)
	want := bootstrap.AutopilotConfig(c.Spec.Replicas, values.AutopilotOverrides(c), phase)
	if err := bootstrap.ValidateAutopilot(want); err != nil {
		return ctrl.Result{}, fmt.Errorf("autopilot: %w", err) // admission rules should have refused it
	}
	current, err := bao.AutopilotConfiguration(ctx)
	if err == nil && bootstrap.AutopilotNeedsUpdate(current, want) {
		err = bao.SetAutopilotConfiguration(ctx, want)
	}
	if err != nil {
		log.V(1).Info("autopilot: not configured yet", "reason", err.Error())
		return ctrl.Result{RequeueAfter: autopilotRetry}, nil
	}
	if phase != bootstrap.PhaseSteady {
		return ctrl.Result{RequeueAfter: autopilotRetry}, nil
	}
	log.Info("autopilot configured for the steady state", "voters", len(raft.Voters()),
		"minQuorum", want.MinQuorum, "serverStabilizationTime", want.ServerStabilizationTime.String())
	r.autopilotSettled.set(c.UID, c.Generation)
	return ctrl.Result{}, nil
}

// activeClient talks to the active server through the client Service,
// which selects it by the openbao-active label.
func (r *OpenBaoClusterReconciler) activeClient(c *v1alpha1.OpenBaoCluster, served servedTLS, token openbao.Token) (openbao.Client, error) {
	host := fmt.Sprintf("%s.%s.svc", c.ClientServiceName(), c.Namespace)
	return r.OpenBao(openbao.Options{Address: "https://" + host + ":8200", CACert: served.caPEM, ServerName: host, Token: token})
}
