package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/day2"
)

// +kubebuilder:rbac:groups=openbao.org,resources=openbaobackups,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=openbao.org,resources=openbaobackups/status,verbs=get;update;patch
// Jobs block their OpenBaoBackup's deletion until they are gone, which needs:
// +kubebuilder:rbac:groups=openbao.org,resources=openbaobackups/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete

// reconcileBackup owns BackingUp and status.backup. It folds the
// cluster's finished OpenBaoBackups into the status, takes the schedule's
// slot when one is due (an OpenBaoBackup named after the slot, which the
// OpenBaoBackup reconciler runs), and trims the schedule's history.
func (r *OpenBaoClusterReconciler) reconcileBackup(ctx context.Context, p *pass) error {
	c := p.cluster
	backups, err := r.clusterBackups(ctx, c)
	if err != nil {
		return err
	}
	restores, err := listClusterRestores(ctx, r.Client, c.Namespace, c.Name)
	if err != nil {
		return err
	}
	ops := day2.Observe(c, p.status, backups, restores)
	status := backup.Fold(derefBackupStatus(p.status.Backup), backups)
	if c.Spec.Backup == nil || c.StandingBy() { // a standby takes no backups until promoted
		status.NextScheduledBackup = nil
		setBackingUp(p, ops.Unfinished(day2.Backup))
	} else if err := r.schedule(ctx, p, &status, ops); err != nil {
		return err
	}
	recordBackupGauges(c, &status)
	if status != (v1alpha1.BackupStatus{}) || p.status.Backup != nil {
		p.status.Backup = &status
	}
	if c.Spec.Backup != nil {
		return r.trimHistory(ctx, c, backups)
	}
	return nil
}

// schedule ticks the schedule, takes a due slot, and sets BackingUp.
func (r *OpenBaoClusterReconciler) schedule(ctx context.Context, p *pass, status *v1alpha1.BackupStatus, ops day2.Observation) error {
	running := ops.Unfinished(day2.Backup)
	expr := p.cluster.Spec.Backup.Schedule
	status.NextScheduledBackup = nil
	if expr == "" {
		setBackingUp(p, running)
		return nil
	}
	sched, err := backup.ParseSchedule(expr)
	if err != nil {
		// The API server refuses what the grammar refuses; what is left is a
		// schedule that never fires.
		p.setCondition(v1alpha1.ConditionBackingUp, len(running) > 0, v1alpha1.ReasonInvalidSchedule, err.Error())
		return nil
	}
	var recorded *time.Time
	if n := p.status.Backup; n != nil && n.NextScheduledBackup != nil {
		recorded = &n.NextScheduledBackup.Time
	}
	tick := sched.Tick(recorded, p.now)
	next := metav1.NewTime(tick.Next)
	status.NextScheduledBackup = &next
	p.requeueAfter(tick.Next.Sub(p.now))
	if tick.Due {
		created, err := r.takeSlot(ctx, p, tick, ops)
		if err != nil {
			return err
		}
		if created != "" {
			running = append(running, created)
		}
	}
	setBackingUp(p, running)
	return nil
}

// takeSlot creates the slot's OpenBaoBackup if the preflight passes; a
// skipped slot says why in an event. The name is the slot's, so a slot
// whose record was lost (the status write failed) is not taken twice.
func (r *OpenBaoClusterReconciler) takeSlot(ctx context.Context, p *pass, tick backup.Tick, ops day2.Observation) (string, error) {
	c := p.cluster
	status := *p.status
	status.Phase = phase(c, p.status, p.restoring)
	check := backup.Preflight(backup.PreflightInput{Cluster: c, Status: &status, Lock: slotLock(r.Operations, c, tick, ops)})
	slot := tick.Slot.UTC().Format(time.RFC3339)
	if !check.OK {
		p.record("Warning", "BackupSkipped", "ScheduleBackup",
			fmt.Sprintf("the backup of the slot at %s is skipped (%s): %s", slot, check.Reason, check.Message))
		return "", nil
	}
	b := &v1alpha1.OpenBaoBackup{
		ObjectMeta: metav1.ObjectMeta{
			Name: c.ScheduledBackupName(tick.Slot), Namespace: c.Namespace,
			Labels: map[string]string{
				v1alpha1.LabelCluster: c.Name, v1alpha1.LabelBackupTrigger: v1alpha1.BackupTriggerSchedule,
				v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
			},
		},
		Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: c.Name},
	}
	err := r.Client.Create(ctx, b)
	if apierrors.IsAlreadyExists(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("create OpenBaoBackup %s: %w", b.Name, err)
	}
	note := fmt.Sprintf("OpenBaoBackup %s takes the backup of the slot at %s", b.Name, slot)
	if tick.Missed > 0 {
		note += fmt.Sprintf("; it also stands for %d earlier slots that passed while the operator was not running", tick.Missed)
	}
	log.FromContext(ctx).Info("scheduled backup created", "backup", b.Name, "slot", slot, "missed", tick.Missed)
	p.record("Normal", "BackupScheduled", "ScheduleBackup", note)
	return b.Name, nil
}

