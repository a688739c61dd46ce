package controllers

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/pki"
	"github.com/openbao/operator/internal/restore"
)

// ObserveServers reads each server's sys/health, what it has applied of
// the leader's committed index (openbao.RaftLagTo), and the leader's
// autopilot verdict, as rollouts do: OpenBao's view of a pass made for
// this read.
//
// While a server installs a snapshot it answers nothing, and each read
// waits out viewReadTimeout: when no server answered sys/health, the Raft
// reads, which would wait as long again, are not made, and the restore
// looks again (restore.VerifyPollEarly) instead of a pass later.
func (r *OpenBaoClusterReconciler) ObserveServers(ctx context.Context, c *v1alpha1.OpenBaoCluster) (*restore.Servers, error) {
	p, err := r.trustedPass(ctx, c)
	if err != nil {
		return nil, err
	}
	v := r.serverHealth(ctx, p)
	switch {
	case v.problem != "":
	case len(v.health) == 0:
		v.problem = "no server answered sys/health"
	default:
		v.raft, v.problem = r.readRaft(ctx, p, v)
		v.measureLag(ctx)
	}
	return serversOf(c, p, v), nil
}

// observe reads OpenBao's view of c in a pass made for this read only (no
// step runs, nothing is written): the pods from the cache, the CA the
// servers are verified against from the API server.
func (r *OpenBaoClusterReconciler) observe(ctx context.Context, c *v1alpha1.OpenBaoCluster) (*pass, *openbaoView, error) {
	p, err := r.trustedPass(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	return p, r.view(ctx, p), nil
}

// trustedPass is a pass made for a read only, with the CA the servers are
// verified against.
func (r *OpenBaoClusterReconciler) trustedPass(ctx context.Context, c *v1alpha1.OpenBaoCluster) (*pass, error) {
	p, err := r.newPass(ctx, c)
	if err != nil {
		return nil, err
	}
	ca, err := r.readSecret(ctx, r.APIReader, c.Namespace, c.TrustedCASecretName())
	if err != nil {
		return nil, err
	}
	if ca == nil {
		return nil, fmt.Errorf("secret %s with the cluster's CA does not exist", c.TrustedCASecretName())
	}
	p.tls = servedTLS{caPEM: ca.Data[pki.CAKey], ready: true}
	return p, nil
}

func serversOf(c *v1alpha1.OpenBaoCluster, p *pass, v *openbaoView) *restore.Servers {
	out := &restore.Servers{Replicas: int(c.Spec.Replicas), Problem: v.problem}
	if v.raft != nil {
		out.AutopilotHealthy = v.raft.Healthy
	}
	for _, pod := range p.servers {
		s := restore.Server{Pod: pod.Name, Ready: pod.Ready}
		if h, ok := v.health[pod.Name]; ok {
			s.Answered, s.Initialized, s.Sealed = true, h.Initialized, h.Sealed
		}
		if v.raft != nil {
			if rs, ok := v.raft.Servers[pod.Name]; ok {
				s.Lag, s.LagKnown = rs.Lag, rs.LagKnown
			}
		}
		out.Servers = append(out.Servers, s)
	}
	return out
}

// tell counts, logs and announces a restore that just ended (the status
// write succeeded), and publishes the phase of one under way.
func (r *OpenBaoRestoreReconciler) tell(ctx context.Context, rs *v1alpha1.OpenBaoRestore, o restore.Observed) {
	s := rs.Status
	ns, cluster := rs.Namespace, rs.Spec.ClusterName
	restorePhase.WithLabelValues(ns, cluster).Set(phaseValue(s.Phase))
	if !s.Phase.Done() { // Reconcile returns before this for a restore that had ended
		return
	}
	restoresTotal.WithLabelValues(ns, cluster, string(s.Phase)).Inc()
	if s.StartTime != nil && s.CompletionTime != nil {
		restoreDuration.WithLabelValues(ns, cluster).Set(s.CompletionTime.Sub(s.StartTime.Time).Seconds())
	}
	log.FromContext(ctx).Info("restore finished", "audit", true, "event_type", "openbao.restore",
		"restore", rs.Name, "phase", s.Phase, "reason", s.Reason, "key", s.Key, "sha256", s.SHA256, "size", s.Size,
		"raftIndex", s.RaftIndex, "force", rs.Spec.Force, "restartedPods", s.RestartedPods, "message", s.Message)
	kind := corev1.EventTypeNormal
	if s.Phase == v1alpha1.RestoreFailed {
		kind = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(rs, nil, kind, "Restore"+string(s.Phase), "Restore", "%s: %s", s.Reason, s.Message)
	if o.Cluster != nil {
		r.Recorder.Eventf(o.Cluster, rs, kind, "Restore"+string(s.Phase), "Restore", "OpenBaoRestore %s: %s", rs.Name, s.Reason)
	}
}

// tellIgnored announces, once (in the pass that read the Job's report and
// moved the restore to Verifying), what latest ignored as unproven.
func (r *OpenBaoRestoreReconciler) tellIgnored(rs *v1alpha1.OpenBaoRestore, o restore.Observed, wasVerifying bool) {
	j := o.Job
	if j == nil || !j.ReportRead || wasVerifying || rs.Status.Step != v1alpha1.RestoreStepVerifying {
		return
	}
	if msg := j.Report.Unproven.Message(); msg != "" {
		r.Recorder.Eventf(rs, nil, corev1.EventTypeWarning, "UnprovenSnapshotsIgnored", "SelectLatest", "choosing latest, the executor %s", msg)
	}
}

func phaseValue(p v1alpha1.RestorePhase) float64 {
	switch p {
	case v1alpha1.RestoreRunning:
		return 1
	case v1alpha1.RestoreSucceeded:
		return 2
	case v1alpha1.RestoreFailed:
		return 3
	}
	return 0
}

// listClusterRestores lists the OpenBaoRestores that name the cluster.
func listClusterRestores(ctx context.Context, reader client.Reader, namespace, cluster string) ([]v1alpha1.OpenBaoRestore, error) {
	list := &v1alpha1.OpenBaoRestoreList{}
	if err := reader.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list OpenBaoRestores: %w", err)
	}
	var out []v1alpha1.OpenBaoRestore
	for _, r := range list.Items {
		if r.Spec.ClusterName == cluster {
			out = append(out, r)
		}
	}
	return out, nil
}

// SetupWithManager watches OpenBaoRestores and the Jobs they own.
func (r *OpenBaoRestoreReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	// One at a time: restores of one cluster must not start side by side.
	return ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.OpenBaoRestore{}).Owns(&batchv1.Job{}).
		Watches(&v1alpha1.OpenBaoBackup{}, handler.EnqueueRequestsFromMapFunc(restoreOfPreRestoreBackup)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(restoreOfExecutorPod), builder.WithPredicates(executorEnded)).
		Named("openbaorestore").WithOptions(controllerOptions(1)).Complete(r)
}

