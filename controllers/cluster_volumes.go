package controllers

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/apply"
	"github.com/openbao/operator/internal/volumes"
)

// The storage step grows the servers' claims; the class says whether it may.
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=patch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list

// defaultClassAnnotation marks the class a claim without one gets.
const defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// reconcileVolumes keeps the chart rendering the claim template the
// cluster's StatefulSet has (it cannot change), and grows each server's
// claim to spec.storage.size as volumes.Decide says: only the cluster's
// own claims, never smaller, only when the class allows expansion. A
// file system that grows only when its pod restarts is reported in
// VolumesGrown; the operator does not restart the server for it.
func (r *OpenBaoClusterReconciler) reconcileVolumes(ctx context.Context, p *pass) error {
	c := p.cluster
	sts, err := r.statefulSet(ctx, c)
	if err != nil {
		return err
	}
	if sts == nil || !apply.Ours(c.UID, sts) {
		meta.RemoveStatusCondition(&p.status.Conditions, v1alpha1.ConditionVolumesGrown)
		return nil // nothing to grow yet; a foreign StatefulSet is the apply step's to report
	}
	template, ok := claimTemplateSize(sts)
	want := volumes.SpecSize(c)
	if !ok || template.Cmp(want) == 0 {
		meta.RemoveStatusCondition(&p.status.Conditions, v1alpha1.ConditionVolumesGrown)
		return nil
	}
	p.claimTemplateSize = template.String()
	o, claims, err := r.observeVolumes(ctx, p, want)
	if err != nil {
		return err
	}
	d := volumes.Decide(o)
	for _, name := range d.Grow {
		if err := r.growClaim(ctx, claims[name], want); err != nil {
			return err
		}
		p.record("Normal", "VolumeGrown", "Resize", fmt.Sprintf("volume claim %s asks for %s", name, want.String()))
	}
	setVolumesGrown(p, d, want)
	return nil
}

// observeVolumes lists the claims carrying the cluster's pod selector
// labels, and its read replicas' (from the API server: claims are not
// cached), and reads their class.
func (r *OpenBaoClusterReconciler) observeVolumes(ctx context.Context, p *pass, want resource.Quantity) (volumes.Observed, map[string]*corev1.PersistentVolumeClaim, error) {
	c := p.cluster
	list := &corev1.PersistentVolumeClaimList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels(c.PodSelectorLabels())); err != nil {
		return volumes.Observed{}, nil, fmt.Errorf("list the volumes of %s: %w", c.Name, err)
	}
	class, err := storageClassOf(ctx, r.APIReader, c.Spec.Storage.StorageClassName)
	if err != nil {
		return volumes.Observed{}, nil, err
	}
	o := volumes.Observed{Want: want, Class: class, StatefulSet: c.StatefulSetName(),
		ClusterCreated: c.CreationTimestamp.Time, Initialized: p.status.Initialized}
	// The read replicas' claims come from the same claim template (the
	// chart renders the voters' size into both) and grow the same way.
	read, err := r.readStatefulSet(ctx, c)
	if err != nil {
		return volumes.Observed{}, nil, err
	}
	if read != nil && apply.Ours(c.UID, read) {
		o.ReadStatefulSet = read.Name
		reads := &corev1.PersistentVolumeClaimList{}
		if err := r.APIReader.List(ctx, reads, client.InNamespace(c.Namespace), client.MatchingLabels(c.ReadPodSelectorLabels())); err != nil {
			return volumes.Observed{}, nil, fmt.Errorf("list the read replicas' volumes of %s: %w", c.Name, err)
		}
		list.Items = append(list.Items, reads.Items...)
	}
	byName := make(map[string]*corev1.PersistentVolumeClaim, len(list.Items))
	for i := range list.Items {
		claim := &list.Items[i]
		byName[claim.Name] = claim
		o.Claims = append(o.Claims, volumes.Claim{Name: claim.Name, Created: claim.CreationTimestamp.Time,
			Requested: claim.Spec.Resources.Requests[corev1.ResourceStorage], Capacity: claim.Status.Capacity[corev1.ResourceStorage],
			FileSystemResizePending: claimCondition(claim, corev1.PersistentVolumeClaimFileSystemResizePending)})
	}
	return o, byName, nil
}

