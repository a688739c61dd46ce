package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/objectstore/open"
	"github.com/openbao/operator/internal/restore"
	"github.com/openbao/operator/internal/standby"
)

// reconcileStandby owns condition Standby: a cluster of spec.standby,
// once formed from its source's newest snapshot (the from-backup step),
// lists the source's proven snapshots every poll interval and posts each
// newer one through an OpenBaoRestore (standby.Decide), whose name and key
// are written to status before it is created; after each install it binds
// the operator's identity in the restored data to this cluster, and once
// the restore succeeded it reads the backup canary from that data.
// Promotion ends it for good.
func (r *OpenBaoClusterReconciler) reconcileStandby(ctx context.Context, p *pass) error {
	c := p.cluster
	if c.Spec.Standby == nil {
		return nil
	}
	o, err := r.observeStandby(ctx, p)
	if err != nil {
		return err
	}
	d := standby.Decide(o)
	if d.ReadCanary {
		o.Canary = r.readStandbyCanary(ctx, p)
		d = standby.Decide(o)
	}
	if refused := standby.Refused(c); len(refused) > 0 && d.Promoted {
		// The webhook refuses this; without it, promotion waits.
		d = standby.Decision{Status: *o.Status.DeepCopy(), Reason: standby.ReasonStandbyMisconfigured, Message: refused.ToAggregate().Error(), Degraded: true}
	}
	if d.BindIdentity {
		if err := r.bindRestoredIdentity(ctx, p); err != nil {
			ctrl.LoggerFrom(ctx).Info("the restored identity is not bound to this cluster yet; retrying", "reason", err.Error())
			d.Message += ": " + err.Error()
			d.Requeue = restore.VerifyPoll
		} else {
			d.Status.IdentityBoundKey = d.Status.RestoreKey
		}
	}
	p.status.Standby = &d.Status
	p.setCondition(v1alpha1.ConditionStandby, d.Value, d.Reason, d.Message)
	if d.Degraded {
		p.degrade(d.Reason, d.Message)
	}
	p.requeueAfter(d.Requeue)
	if d.Post != nil {
		post := *d.Post
		p.afterWrite(func(ctx context.Context) error { return r.postStandbyRestore(ctx, c, post) })
	}
	if o.Listed && !o.NotDue && !o.Promote {
		// Paced from the status write on: a listing whose status was not
		// written is done again on the next pass.
		key, uid, now := client.ObjectKeyFromObject(c), c.UID, p.now
		p.afterWrite(func(context.Context) error {
			r.memory.with(key, uid, func(m *clusterMemory) { m.standbyPolledAt = now })
			return nil
		})
	}
	if len(d.Delete) > 0 {
		names, uids := d.Delete, o.EndedUID
		p.afterWrite(func(ctx context.Context) error { r.cleanUpEndedRestores(ctx, c, names, uids); return nil })
	}
	if d.Promoted {
		ctrl.LoggerFrom(ctx).Info("standby promoted", "audit", true, "event_type", "openbao.standby.promoted", "served", d.Status.ServedKey)
		p.record("Normal", standby.ReasonPromoted, "Promote", d.Message)
	}
	return nil
}

