package controllers

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/apply"
	"github.com/openbao/operator/internal/deletion"
	"github.com/openbao/operator/internal/secrets"
)

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=delete

// finalizeRetry paces the wait for the servers to stop.
const finalizeRetry = 2 * time.Second

// ensureFinalizer puts the deletion-policy finalizer on a cluster that
// lacks it, so that its deletion waits for the operator.
func (r *OpenBaoClusterReconciler) ensureFinalizer(ctx context.Context, c *v1alpha1.OpenBaoCluster) error {
	if controllerutil.ContainsFinalizer(c, v1alpha1.Finalizer) {
		return nil
	}
	patch := client.MergeFrom(c.DeepCopy())
	controllerutil.AddFinalizer(c, v1alpha1.Finalizer)
	if err := r.Client.Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("add finalizer %s: %w", v1alpha1.Finalizer, err)
	}
	return nil
}

// finalize carries out the deletion policy in order, then lets the cluster
// go: the servers stop first; then, as the policy in force says, the Raft
// volumes and the CA (DeletePVCs, DeleteAll); the seal key and the root
// token last (DeleteAll). What is left, the owned children, goes with the
// cluster. Backups in object storage are never touched.
func (r *OpenBaoClusterReconciler) finalize(ctx context.Context, c *v1alpha1.OpenBaoCluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(c, v1alpha1.Finalizer) {
		return ctrl.Result{}, nil
	}
	stopped, foreign, err := r.stopServers(ctx, c)
	if err != nil || !stopped {
		return ctrl.Result{RequeueAfter: finalizeRetry}, err
	}
	policy := c.Spec.DeletionPolicy
	if policy.DeletesVolumes() {
		if err := r.deleteVolumes(ctx, c, foreign); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.deleteDataSecrets(ctx, c, c.TLSCASecretName()); err != nil {
			return ctrl.Result{}, err
		}
	}
	if policy == v1alpha1.DeletionPolicyDeleteAll {
		if err := r.deleteDataSecrets(ctx, c, c.UnsealKeySecretName(), c.RootTokenSecretName(), c.BackupProvenanceSecretName(),
			c.RecoveryKeysSecretName()); err != nil {
			return ctrl.Result{}, err
		}
	}
	ctrl.LoggerFrom(ctx).Info("deletion policy carried out", "audit", true, "event_type", "openbao.cluster.deleted",
		"deletionPolicy", string(policy))
	patch := client.MergeFrom(c.DeepCopy())
	controllerutil.RemoveFinalizer(c, v1alpha1.Finalizer)
	if err := r.Client.Patch(ctx, c, patch); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer %s: %w", v1alpha1.Finalizer, err)
	}
	r.forget(client.ObjectKeyFromObject(c))
	return ctrl.Result{}, nil
}

// stopServers deletes the cluster's StatefulSets, the voters' and the
// read replicas', and reports whether every server pod of both is gone. A
// StatefulSet of either name that is not the cluster's (apply.Ours:
// another's, which the apply step refused to take over) is left alone,
// and so are its pods; foreign says the voters' one is.
func (r *OpenBaoClusterReconciler) stopServers(ctx context.Context, c *v1alpha1.OpenBaoCluster) (stopped, foreign bool, err error) {
	stopped, foreign, err = r.stopStatefulSet(ctx, c, c.StatefulSetName(), c.PodSelectorLabels())
	if err != nil || !stopped {
		return stopped, foreign, err
	}
	readStopped, _, err := r.stopStatefulSet(ctx, c, c.ReadStatefulSetName(), c.ReadPodSelectorLabels())
	return readStopped, foreign, err
}

// stopStatefulSet deletes the cluster's StatefulSet name and reports
// whether every pod its selector matches is gone, but those of a foreign
// StatefulSet of that name.
func (r *OpenBaoClusterReconciler) stopStatefulSet(ctx context.Context, c *v1alpha1.OpenBaoCluster, name string,
	selector map[string]string) (stopped, foreign bool, err error) {
	sts := &metav1.PartialObjectMetadata{}
	sts.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
	err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, sts)
	var foreignUID types.UID
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, false, fmt.Errorf("read StatefulSet %s: %w", name, err)
	case !apply.Ours(c.UID, sts):
		foreignUID = sts.UID
	default:
		uid := sts.UID
		err := r.Client.Delete(ctx, sts, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationForeground))
		if client.IgnoreNotFound(err) != nil {
			return false, false, fmt.Errorf("delete StatefulSet %s: %w", sts.Name, err)
		}
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(selector)); err != nil {
		return false, false, fmt.Errorf("list pods of %s: %w", name, err)
	}
	for i := range pods.Items {
		if ref := metav1.GetControllerOfNoCopy(&pods.Items[i]); foreignUID == "" || ref == nil || ref.UID != foreignUID {
			return false, foreignUID != "", nil
		}
	}
	return true, foreignUID != "", nil
}

