package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/bootstrap"
)

// versionLabel is written on each pod by OpenBao's service registration.
const versionLabel = "openbao-version"

// observeServers fills readyReplicas, activeLeader and currentVersion from
// the StatefulSet and the labels OpenBao's service registration keeps on
// its pods, and owns the Available condition.
func (r *OpenBaoClusterReconciler) observeServers(ctx context.Context, c *v1alpha1.OpenBaoCluster, status *v1alpha1.OpenBaoClusterStatus) error {
	sts := &appsv1.StatefulSet{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.StatefulSetName()}, sts)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read StatefulSet %s: %w", c.StatefulSetName(), err)
	}
	status.ReadyReplicas = sts.Status.ReadyReplicas
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels{
		"app.kubernetes.io/name": "openbao", "app.kubernetes.io/instance": c.Name,
	}); err != nil {
		return fmt.Errorf("list pods of %s: %w", c.Name, err)
	}
	status.ActiveLeader, status.CurrentVersion = leaderAndVersion(pods.Items, c.Spec.Replicas)
	now := r.Clock.Now()
	if status.ActiveLeader != "" {
		setCondition(status, c, now, v1alpha1.ConditionAvailable, true, v1alpha1.ReasonActiveServerReady,
			fmt.Sprintf("%s is the active server and ready", status.ActiveLeader))
	} else {
		setCondition(status, c, now, v1alpha1.ConditionAvailable, false, v1alpha1.ReasonNoActiveServer,
			"no server is active and ready: clients of the Service have no endpoint")
	}
	return nil
}

// leaderAndVersion returns the ready active server, and the version all
// servers run once every replica is ready and reports the same one.
func leaderAndVersion(pods []corev1.Pod, replicas int32) (leader, version string) {
	versions := map[string]int{}
	ready := 0
	for i := range pods {
		p := &pods[i]
		if !podReady(p) {
			continue
		}
		ready++
		if active, _ := bootstrap.PodFromKube(p).LabelState(bootstrap.LabelActive); active {
			leader = p.Name
		}
		versions[p.Labels[versionLabel]]++
	}
	if ready >= int(replicas) && len(versions) == 1 {
		for v := range versions {
			version = v
		}
	}
	return leader, version
}
