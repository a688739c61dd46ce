package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/bootstrap"
)

// resetPending says whether the wipe that status.bootstrapReset records is
// unfinished: the pod or the volume claim of the lost initialization still
// exists. Read exactly: a cached pod or claim could be one already gone,
// and a wipe taken for finished would let the old data be adopted.
func (r *OpenBaoClusterReconciler) resetPending(ctx context.Context, c *v1alpha1.OpenBaoCluster, reset *v1alpha1.BootstrapReset) (bool, error) {
	claimLeft, err := r.exists(ctx, &corev1.PersistentVolumeClaim{}, c.Namespace, c.DataVolumeName(0), reset.ClaimUID)
	if err != nil || claimLeft {
		return claimLeft, err
	}
	return r.exists(ctx, &corev1.Pod{}, c.Namespace, c.PodName(0), reset.PodUID)
}

// exists says whether the object of this name exists with this UID.
func (r *OpenBaoClusterReconciler) exists(ctx context.Context, obj client.Object, namespace, name string, uid types.UID) (bool, error) {
	if uid == "" {
		return false, nil
	}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", name, err)
	}
	return obj.GetUID() == uid, nil
}

// resetBootstrap wipes pod-0 after a lost initialization: it records the
// reset first (so that it happens once, and a restarted operator finishes
// it), then deletes the volume claim and the pod of that initialization,
// each only by its recorded UID. The StatefulSet brings up an empty pod-0
// on a new volume, which the next passes initialize.
func (r *OpenBaoClusterReconciler) resetBootstrap(ctx context.Context, p *pass, d bootstrap.Decision) error {
	c := p.cluster
	if p.status.BootstrapReset == nil {
		if err := r.recordReset(ctx, p); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("the root token of sys/init was lost; wiping pod-0 to initialize again, once", "audit", true,
			"event_type", "openbao.bootstrap.reset", "claim", c.DataVolumeName(0), "pod", c.PodName(0))
		p.record("Warning", d.Reason, "ResetBootstrap", d.Message)
	}
	reset := p.status.BootstrapReset
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.DataVolumeName(0)}}
	if err := r.deleteExactly(ctx, claim, reset.ClaimUID); err != nil {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.PodName(0)}}
	if err := r.deleteExactly(ctx, pod, reset.PodUID); err != nil {
		return err
	}
	p.setCondition(v1alpha1.ConditionOpenBaoInitialized, false, d.Reason, d.Message)
	p.requeueAfter(d.RequeueAfter)
	return nil
}

// recordReset writes status.bootstrapReset before anything is deleted,
// with the UIDs of what the lost initialization lives on, and clears
// status.initializationStarted for the next sys/init.
func (r *OpenBaoClusterReconciler) recordReset(ctx context.Context, p *pass) error {
	c := p.cluster
	reset := &v1alpha1.BootstrapReset{Started: metav1.NewTime(p.now), LostInitializationStarted: p.status.InitializationStarted}
	claim := &corev1.PersistentVolumeClaim{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.DataVolumeName(0)}, claim)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("read volume claim %s: %w", c.DataVolumeName(0), err)
	}
	reset.ClaimUID = claim.UID
	if pod0, ok := p.servers.Get(c.PodName(0)); ok {
		reset.PodUID = pod0.UID
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Status.BootstrapReset, c.Status.InitializationStarted = reset, nil
	if err := r.Client.Status().Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("record the bootstrap reset: %w", err)
	}
	p.status.BootstrapReset, p.status.InitializationStarted = reset, nil
	return nil
}

// deleteExactly deletes obj only if it is still the one with this UID: a
// pod-0 or volume the StatefulSet made after the wipe is never touched.
func (r *OpenBaoClusterReconciler) deleteExactly(ctx context.Context, obj client.Object, uid types.UID) error {
	if uid == "" {
		return nil
	}
	err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", obj.GetName(), err)
	}
	return nil
}
