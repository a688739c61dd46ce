package controllers

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/day2"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/pki"
)

// +kubebuilder:rbac:groups=openbao.org,resources=openbaoclusters,verbs=create;delete

// reconcileDrill owns BackupVerified: spec.backup.verify's restore drills
// (backup.DecideDrill). It creates and deletes the copy, reads the canary
// from it, and tells how each drill ended.
func (r *OpenBaoClusterReconciler) reconcileDrill(ctx context.Context, p *pass) error {
	c := p.cluster
	if c.Spec.Backup == nil && (p.status.Backup == nil || p.status.Backup.Verifying == nil) {
		return nil
	}
	o, err := r.observeDrill(ctx, p)
	if err != nil {
		return err
	}
	d, err := r.claimDrill(ctx, p, backup.DecideDrill(o))
	if err != nil {
		return err
	}
	if err := r.carryOutDrill(ctx, c, d); err != nil {
		if refused(err) {
			// A refusal no retry clears: say so where users look, and
			// keep retrying (a fixed spec or webhook lets the next one in).
			p.setCondition(v1alpha1.ConditionBackupVerified, false, backup.ReasonDrillCopyRefused, err.Error())
		}
		return err
	}
	if p.status.Backup == nil {
		p.status.Backup = &v1alpha1.BackupStatus{}
	}
	b := p.status.Backup
	b.Verifying, b.LastVerified, b.LastVerifiedSuccess = d.Verifying, d.LastVerified, d.LastSuccess
	if v := d.LastVerified; v != nil {
		p.setCondition(v1alpha1.ConditionBackupVerified, v.Result == v1alpha1.DrillPassed, v.Reason, v.Message)
	}
	if d.Ended != nil {
		r.tellDrill(ctx, p, d.Ended)
	}
	if d.Waiting != "" {
		ctrl.LoggerFrom(ctx).V(1).Info("restore drill under way", "backup", d.Verifying.Backup, "waiting", d.Waiting)
	}
	p.requeueAfter(d.Requeue)
	return nil
}

// claimDrill records a drill that starts in this pass in the Day-2
// registry, deciding in the same step; one that may not start waits for
// the next pass. A pass that starts none releases what an earlier one
// recorded and did not write.
func (r *OpenBaoClusterReconciler) claimDrill(ctx context.Context, p *pass, d backup.DrillDecision) (backup.DrillDecision, error) {
	key := day2.ClusterOf(p.cluster)
	if d.Verifying == nil {
		r.Operations.ReleaseKind(key, day2.Drill)
		return d, nil
	}
	if b := p.status.Backup; b != nil && b.Verifying != nil {
		return d, nil // under way already
	}
	ops, err := observeOperations(ctx, r.Client, p.cluster, p.status)
	if err != nil {
		return d, err
	}
	if v := r.Operations.Start(key, day2.DrillOp(d.Verifying.Backup), ops); !v.OK() {
		ctrl.LoggerFrom(ctx).V(1).Info("restore drill waits", "backup", d.Verifying.Backup, "reason", v.Reason, "message", v.Message)
		d.Verifying, d.CreateCopy, d.Requeue = nil, nil, backup.DrillPoll
	}
	return d, nil
}

func (r *OpenBaoClusterReconciler) observeDrill(ctx context.Context, p *pass) (backup.DrillObserved, error) {
	view := *p.cluster
	view.Status = *p.status
	o := backup.DrillObserved{Now: p.now, Cluster: &view}
	name := ""
	if b := p.status.Backup; b != nil && b.Verifying != nil {
		name = b.Verifying.Backup
	} else if b != nil {
		name = b.LastBackupName
	}
	if name != "" {
		bk := &v1alpha1.OpenBaoBackup{}
		if err := r.getOptional(ctx, types.NamespacedName{Namespace: view.Namespace, Name: name}, bk); err != nil {
			return o, err
		} else if bk.Name != "" {
			o.Backup = bk
		}
	}
	cp := &v1alpha1.OpenBaoCluster{}
	if err := r.getOptional(ctx, types.NamespacedName{Namespace: view.Namespace, Name: view.DrillCopyName()}, cp); err != nil {
		return o, err
	} else if cp.Name != "" {
		o.Copy = cp
	}
	if fb := copyRestored(o.Copy, &view); fb && o.Backup != nil && p.status.Backup.Verifying != nil {
		o.CanaryRead = true
		o.Canary, o.CanaryErr = r.readDrillCanary(ctx, &view, o.Copy, p.status.Backup.Verifying.Key)
	}
	return o, nil
}