// observeStandby gathers what standby.Decide looks at: the restore last
// posted (read around the cache: one the cache has not seen yet must not
// be taken for one that is gone), the cluster's other restores, and, when
// the poll is due, the source's snapshots.
func (r *OpenBaoClusterReconciler) observeStandby(ctx context.Context, p *pass) (standby.Observed, error) {
	c := p.cluster
	o := standby.Observed{Now: p.now, Promote: c.Spec.Standby.Promote, Status: p.status.Standby, Cluster: c, Prefix: standby.SourcePrefix(c),
		EndedUID: map[string]types.UID{}}
	if fb := p.status.FromBackup; fb != nil && fb.CompletedAt != nil {
		o.Formed, o.FormedKey = true, fb.Key
	}
	if !o.Formed || (o.Status != nil && o.Status.PromotedAt != nil) {
		return o, nil
	}
	name := ""
	if o.Status != nil {
		name = o.Status.Restore
	}
	restores, err := listClusterRestores(ctx, r.APIReader, c.Namespace, c.Name)
	if err != nil {
		return o, err
	}
	for i := range restores {
		rs := &restores[i]
		ours := metav1.IsControlledBy(rs, c) && rs.Spec.Source.Standby
		switch {
		case rs.Name == name && ours && rs.Spec.Source.Key == o.Status.RestoreKey:
			o.Restore = &standby.Restore{Found: true, Phase: rs.Status.Phase, Installed: rs.Status.RestoredAt != nil,
				Key: rs.Status.Key, SHA256: rs.Status.SHA256, Reason: rs.Status.Reason}
			if t := rs.Status.CompletionTime; t != nil {
				o.Restore.EndedAt = t.Time
			}
		case !rs.Status.Phase.Done():
			o.OtherRestoreRunning = true
		case ours && rs.DeletionTimestamp.IsZero():
			o.Ended = append(o.Ended, rs.Name)
			o.EndedUID[rs.Name] = rs.UID
		}
	}
	if name != "" && o.Restore == nil {
		o.Restore = &standby.Restore{}
	}
	if !o.Promote {
		var polledAt time.Time
		r.memory.with(client.ObjectKeyFromObject(c), c.UID, func(m *clusterMemory) { polledAt = m.standbyPolledAt })
		// After a restart, memory is empty: one listing more.
		o.NotDue = o.Status != nil && o.Status.PolledAt != nil && !polledAt.IsZero() && o.Now.Sub(polledAt) < c.Spec.Standby.Poll()
		o.Snapshots, o.Listed, o.Problem = r.listSource(ctx, c, o)
	}
	return o, nil
}

// listSource lists the source's snapshots whose names its provenance key
// proves; until the poll is due it keeps the last listing's newest.
func (r *OpenBaoClusterReconciler) listSource(ctx context.Context, c *v1alpha1.OpenBaoCluster, o standby.Observed) ([]backup.Snapshot, bool, string) {
	if s := o.Status; o.NotDue {
		if s.NewestKey == "" || s.NewestTakenAt == nil {
			return nil, true, ""
		}
		return []backup.Snapshot{{Key: s.NewestKey, At: s.NewestTakenAt.Time}}, true, ""
	}
	prover, err := r.sourceProver(ctx, c)
	if err != nil {
		return nil, false, err.Error()
	}
	cfg, err := storeConfigOf(ctx, r.APIReader, c.Namespace, c.FromBackup().Target)
	if err != nil {
		return nil, false, err.Error()
	}
	newStore := r.NewStore
	if newStore == nil {
		newStore = open.OperatorStore
	}
	store, err := newStore(ctx, cfg.WithoutAmbientIdentity())
	if err != nil {
		return nil, false, err.Error()
	}
	objects, err := store.List(ctx, o.Prefix)
	if err != nil {
		return nil, false, err.Error()
	}
	keys := make([]string, len(objects))
	for i, obj := range objects {
		keys[i] = obj.Key
	}
	snaps, _ := backup.Proven(prover, o.Prefix, keys)
	return snaps, true, ""
}

// sourceProver proves the names of the source's snapshots with its
// provenance key: Secret <source>-backup-provenance in this namespace,
// written by an operator for the source (a copy, labels and all, when the
// source runs in another Kubernetes cluster).
func (r *OpenBaoClusterReconciler) sourceProver(ctx context.Context, c *v1alpha1.OpenBaoCluster) (backup.Prover, error) {
	fb := c.FromBackup()
	src := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: fb.SourceClusterName(c.Name)}}
	s, err := readUserSecret(ctx, r.APIReader, c.Namespace, src.BackupProvenanceSecretName())
	if err != nil {
		return backup.Prover{}, err
	}
	if !writtenByOperator(s, src) {
		return backup.Prover{}, errForeignProvenanceKey{name: s.Name}
	}
	// The source signed its names as a cluster of its own namespace.
	return backup.NewProver(s.Data[backup.ProvenanceDataKey], fb.SourceNamespaceName(c.Namespace), src.Name), nil
}

