package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/autopilot"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/secrets"
	"github.com/openbao/operator/internal/values"
)

// reconcileBootstrap owns OpenBaoInitialized: it initializes the cluster
// once, or adopts one that is initialized. It runs before the chart is
// rendered, so the pass that initializes the cluster also scales it out.
func (r *OpenBaoClusterReconciler) reconcileBootstrap(ctx context.Context, p *pass) error {
	if !p.tls.ready || r.OpenBao == nil {
		return nil // no trusted channel to the servers yet
	}
	obs, err := r.observeBootstrap(ctx, p)
	if err != nil {
		return err
	}
	d := bootstrap.Decide(obs)
	switch d.Action {
	case bootstrap.ActionNone:
		return r.keepInitializedTold(ctx, p)
	case bootstrap.ActionInitialize:
		return r.initialize(ctx, p)
	case bootstrap.ActionReset:
		return r.resetBootstrap(ctx, p, d)
	case bootstrap.ActionAdopt, bootstrap.ActionMarkInitialized:
		p.status.Initialized = true
		p.status.SelfInitialized = d.Action == bootstrap.ActionAdopt && d.SelfInitialized
		p.setCondition(v1alpha1.ConditionOpenBaoInitialized, true, d.Reason, d.Message)
		p.record(eventKind(d.Reason), d.Reason, "Bootstrap", d.Message)
	case bootstrap.ActionDegraded:
		p.setCondition(v1alpha1.ConditionOpenBaoInitialized, p.status.Initialized, d.Reason, d.Message)
		p.degrade(d.Reason, d.Message)
		p.record("Warning", d.Reason, "Bootstrap", d.Message)
		p.requeueAfter(d.RequeueAfter)
	default: // ActionWait
		p.setCondition(v1alpha1.ConditionOpenBaoInitialized, false, d.Reason, d.Message)
		p.requeueAfter(d.RequeueAfter)
	}
	return nil
}

func (r *OpenBaoClusterReconciler) observeBootstrap(ctx context.Context, p *pass) (bootstrap.Observed, error) {
	c, status := p.cluster, p.status
	obs := bootstrap.Observed{
		Initialized: status.Initialized, SelfInitialized: status.SelfInitialized,
		SelfInit:            c.Spec.SelfInit != nil && c.Spec.SelfInit.Enabled,
		RootTokenSecretName: c.RootTokenSecretName(),
		Now:                 p.now,
		InitStarted:         status.InitializationStarted != nil,
		ResetDone:           status.BootstrapReset != nil,
		FromBackup:          c.FromBackup() != nil,
		FromBackupRecorded:  status.FromBackup != nil || p.anyRestore,
		ClusterCreated:      c.CreationTimestamp.Time,
		Pod0ClaimName:       c.DataVolumeName(0),
	}
	if obs.ResetDone && !obs.Initialized {
		pending, err := r.resetPending(ctx, c, status.BootstrapReset)
		if err != nil {
			return obs, err
		}
		obs.ResetPending = pending
	}
	r.memory.with(client.ObjectKeyFromObject(c), c.UID, func(m *clusterMemory) {
		obs.InitFailures, obs.LastInitFailure = m.initFailures, m.lastInitFailure
	})
	if pod0, ok := p.servers.Get(c.PodName(0)); ok {
		obs.Pod0 = &pod0
	}
	if !obs.NeedsRootTokenSecret() {
		return obs, nil
	}
	// Exact, not cached: a stale Secret made by hand carries no label of ours.
	token, err := r.readSecret(ctx, r.APIReader, c.Namespace, c.RootTokenSecretName())
	if err != nil {
		return obs, err
	}
	obs.RootTokenSecretExists = token != nil
	if obs.NeedsHealth() {
		bao, err := r.podClient(p, 0, openbao.Token{})
		if err != nil {
			return obs, err
		}
		h, err := bao.Health(ctx)
		if err != nil {
			obs.HealthErr = err
		} else {
			obs.Health = &h
		}
	}
	if obs.NeedsPod0Claim() {
		if obs.Pod0Claim, err = r.pod0Claim(ctx, c); err != nil {
			return obs, err
		}
	}
	return obs, nil
}

// pod0Claim reads pod-0's data volume claim exactly (a cached one could be
// a claim already replaced), nil when it does not exist.
func (r *OpenBaoClusterReconciler) pod0Claim(ctx context.Context, c *v1alpha1.OpenBaoCluster) (*bootstrap.Claim, error) {
	claim := &corev1.PersistentVolumeClaim{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.DataVolumeName(0)}, claim)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read volume claim %s: %w", c.DataVolumeName(0), err)
	}
	return &bootstrap.Claim{Created: claim.CreationTimestamp.Time}, nil
}

