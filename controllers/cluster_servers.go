package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/podstate"
)

// observeServers fills readyReplicas, activeLeader and currentVersion from
// the StatefulSet and the labels OpenBao's service registration keeps on
// its pods, and owns the Available condition.
func (r *OpenBaoClusterReconciler) observeServers(ctx context.Context, p *pass) error {
	c, status := p.cluster, p.status
	sts := &appsv1.StatefulSet{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.StatefulSetName()}, sts)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read StatefulSet %s: %w", c.StatefulSetName(), err)
	}
	status.ReadyReplicas = sts.Status.ReadyReplicas
	status.ActiveLeader = p.servers.Leader()
	status.CurrentVersion = p.servers.CommonVersion(c.Spec.Replicas)
	if status.ActiveLeader != "" {
		p.setCondition(v1alpha1.ConditionAvailable, true, v1alpha1.ReasonActiveServerReady,
			fmt.Sprintf("%s is the active server and ready", status.ActiveLeader))
	} else {
		p.setCondition(v1alpha1.ConditionAvailable, false, v1alpha1.ReasonNoActiveServer,
			"no server is active and ready: clients of the Service have no endpoint")
	}
	return nil
}

// sealedServers counts the pods whose service-registration label says
// their server is sealed.
func sealedServers(p *pass) int {
	n := 0
	for _, s := range p.servers {
		if sealed, known := s.LabelState(podstate.LabelSealed); known && sealed {
			n++
		}
	}
	return n
}