// restoreOfExecutorPod maps the pod of a restore Job to its restore.
func restoreOfExecutorPod(_ context.Context, obj client.Object) []reconcile.Request {
	labels := obj.GetLabels()
	if labels[v1alpha1.LabelComponent] != v1alpha1.ComponentBackup || labels[v1alpha1.LabelRestore] == "" || labels[batchv1.JobNameLabel] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: labels[v1alpha1.LabelRestore]}}}
}

// executorEnded passes the update in which a pod's executor container
// ended: the restore reads its report then, before the Job's own end
// (which its watch on the Job brings).
var executorEnded = predicate.Funcs{
	CreateFunc:  func(ctrlevent.CreateEvent) bool { return false },
	DeleteFunc:  func(ctrlevent.DeleteEvent) bool { return false },
	GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
	UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*corev1.Pod)
		after, ok2 := e.ObjectNew.(*corev1.Pod)
		return ok1 && ok2 && !executorTerminated(before) && executorTerminated(after)
	},
}

func executorTerminated(p *corev1.Pod) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == backup.ExecutorName && s.State.Terminated != nil {
			return true
		}
	}
	return false
}

// restoreOfPreRestoreBackup maps a pre-restore OpenBaoBackup to the
// restore waiting for it.
func restoreOfPreRestoreBackup(_ context.Context, obj client.Object) []reconcile.Request {
	labels := obj.GetLabels()
	if labels[v1alpha1.LabelBackupTrigger] != v1alpha1.BackupTriggerPreRestore || labels[v1alpha1.LabelRestore] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: labels[v1alpha1.LabelRestore]}}}
}