// initialize runs sys/init through internal/bootstrap, which keeps the root
// token in memory for this call only and stores it in its Secret.
func (r *OpenBaoClusterReconciler) initialize(ctx context.Context, p *pass) error {
	c := p.cluster
	bao, err := r.podClient(p, 0, openbao.Token{})
	if err != nil {
		return err
	}
	request, recovery, err := r.recoveryKeyRequest(ctx, c)
	if err != nil {
		recoveryKeysUnavailable(p, err)
		return nil
	}
	if err := r.recordInitStart(ctx, p); err != nil {
		return err
	}
	bootstrapAutopilot := autopilot.For(c.Spec.Replicas, values.AutopilotOverrides(c), autopilot.PhaseBootstrap)
	store := &bootstrap.SecretTokenStore{Client: r.Client, Template: secrets.New(c, secrets.Spec{
		Name: c.RootTokenSecretName(), Lifetime: secrets.WithData,
	})}
	opts := bootstrap.InitOptions{
		Request: request, Recovery: recovery,
		Autopilot:       &bootstrapAutopilot,
		ClientWithToken: func(t openbao.Token) (openbao.Client, error) { return r.podClient(p, 0, t) },
	}
	if r.Issuer != nil {
		opts.Setup = func(ctx context.Context, withRoot openbao.Client) error { return r.setUpIdentity(ctx, p, withRoot) }
	}
	out, err := bootstrap.Initialize(ctx, bao, store, opts)
	var initErr *bootstrap.InitError
	if errors.As(err, &initErr) {
		r.initFailed(p, initErr)
		return nil
	}
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	r.memory.with(client.ObjectKeyFromObject(c), c.UID, func(m *clusterMemory) { m.initFailures = 0 })
	p.status.Initialized, p.status.SelfInitialized = true, false
	msg := fmt.Sprintf("initialized through sys/init; the root token is in Secret %s", c.RootTokenSecretName())
	p.setCondition(v1alpha1.ConditionOpenBaoInitialized, true, bootstrap.ReasonInitialized, msg)
	p.record("Normal", bootstrap.ReasonInitialized, "Initialize", msg)
	ctrl.LoggerFrom(ctx).Info("initialized the cluster through sys/init", "audit", true,
		"event_type", "openbao.cluster.initialized", "rootTokenSecret", c.RootTokenSecretName())
	if out.RecoveryErr != nil {
		recoveryKeysLost(ctx, p, out.RecoveryErr)
	}
	if out.AutopilotErr != nil {
		ctrl.LoggerFrom(ctx).Info("autopilot not configured yet; retrying", "reason", out.AutopilotErr.Error())
	}
	if out.SetupErr != nil {
		ctrl.LoggerFrom(ctx).Info("the operator's identity is not set up yet; retrying", "reason", out.SetupErr.Error())
	}
	return nil
}

// recoveryKeysUnavailable holds sys/init while the PGP keys of
// spec.rootToken.recoveryKeys cannot be used.
func recoveryKeysUnavailable(p *pass, err error) {
	msg := err.Error() + "; sys/init waits for usable PGP keys, so that the cluster never starts without recovery keys"
	p.setCondition(v1alpha1.ConditionOpenBaoInitialized, false, bootstrap.ReasonRecoveryKeysUnavailable, msg)
	p.degrade(bootstrap.ReasonRecoveryKeysUnavailable, msg)
	p.record("Warning", bootstrap.ReasonRecoveryKeysUnavailable, "Initialize", msg)
	p.requeueAfter(bootstrap.DegradedRequeue)
}

// recoveryKeysLost reports encrypted shares sys/init returned that could
// not be stored: Revoke is refused from then on.
func recoveryKeysLost(ctx context.Context, p *pass, err error) {
	lost := fmt.Sprintf("the recovery keys were not stored: %s. spec.rootToken.policy Revoke will be refused; "+
		"make new ones with the root token (bao operator rekey -target=recovery -init -pgp-keys=...) and keep them yourself", err.Error())
	p.record("Warning", bootstrap.ReasonRecoveryKeysLost, "Initialize", lost)
	ctrl.LoggerFrom(ctx).Info("recovery keys not stored", "audit", true, "event_type", "openbao.bootstrap.recovery_keys_lost",
		"reason", err.Error())
}

