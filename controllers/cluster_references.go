package controllers

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	decide "github.com/openbao/operator/internal/admission"
)

// managedReferences applies the rule "operator-managed Secrets are never
// credentials" (admission.ManagedSecretRefs, the webhook's rule) to the
// Secrets c's spec names. The webhook may have been away when c was
// stored, so every controller that uses c's references asks this first.
// secrets reads Secret metadata (an uncached reader: the user's Secrets
// carry no label of the cache); clusters reads the source of a drill copy.
func managedReferences(ctx context.Context, secrets, clusters client.Reader, c *v1alpha1.OpenBaoCluster) (field.ErrorList, error) {
	refs := decide.ClusterReferences(c).Objects
	o, err := observeManaged(ctx, secrets, clusters, c, refs)
	if err != nil {
		return nil, err
	}
	return decide.ManagedSecretRefs(refs, o), nil
}

// observeManaged reads what the rule needs about refs of c: which of the
// Secrets carry the operator's label (none are read when secrets is nil),
// and, for a drill copy, its source.
func observeManaged(ctx context.Context, secrets, clusters client.Reader, c *v1alpha1.OpenBaoCluster, refs []decide.Ref) (decide.ManagedObserved, error) {
	o := decide.ManagedObserved{Labelled: map[string]bool{}}
	for _, r := range refs {
		if r.Kind != decide.KindSecret || secrets == nil {
			continue
		}
		labelled, err := managedLabelled(ctx, secrets, c.Namespace, r.Name)
		if err != nil {
			return o, err
		}
		o.Labelled[r.Name] = labelled
	}
	if name := c.Labels[v1alpha1.LabelDrillOf]; name != "" {
		source := &v1alpha1.OpenBaoCluster{}
		err := clusters.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, source)
		switch {
		case err == nil:
			o.Exempt = decide.DrillCopyKey(c, source)
		case !apierrors.IsNotFound(err):
			return o, fmt.Errorf("read OpenBaoCluster %s, the source of drill copy %s: %w", name, c.Name, err)
		}
	}
	return o, nil
}

// managedLabelled says whether Secret name carries the operator's
// managed-by label; one that does not exist, or that this operator may not
// read, does not (the operator cannot use it either).
func managedLabelled(ctx context.Context, reader client.Reader, namespace, name string) (bool, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read the labels of Secret %s: %w", name, err)
	}
	return obj.Labels[v1alpha1.LabelManagedBy] == v1alpha1.ManagedByValue, nil
}

// refusalMessage is the refusals of the rule as one message.
func refusalMessage(errs field.ErrorList) string {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return strings.Join(msgs, "; ")
}

// reconcileReferences holds the whole pass of a cluster whose spec names
// an operator-managed Secret: Degraded (ManagedSecretReferenced, naming
// the field), and no later step runs, so nothing reads, copies or mounts
// that Secret, and nothing else is applied until the spec is fixed.
func (r *OpenBaoClusterReconciler) reconcileReferences(ctx context.Context, p *pass) error {
	key, gen := client.ObjectKeyFromObject(p.cluster), p.cluster.Generation
	var clean bool
	r.memory.with(key, p.cluster.UID, func(m *clusterMemory) { clean = m.referencesClean && m.referencesGeneration == gen })
	if clean {
		return nil
	}
	errs, err := managedReferences(ctx, r.APIReader, r.Client, p.cluster)
	if err != nil {
		return err
	}
	if len(errs) == 0 {
		r.memory.with(key, p.cluster.UID, func(m *clusterMemory) { m.referencesClean, m.referencesGeneration = true, gen })
		return nil
	}
	msg := refusalMessage(errs) + "; nothing is applied for this cluster until the spec is fixed"
	p.degrade(decide.ReasonManagedSecretReferenced, msg)
	ctrl.LoggerFrom(ctx).Info("spec names an operator-managed Secret; holding the cluster", "audit", true,
		"event_type", "openbao.cluster.managed_secret_referenced", "fields", fieldPaths(errs))
	if was := meta.FindStatusCondition(p.cluster.Status.Conditions, v1alpha1.ConditionDegraded); was == nil ||
		was.Reason != decide.ReasonManagedSecretReferenced {
		p.record(corev1.EventTypeWarning, decide.ReasonManagedSecretReferenced, "Reconcile", msg)
	}
	return errStop
}

func fieldPaths(errs field.ErrorList) []string {
	paths := make([]string, 0, len(errs))
	for _, e := range errs {
		paths = append(paths, e.Field)
	}
	return paths
}
