package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/membership"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/internal/upgrade"
)

// reconcileReadReplicas decides what the chart renders of the read
// replicas (spec.readReplicas) once the cluster is initialized: nothing
// before, since a non-voter joins a cluster that exists; a scale-up at
// once; a scale-down one non-voter at a time, each removed from the Raft
// configuration before its pod goes (membership.DecideRead).
func (r *OpenBaoClusterReconciler) reconcileReadReplicas(ctx context.Context, p *pass) error {
	c := p.cluster
	p.readDecided = true
	if !p.status.Initialized {
		return nil
	}
	o := membership.ReadObserved{Name: c.ReadStatefulSetName()}
	if spec := c.Spec.ReadReplicas; spec != nil {
		o.Wanted, o.Spec = true, spec.Replicas
	}
	sts, err := r.readStatefulSet(ctx, c)
	if err != nil {
		return err
	}
	if sts != nil && sts.Spec.Replicas != nil {
		o.Current = *sts.Spec.Replicas
	}
	if o.Current > 0 && (!o.Wanted || o.Current > o.Spec) {
		r.observeReadMembers(ctx, p, &o)
	}
	d := membership.DecideRead(o)
	if d.RemovePeer != "" {
		if err := r.removePeer(ctx, p, d.RemovePeer); err != nil {
			d.Replicas, d.Message, d.Blocked = o.Current, err.Error(), true
		}
	}
	p.requeueAfter(d.Requeue)
	if d.Blocked {
		p.degrade(v1alpha1.ReasonScaleDownBlocked, d.Message)
	}
	if d.Render {
		p.readReplicas = &d.Replicas
	}
	return nil
}

// observeReadMembers fills the Raft membership a read scale-down needs.
func (r *OpenBaoClusterReconciler) observeReadMembers(ctx context.Context, p *pass, o *membership.ReadObserved) {
	v := r.view(ctx, p)
	if v.raft == nil {
		o.Problem = v.problem
		return
	}
	o.Servers = map[string]membership.Server{}
	for id, s := range v.raft.Servers {
		o.Servers[id] = membership.Server{Voter: s.Voter, Healthy: s.Healthy}
	}
}

func (r *OpenBaoClusterReconciler) readStatefulSet(ctx context.Context, c *v1alpha1.OpenBaoCluster) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.ReadStatefulSetName()}, sts)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read StatefulSet %s: %w", c.ReadStatefulSetName(), err)
	}
	return sts, nil
}

// observeReadRollout is what a voters' rollout waits for of the read
// replicas (upgrade.ReadBehind): their StatefulSet's progress and each
// pod's readiness and seal label; nil without a read StatefulSet.
func (r *OpenBaoClusterReconciler) observeReadRollout(ctx context.Context, c *v1alpha1.OpenBaoCluster) (*upgrade.ReadReplicas, error) {
	sts, err := r.readStatefulSet(ctx, c)
	if err != nil || sts == nil || sts.Spec.Replicas == nil {
		return nil, err
	}
	st := sts.Status
	out := &upgrade.ReadReplicas{Replicas: *sts.Spec.Replicas, Observed: st.ObservedGeneration >= sts.Generation,
		Rolled: st.CurrentRevision == st.UpdateRevision && st.UpdatedReplicas == *sts.Spec.Replicas,
		Pods:   map[string]upgrade.ReadPod{}}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(c.ReadPodSelectorLabels())); err != nil {
		return nil, fmt.Errorf("list the read replicas of %s: %w", c.Name, err)
	}
	for i := range pods.Items {
		pod := podstate.FromKube(&pods.Items[i])
		sealed, known := pod.LabelState(podstate.LabelSealed)
		out.Pods[pod.Name] = upgrade.ReadPod{Ready: pod.Ready, Unsealed: known && !sealed, Why: whyNotReady(&pods.Items[i], pod)}
	}
	return out, nil
}

// whyNotReady is what Kubernetes says holds a pod: the scheduler's word on
// a pod it cannot place, or the container's waiting reason.
func whyNotReady(k *corev1.Pod, pod podstate.Pod) string {
	if pod.Ready {
		return ""
	}
	for _, c := range k.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Reason + " (" + c.Message + ")"
		}
	}
	return pod.WaitingReason
}