// recoveryKeyRequest is the sys/init request for spec.rootToken.recoveryKeys
// and the store of its encrypted shares; {} and nil without them. The
// ConfigMap is read exactly (it is the user's and carries no label of
// ours); the webhook checked that its author may read it.
func (r *OpenBaoClusterReconciler) recoveryKeyRequest(ctx context.Context, c *v1alpha1.OpenBaoCluster) (openbao.InitRequest, bootstrap.RecoveryKeyStore, error) {
	spec := c.RecoveryKeysOf()
	if spec == nil {
		return openbao.InitRequest{}, nil, nil
	}
	ref := spec.PGPKeysConfigMapRef
	cm := &corev1.ConfigMap{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ref.Name}, cm); err != nil {
		return openbao.InitRequest{}, nil, fmt.Errorf("spec.rootToken.recoveryKeys.pgpKeysConfigMapRef: read ConfigMap %s: %w", ref.Name, err)
	}
	keys, err := bootstrap.PGPKeys(ref, cm.Data, cm.BinaryData, r.Clock.Now())
	if err != nil {
		return openbao.InitRequest{}, nil, fmt.Errorf("spec.rootToken.recoveryKeys.pgpKeysConfigMapRef: %w", err)
	}
	req := openbao.InitRequest{RecoveryShares: len(keys), RecoveryThreshold: spec.ThresholdOrDefault(), RecoveryPGPKeys: keys}
	store := &bootstrap.SecretRecoveryKeyStore{Client: r.Client, Template: secrets.New(c, secrets.Spec{
		Name: c.RecoveryKeysSecretName(), Lifetime: secrets.WithData,
	})}
	return req, store, nil
}

// initFailed records a failed Initialize and paces the next attempt.
func (r *OpenBaoClusterReconciler) initFailed(p *pass, initErr *bootstrap.InitError) {
	var failures int
	r.memory.with(client.ObjectKeyFromObject(p.cluster), p.cluster.UID, func(m *clusterMemory) {
		m.initFailures++
		m.lastInitFailure = p.now
		failures = m.initFailures
	})
	if initErr.OutcomeKnown() {
		// OpenBao answered (or was never asked): nothing was initialized,
		// so no later pass may take this call for a lost initialization.
		p.status.InitializationStarted = nil
	}
	p.setCondition(v1alpha1.ConditionOpenBaoInitialized, false, initErr.Reason, initErr.Error())
	p.record("Warning", initErr.Reason, "Initialize", initErr.Error())
	if initErr.Reason == bootstrap.ReasonRootTokenLost {
		// status.initialized stays false: the next pass finds OpenBao
		// initialized without a token and resets it (bootstrap.Decide).
		p.requeueAfter(bootstrap.PollInterval)
		return
	}
	p.requeueAfter(bootstrap.InitBackoff(failures))
}

// initializedCondition keeps the reason the cluster was initialized with
// (Initialized, SelfInitialized, RootTokenLost; Adopted from earlier releases): how it came to be
// initialized does not change afterwards, and a lost token must stay told.
func initializedCondition(c *v1alpha1.OpenBaoCluster, status *v1alpha1.OpenBaoClusterStatus) (reason, message string) {
	if cond := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionOpenBaoInitialized); cond != nil &&
		cond.Status == metav1.ConditionTrue {
		return cond.Reason, cond.Message
	}
	if status.SelfInitialized {
		return bootstrap.ReasonSelfInitialized, "initialized by OpenBao's self-init; the operator holds no root token"
	}
	return bootstrap.ReasonInitialized, "the cluster is initialized; the root token is in Secret " + c.RootTokenSecretName()
}

// keepInitializedTold sets OpenBaoInitialized for an initialized cluster,
// saying where its root token is, or that its Secret is gone (with a
// warning Event when that is news).
func (r *OpenBaoClusterReconciler) keepInitializedTold(ctx context.Context, p *pass) error {
	was, msg := initializedCondition(p.cluster, p.status)
	reason := was
	if was == bootstrap.ReasonInitialized || was == bootstrap.ReasonRootTokenSecretMissing || was == bootstrap.ReasonRootTokenRevoked {
		token, err := r.rootTokenSecret(ctx, p)
		if err != nil {
			return err
		}
		revoked := p.status.RootToken != nil && p.status.RootToken.RevokedAt != nil
		reason, msg = bootstrap.TokenCondition(was, msg, token != nil, revoked, p.cluster.RootTokenSecretName(),
			p.cluster.RecoveryKeysSecretName())
	}
	if reason == bootstrap.ReasonRootTokenSecretMissing && was != reason {
		p.record("Warning", reason, "Bootstrap", msg)
	}
	p.setCondition(v1alpha1.ConditionOpenBaoInitialized, true, reason, msg)
	return nil
}

// recordInitStart writes status.initializationStarted before sys/init is
// called: the one moment whose loss cannot be repaired must leave a trace.
func (r *OpenBaoClusterReconciler) recordInitStart(ctx context.Context, p *pass) error {
	started := metav1.NewTime(p.now)
	c := p.cluster
	patch := client.MergeFrom(c.DeepCopy())
	c.Status.InitializationStarted = &started
	if err := r.Client.Status().Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("record the start of sys/init: %w", err)
	}
	p.status.InitializationStarted = &started
	return nil
}

func eventKind(reason string) string {
	if degradedReasons[reason] {
		return "Warning"
	}
	return "Normal"
}
