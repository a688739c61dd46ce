package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/podstate"
)

// The StatefulSet owns the pods, yet their state drives the bootstrap:
// OpenBao labels its own pod the moment it starts, about a second before
// the kubelet reports the container running and long before the
// StatefulSet's status moves. Watching the pods turns the bootstrap's waits
// into reactions; the poll interval remains as a fallback.

// byClusterLabel maps an object to the cluster named by its label. The
// pods of backup Jobs carry it too, but they are their OpenBaoBackup's
// concern, not the cluster's.
func byClusterLabel(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[v1alpha1.LabelCluster]
	if name == "" || obj.GetLabels()[v1alpha1.LabelComponent] == v1alpha1.ComponentBackup {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

// podStateChanged passes creations, deletions and the updates the
// reconciler acts on: every update of what is not a pod (a Secret), and of
// a pod only a change of what the reconciler reads. It drops the rest,
// among them the operator's own certificate-hash annotations, which would
// otherwise start a pass each.
var podStateChanged = predicate.Funcs{
	UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*corev1.Pod)
		after, ok2 := e.ObjectNew.(*corev1.Pod)
		if !ok1 || !ok2 {
			return true
		}
		return signalOf(before) != signalOf(after)
	},
	GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
}

// podSignal is what the reconciler reads of a pod: the service-registration
// labels, readiness, and the OpenBao container's state.
type podSignal struct {
	initialized, sealed, active, version string
	ready, running, terminated           bool
	waiting                              string
	restarts                             int32
}

func signalOf(p *corev1.Pod) podSignal {
	s := podstate.FromKube(p)
	return podSignal{
		initialized: p.Labels[podstate.LabelInitialized], sealed: p.Labels[podstate.LabelSealed],
		active: p.Labels[podstate.LabelActive], version: s.Version(),
		ready: s.Ready, running: s.Running, terminated: s.Terminated,
		waiting: s.WaitingReason, restarts: s.RestartCount,
	}
}