// copyRestored says cp is c's drill copy and holds the snapshot.
func copyRestored(cp, c *v1alpha1.OpenBaoCluster) bool {
	return cp != nil && cp.Labels[v1alpha1.LabelDrillOf] == c.Name && cp.Status.FromBackup != nil && cp.Status.FromBackup.CompletedAt != nil
}

// getOptional reads obj; one that does not exist leaves it empty.
func (r *OpenBaoClusterReconciler) getOptional(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	if err := r.Client.Get(ctx, key, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read %s: %w", key.Name, err)
	}
	return nil
}

// readDrillCanary reads the canary from the copy as the source's drill
// role, with the audience the snapshot's drill role holds and the
// source's no longer does (identity.DrillLogin): a token the copy could
// replay logs in to nothing on the source.
func (r *OpenBaoClusterReconciler) readDrillCanary(ctx context.Context, c, cp *v1alpha1.OpenBaoCluster, key string) (map[string]any, error) {
	ca, err := r.readSecret(ctx, r.APIReader, cp.Namespace, cp.TrustedCASecretName())
	if err != nil || ca == nil {
		return nil, fmt.Errorf("the copy's CA Secret %s: missing or unreadable (%v)", cp.TrustedCASecretName(), err)
	}
	data, err := r.readCanary(ctx, cp, servedTLS{caPEM: ca.Data[pki.CAKey], ready: true}, c.Namespace, identity.DrillLogin(c, key))
	var login *canaryLoginError
	if errors.As(err, &login) {
		return nil, fmt.Errorf("%w (a snapshot whose backup did not set the drill role's audience, from before identity "+
			"revision %d, has none)", err, identity.PerRoleRevision)
	}
	return data, err
}

func (r *OpenBaoClusterReconciler) carryOutDrill(ctx context.Context, c *v1alpha1.OpenBaoCluster, d backup.DrillDecision) error {
	if cp := d.CreateCopy; cp != nil {
		err := r.Client.Create(ctx, cp)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the drill copy %s: %w", cp.Name, err)
		}
		if err == nil {
			ctrl.LoggerFrom(ctx).Info("restore drill started", "backup", d.Verifying.Backup, "copy", cp.Name)
		}
	}
	if d.DeleteCopy {
		cp := &v1alpha1.OpenBaoCluster{}
		cp.Name, cp.Namespace = c.DrillCopyName(), c.Namespace
		if err := r.Client.Delete(ctx, cp); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete the drill copy %s: %w", cp.Name, err)
		}
	}
	return nil
}

// tellDrill counts, logs (an audit line) and announces a drill that ended.
func (r *OpenBaoClusterReconciler) tellDrill(ctx context.Context, p *pass, v *v1alpha1.BackupVerification) {
	ns, name := p.cluster.Namespace, p.cluster.Name
	drillsTotal.WithLabelValues(ns, name, string(v.Result)).Inc()
	if v.StartTime != nil && v.CompletionTime != nil {
		drillLastDuration.WithLabelValues(ns, name).Set(v.CompletionTime.Sub(v.StartTime.Time).Seconds())
	}
	kind := "Warning"
	if v.Result == v1alpha1.DrillPassed {
		kind = "Normal"
		drillLastSuccess.WithLabelValues(ns, name).Set(float64(v.CompletionTime.Unix()))
	}
	ctrl.LoggerFrom(ctx).Info("restore drill ended", "audit", true, "event_type", "openbao.backup.verify",
		"backup", v.Backup, "key", v.Key, "copy", v.Copy, "result", v.Result, "reason", v.Reason, "message", v.Message)
	p.record(kind, "BackupVerification"+string(v.Result), "VerifyBackup", v.Message)
}