// slotLock is day2's verdict on the slot's backup; a slot is also
// skipped while an earlier backup is queued, not only running, so that
// slots do not pile up behind one that waits.
func slotLock(reg *day2.Registry, c *v1alpha1.OpenBaoCluster, tick backup.Tick, ops day2.Observation) day2.Verdict {
	want := day2.Op{Ref: day2.Ref{Kind: day2.Backup, Name: c.ScheduledBackupName(tick.Slot)}}
	v := reg.Check(day2.ClusterOf(c), want, ops)
	if v.OK() {
		v = day2.Decide(want, ops.Queued)
	}
	if !v.OK() {
		v.Message = v.In.String() + " of this cluster has not finished"
	}
	return v
}

// setBackingUp owns BackingUp: True while a backup of the cluster is under
// way.
func setBackingUp(p *pass, running []string) {
	switch {
	case len(running) > 0:
		p.setCondition(v1alpha1.ConditionBackingUp, true, v1alpha1.ReasonBackupRunning,
			"backup "+strings.Join(running, ", ")+" is under way")
	case p.cluster.Spec.Backup == nil:
		p.setCondition(v1alpha1.ConditionBackingUp, false, v1alpha1.ReasonBackupsDisabled, "spec.backup is not set")
	default:
		p.setCondition(v1alpha1.ConditionBackingUp, false, v1alpha1.ReasonNoBackupRunning, "no backup is under way")
	}
}

// clusterBackups lists the OpenBaoBackups that name the cluster.
func (r *OpenBaoClusterReconciler) clusterBackups(ctx context.Context, c *v1alpha1.OpenBaoCluster) ([]v1alpha1.OpenBaoBackup, error) {
	return listClusterBackups(ctx, r.Client, c.Namespace, c.Name)
}

func listClusterBackups(ctx context.Context, reader client.Reader, namespace, cluster string) ([]v1alpha1.OpenBaoBackup, error) {
	list := &v1alpha1.OpenBaoBackupList{}
	if err := reader.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list OpenBaoBackups: %w", err)
	}
	var out []v1alpha1.OpenBaoBackup
	for _, b := range list.Items {
		if b.Spec.ClusterName == cluster {
			out = append(out, b)
		}
	}
	return out, nil
}

// trimHistory deletes the scheduled backups that finished beyond the
// history limit, oldest first; their Jobs go with them. The snapshots stay:
// retention decides about those.
func (r *OpenBaoClusterReconciler) trimHistory(ctx context.Context, c *v1alpha1.OpenBaoCluster, backups []v1alpha1.OpenBaoBackup) error {
	limit := 10
	if l := c.Spec.Backup.HistoryLimit; l != nil {
		limit = int(*l)
	}
	var done []v1alpha1.OpenBaoBackup
	for _, b := range backups {
		if b.Labels[v1alpha1.LabelBackupTrigger] == v1alpha1.BackupTriggerSchedule && b.Status.Phase.Done() && b.DeletionTimestamp.IsZero() {
			done = append(done, b)
		}
	}
	sort.Slice(done, func(i, j int) bool { return done[i].Status.CompletionTime.After(done[j].Status.CompletionTime.Time) })
	for i := limit; i < len(done); i++ {
		b := &done[i]
		err := r.Client.Delete(ctx, b, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &b.UID})
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete OpenBaoBackup %s beyond the history limit: %w", b.Name, err)
		}
	}
	return nil
}

func derefBackupStatus(s *v1alpha1.BackupStatus) v1alpha1.BackupStatus {
	if s == nil {
		return v1alpha1.BackupStatus{}
	}
	return *s.DeepCopy()
}

// recordBackupGauges publishes what the status says, so the gauges are
// right again after an operator restart.
func recordBackupGauges(c *v1alpha1.OpenBaoCluster, s *v1alpha1.BackupStatus) {
	ns, name := c.Namespace, c.Name
	backupConsecutiveFailures.WithLabelValues(ns, name).Set(float64(s.ConsecutiveFailures))
	if s.LastBackupTime != nil {
		backupLastSuccess.WithLabelValues(ns, name).Set(float64(s.LastBackupTime.Unix()))
		backupLastSize.WithLabelValues(ns, name).Set(float64(s.LastBackupSize))
	}
}

// byClusterName maps an OpenBaoBackup or OpenBaoRestore to the cluster it
// names.
func byClusterName(_ context.Context, obj client.Object) []reconcile.Request {
	var cluster string
	switch o := obj.(type) {
	case *v1alpha1.OpenBaoBackup:
		cluster = o.Spec.ClusterName
	case *v1alpha1.OpenBaoRestore:
		cluster = o.Spec.ClusterName
	}
	if cluster == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: cluster}}}
}