// readStandbyCanary reads the canary from this cluster's own data as its
// backup role (the role whose policy reads it; the drill role's audience
// is idle outside a backup), bound to this cluster after each restore.
func (r *OpenBaoClusterReconciler) readStandbyCanary(ctx context.Context, p *pass) *standby.CanaryRead {
	view := p.cluster.DeepCopy()
	view.Status = *p.status.DeepCopy()
	data, err := r.readCanary(ctx, view, p.tls, view.Namespace, identity.LoginFor(view, identity.BackupRole, identity.BackupRole))
	if err != nil {
		return &standby.CanaryRead{Err: err.Error()}
	}
	return &standby.CanaryRead{Canary: backup.CanaryOf(data)}
}

// postStandbyRestore creates the OpenBaoRestore recorded in status. One
// that exists already is this decision's (the cache lagged); the restore's
// own Job name guards its single post.
func (r *OpenBaoClusterReconciler) postStandbyRestore(ctx context.Context, c *v1alpha1.OpenBaoCluster, post standby.Post) error {
	rs := &v1alpha1.OpenBaoRestore{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.RestoreKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: post.Name, Namespace: c.Namespace,
			Labels:          map[string]string{v1alpha1.LabelCluster: c.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c, v1alpha1.GroupVersion.WithKind(v1alpha1.Kind))},
		},
		// No pre-restore snapshot: a standby's data is a copy of its source's.
		Spec: v1alpha1.OpenBaoRestoreSpec{ClusterName: c.Name, Source: v1alpha1.RestoreSource{Key: post.Key, Standby: true},
			PreRestoreSnapshot: ptr.To(false)},
	}
	err := r.Client.Create(ctx, rs)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create OpenBaoRestore %s: %w", post.Name, err)
	}
	if err == nil {
		ctrl.LoggerFrom(ctx).Info("standby restores a newer snapshot of its source", "restore", post.Name, "key", post.Key)
		r.Recorder.Eventf(c, nil, "Normal", standby.ReasonFollowing, "CreateRestore", "OpenBaoRestore %s restores %s", post.Name,
			strings.TrimPrefix(post.Key, standby.SourcePrefix(c)))
	}
	return nil
}

// cleanUpEndedRestores deletes the ended restores and says so when it
// cannot. It is housekeeping: a pass that failed on it would back the
// standby's next poll off exponentially (to minutes after a few passes,
// as with a missing right), so it is reported, never returned; each pass
// tries again.
func (r *OpenBaoClusterReconciler) cleanUpEndedRestores(ctx context.Context, c *v1alpha1.OpenBaoCluster, names []string,
	uids map[string]types.UID) {
	if err := r.deleteEndedRestores(ctx, c, names, uids); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "ended standby restores are left; the next pass tries again")
		r.Recorder.Eventf(c, nil, "Warning", standby.ReasonStandbyCleanupFailed, "DeleteRestore",
			"ended restores of the standby are left (it keeps following): %s", err.Error())
	}
}

// +kubebuilder:rbac:groups=openbao.org,resources=openbaorestores,verbs=delete

// deleteEndedRestores deletes earlier standby restores that have ended:
// nothing of them is needed to post each snapshot at most once (status
// records it), and one per snapshot would pile up.
func (r *OpenBaoClusterReconciler) deleteEndedRestores(ctx context.Context, c *v1alpha1.OpenBaoCluster, names []string,
	uids map[string]types.UID) error {
	for _, name := range names {
		rs := &v1alpha1.OpenBaoRestore{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}
		// Only the object seen ended and ours: a restore created since
		// under the same name is another's, and stays.
		uid := uids[name]
		if err := r.Client.Delete(ctx, rs, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete the ended OpenBaoRestore %s: %w", name, err)
		}
	}
	return nil
}