// growClaim patches one claim's request, only the version that was
// decided on (an optimistic lock).
func (r *OpenBaoClusterReconciler) growClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, want resource.Quantity) error {
	before := claim.DeepCopy()
	from := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if claim.Spec.Resources.Requests == nil {
		claim.Spec.Resources.Requests = corev1.ResourceList{}
	}
	claim.Spec.Resources.Requests[corev1.ResourceStorage] = want
	if err := r.Client.Patch(ctx, claim, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("grow volume claim %s: %w", claim.Name, err)
	}
	log.FromContext(ctx).Info("grew a volume", "audit", true, "event_type", "openbao.cluster.volume_grown",
		"claim", claim.Name, "from", from.String(), "to", want.String())
	return nil
}

// setVolumesGrown reports d: refused, waiting for restarts, growing, or
// grown.
func setVolumesGrown(p *pass, d volumes.Decision, want resource.Quantity) {
	switch {
	case d.Refused != "":
		p.setCondition(v1alpha1.ConditionVolumesGrown, false, v1alpha1.ReasonVolumeGrowthRefused, d.Refused)
	case len(d.RestartPending) > 0:
		p.setCondition(v1alpha1.ConditionVolumesGrown, false, v1alpha1.ReasonFileSystemResizePending,
			"the volumes of "+strings.Join(d.RestartPending, ", ")+" grew to "+want.String()+
				"; their file systems grow when their servers' pods restart (delete one pod at a time, each after the cluster is Available again)")
	case len(d.Resizing) > 0 || len(d.Grow) > 0:
		growing := d.Resizing
		if len(growing) == 0 {
			growing = d.Grow
		}
		p.setCondition(v1alpha1.ConditionVolumesGrown, false, v1alpha1.ReasonVolumesGrowing,
			"the claims ask for "+want.String()+"; the volume plugin has not grown "+strings.Join(growing, ", ")+" yet")
	default:
		p.setCondition(v1alpha1.ConditionVolumesGrown, true, v1alpha1.ReasonVolumesGrown, "every server's volume holds "+want.String())
	}
}

// claimTemplateSize is the storage request of the StatefulSet's volume
// claim template "data".
func claimTemplateSize(sts *appsv1.StatefulSet) (resource.Quantity, bool) {
	for _, t := range sts.Spec.VolumeClaimTemplates {
		if t.Name == "data" {
			q, ok := t.Spec.Resources.Requests[corev1.ResourceStorage]
			return q, ok
		}
	}
	return resource.Quantity{}, false
}

func claimCondition(claim *corev1.PersistentVolumeClaim, t corev1.PersistentVolumeClaimConditionType) bool {
	for _, cond := range claim.Status.Conditions {
		if cond.Type == t && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// storageClassOf reads the class a cluster's claims use: the one the spec
// names, else the class marked default. The webhook and the storage step
// both ask it before volumes.Refusal.
func storageClassOf(ctx context.Context, reader client.Reader, name *string) (volumes.Class, error) {
	if name != nil && *name != "" {
		sc := &storagev1.StorageClass{}
		err := reader.Get(ctx, client.ObjectKey{Name: *name}, sc)
		if apierrors.IsNotFound(err) {
			return volumes.Class{Name: *name}, nil
		}
		if err != nil {
			return volumes.Class{}, fmt.Errorf("read StorageClass %s: %w", *name, err)
		}
		return classOf(sc), nil
	}
	list := &storagev1.StorageClassList{}
	if err := reader.List(ctx, list); err != nil {
		return volumes.Class{}, fmt.Errorf("list StorageClasses: %w", err)
	}
	for i := range list.Items {
		if list.Items[i].Annotations[defaultClassAnnotation] == "true" {
			return classOf(&list.Items[i]), nil
		}
	}
	return volumes.Class{}, nil
}

func classOf(sc *storagev1.StorageClass) volumes.Class {
	return volumes.Class{Name: sc.Name, Found: true, AllowsExpansion: sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion}
}

// storageSize refuses, on an update, a spec.storage.size that shrinks or
// grows where the class does not allow expansion (volumes.Refusal, the
// storage step's rule too).
func (rr referenceRules) storageSize(ctx context.Context, old, c *v1alpha1.OpenBaoCluster) (field.ErrorList, error) {
	if old == nil {
		return nil, nil
	}
	from, want := volumes.SpecSize(old), volumes.SpecSize(c)
	if from.Cmp(want) == 0 {
		return nil, nil
	}
	class, err := storageClassOf(ctx, rr.reader, c.Spec.Storage.StorageClassName)
	if err != nil {
		return nil, err
	}
	if why := volumes.Refusal(from, want, class); why != "" {
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "storage", "size"), why)}, nil
	}
	return nil, nil
}