// deleteVolumes deletes the Raft volumes of every server the cluster ever
// ran, as deletion.Volumes decides: the claims carry its pod selector
// labels, which a Helm-installed OpenBao of the same name carries too, so
// a claim that may be another's is kept and reported, never deleted.
func (r *OpenBaoClusterReconciler) deleteVolumes(ctx context.Context, c *v1alpha1.OpenBaoCluster, foreignStatefulSet bool) error {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.APIReader.List(ctx, claims, client.InNamespace(c.Namespace), client.MatchingLabels(c.PodSelectorLabels())); err != nil {
		return fmt.Errorf("list the volumes of %s: %w", c.Name, err)
	}
	o := deletion.Observed{Policy: c.Spec.DeletionPolicy, StatefulSet: c.StatefulSetName(), ForeignStatefulSet: foreignStatefulSet,
		ClusterCreated: c.CreationTimestamp.Time, Initialized: c.Status.Initialized}
	uids := make(map[string]types.UID, len(claims.Items))
	for i := range claims.Items {
		claim := &claims.Items[i]
		o.Claims = append(o.Claims, deletion.Claim{Name: claim.Name, Created: claim.CreationTimestamp.Time})
		uids[claim.Name] = claim.UID
	}
	d := deletion.Volumes(o)
	log := ctrl.LoggerFrom(ctx)
	for _, k := range d.Keep {
		log.Info("kept a volume the deletion policy would delete", "audit", true, "event_type", "openbao.cluster.volume_kept",
			"claim", k.Name, "why", k.Why)
		r.Recorder.Eventf(c, nil, "Warning", "VolumeKept", "Finalize", "volume claim %s is kept: %s", k.Name, k.Why)
	}
	for _, name := range d.Delete {
		// The precondition deletes the claim that was decided on, not
		// one created again under its name since it was listed.
		uid := uids[name]
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}
		if err := r.Client.Delete(ctx, claim, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete volume claim %s: %w", name, err)
		}
		log.Info("deleted a Raft volume", "audit", true, "event_type", "openbao.cluster.volume_deleted", "claim", name)
	}
	return nil
}

// deleteDataSecrets deletes Secrets the operator wrote for the data (read
// exactly: they may be of an earlier cluster of this name), and only
// those: a Secret of that name without the operator's label stays.
func (r *OpenBaoClusterReconciler) deleteDataSecrets(ctx context.Context, c *v1alpha1.OpenBaoCluster, names ...string) error {
	for _, name := range names {
		s, err := r.readSecret(ctx, r.APIReader, c.Namespace, name)
		if err != nil {
			return err
		}
		if s == nil || !writtenByOperator(s, c) {
			continue
		}
		if err := r.deleteSecret(ctx, s); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("deleted a Secret the deletion policy removes", "audit", true,
			"event_type", "openbao.cluster.secret_deleted", "secret", name)
	}
	return nil
}

// writtenByOperator says the Secret carries the labels the operator puts
// on every Secret it writes for c.
func writtenByOperator(s *corev1.Secret, c *v1alpha1.OpenBaoCluster) bool {
	for k, v := range secrets.Labels(c) {
		if s.Labels[k] != v {
			return false
		}
	}
	return true
}

// disownDataSecrets removes the cluster's owner reference from the Secrets
// that go with the data, which earlier versions of the operator owned under
// a deleting policy: an owner reference would let garbage collection take
// the seal key of volumes that a later Retain keeps. They are read from
// the cache, so this costs nothing once done.
func (r *OpenBaoClusterReconciler) disownDataSecrets(ctx context.Context, p *pass) error {
	c := p.cluster
	for _, name := range []string{c.UnsealKeySecretName(), c.RootTokenSecretName(), c.RecoveryKeysSecretName(), c.TLSCASecretName()} {
		s, err := r.readSecret(ctx, r.Client, c.Namespace, name)
		if err != nil || s == nil || metav1.GetControllerOfNoCopy(s) == nil {
			if err != nil {
				return err
			}
			continue
		}
		patch := client.MergeFrom(s.DeepCopy())
		s.OwnerReferences = nil
		if err := r.Client.Patch(ctx, s, patch); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("remove the owner of Secret %s: %w", name, secrets.Redact(err))
		}
	}
	return nil
}
