package restore

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/openbao/operator/api/v1alpha1"
)

// Reasons of condition RestoredFromBackup.
const (
	ReasonBootstrapRestoreCreated = "BootstrapRestoreCreated"
	ReasonBootstrapRestoring      = "BootstrapRestoring"
	ReasonBindingIdentity         = "BindingIdentity"
	ReasonRestoredFromBackup      = "RestoredFromBackup"
	ReasonBootstrapRestoreFailed  = "BootstrapRestoreFailed"
)

// BootstrapObserved is what the cluster's fromBackup step looks at.
type BootstrapObserved struct {
	Cluster *v1alpha1.OpenBaoCluster
	// Initialized is the status being built: the restore starts only in
	// a cluster the operator initialized (with its identity in place).
	Initialized bool
	// Status is status.fromBackup as it is.
	Status *v1alpha1.FromBackupStatus
	// Restore is the cluster's <cluster>-from-backup OpenBaoRestore; nil
	// when it does not exist (or the cache has not seen it yet).
	Restore *v1alpha1.OpenBaoRestore
	// RestoreOfAnother says the restore of that name belongs to an earlier
	// cluster of this name (a drill's previous copy), which the garbage
	// collector has not removed yet: its outcome is not this cluster's.
	RestoreOfAnother bool
	Now              metav1.Time
}

// BootstrapDecision is what the step does.
type BootstrapDecision struct {
	// Status is the next status.fromBackup; nil leaves it unset.
	Status *v1alpha1.FromBackupStatus
	// CreateRestore asks for the OpenBaoRestore (an existing one stays).
	CreateRestore bool
	// VoidRootToken deletes the root-token Secret of the cluster's own
	// initialization: the restore replaced the token store, so its token
	// opens nothing.
	VoidRootToken bool
	// BindIdentity binds the restored data's operator identity to this
	// cluster with spec.bootstrap.fromBackup.tokenSecretRef.
	BindIdentity bool
	// Condition RestoredFromBackup; Reason empty leaves it unset.
	Value           bool
	Reason, Message string
	// Degraded marks the cluster Degraded with Reason and Message.
	Degraded bool
}

// DecideBootstrap follows spec.bootstrap.fromBackup: once the operator has
// initialized the cluster, an OpenBaoRestore of source.bootstrap restores
// the snapshot (held, like every restore, until the cluster runs); once
// OpenBao installed it the empty initialization's root token is void and,
// for another cluster's snapshot, the operator's identity is bound to this
// cluster before the restore's verification can log in. A failed restore
// is told with what to do; deleting it starts another.
func DecideBootstrap(o BootstrapObserved) BootstrapDecision {
	fb := o.Cluster.FromBackup()
	if fb == nil {
		return BootstrapDecision{Status: o.Status}
	}
	if refused := BootstrapRefused(o.Cluster); len(refused) > 0 && (o.Status == nil || o.Status.CompletedAt == nil) {
		// Without the webhook: nothing is restored that could not be
		// bound, or logged in to, afterwards.
		return BootstrapDecision{Status: o.Status, Reason: ReasonBootstrapMisconfigured, Message: refused.ToAggregate().Error(), Degraded: true}
	}
	if !o.Initialized {
		return BootstrapDecision{Status: o.Status}
	}
	s := &v1alpha1.FromBackupStatus{Restore: o.Cluster.FromBackupRestoreName()}
	if o.Status != nil {
		s = o.Status.DeepCopy()
	}
	d := BootstrapDecision{Status: s}
	name := s.Restore
	switch {
	case s.CompletedAt != nil:
		d.Value, d.Reason = true, ReasonRestoredFromBackup
		d.Message = fmt.Sprintf("formed from snapshot %s (sha256 %s) by OpenBaoRestore %s", s.Key, s.SHA256, name)
		return d
	case o.RestoreOfAnother:
		d.Reason = ReasonBootstrapRestoreCreated
		d.Message = "OpenBaoRestore " + name + " of an earlier cluster of this name is still there; waiting for it to go"
		return d
	case o.Restore == nil:
		// Created the first time, or again after a failed one was deleted;
		// what an earlier one installed (and bound) stays recorded.
		s.Failed, s.FailedMessage = "", ""
		d.CreateRestore = true
		d.Reason, d.Message = ReasonBootstrapRestoreCreated, "OpenBaoRestore "+name+" restores the snapshot of spec.bootstrap.fromBackup once the cluster runs"
		return d
	}
	rs := o.Restore.Status
	if s.InstalledAt == nil && rs.RestoredAt != nil {
		s.InstalledAt, d.VoidRootToken = rs.RestoredAt.DeepCopy(), true
	}
	// A standby binds after every restore, whatever the source's name: its
	// source may be a cluster of the same name in another Kubernetes
	// cluster, whose issuer is not this one's.
	needsBinding := s.InstalledAt != nil && !s.IdentityBound && !fb.KeepSourceIdentity &&
		(fb.SourceClusterName(o.Cluster.Name) != o.Cluster.Name || fb.SourceNamespaceName(o.Cluster.Namespace) != o.Cluster.Namespace ||
			o.Cluster.Spec.Standby != nil)
	switch {
	case rs.Phase == v1alpha1.RestoreFailed:
		s.Failed, s.FailedMessage = rs.Reason, rs.Message
		d.Reason, d.Degraded = ReasonBootstrapRestoreFailed, true
		d.Message = fmt.Sprintf("OpenBaoRestore %s failed (%s): %s. The cluster holds the empty data of its initialization. "+
			"Fix the cause, then delete OpenBaoRestore %s: the operator creates it again", name, rs.Reason, rs.Message, name)
		if rs.Reason == ReasonSealMismatch {
			// The cluster's own data is sealed with the key it was given,
			// which cannot change: only a new cluster can take the right one.
			d.Message = fmt.Sprintf("OpenBaoRestore %s failed (%s): the snapshot is sealed with another key than this cluster's, "+
				"so nothing was changed. spec.bootstrap.fromBackup.unsealKeySecretRef must name the source cluster's static key "+
				"(for a KMS seal, spec.unseal must be the source's). Delete this cluster with deletionPolicy DeleteAll and create it "+
				"again with the right key", name, rs.Reason)
		}
	case needsBinding:
		d.BindIdentity = true
		d.Reason, d.Message = ReasonBindingIdentity, "OpenBao installed the snapshot; binding the operator's identity in it to this cluster with spec.bootstrap.fromBackup.tokenSecretRef"
	case rs.Phase == v1alpha1.RestoreSucceeded:
		s.CompletedAt, s.Key, s.SHA256, s.Failed, s.FailedMessage = rs.CompletionTime.DeepCopy(), rs.Key, rs.SHA256, "", ""
		if s.CompletedAt == nil {
			s.CompletedAt = o.Now.DeepCopy()
		}
		d.Value, d.Reason = true, ReasonRestoredFromBackup
		d.Message = fmt.Sprintf("formed from snapshot %s (sha256 %s) by OpenBaoRestore %s", s.Key, s.SHA256, name)
	default:
		d.Reason = ReasonBootstrapRestoring
		d.Message = fmt.Sprintf("OpenBaoRestore %s is %s: %s", name, orNone(string(rs.Phase)), rs.Message)
	}
	return d
}

// BootstrapRestoreFor is the OpenBaoRestore of cluster c's
// spec.bootstrap.fromBackup; the cluster controls it, so it goes with the
// cluster.
func BootstrapRestoreFor(c *v1alpha1.OpenBaoCluster) *v1alpha1.OpenBaoRestore {
	return &v1alpha1.OpenBaoRestore{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.RestoreKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: c.FromBackupRestoreName(), Namespace: c.Namespace,
			Labels:          map[string]string{v1alpha1.LabelCluster: c.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c, v1alpha1.GroupVersion.WithKind(v1alpha1.Kind))},
		},
		// No pre-restore snapshot: the cluster holds nothing yet.
		Spec: v1alpha1.OpenBaoRestoreSpec{ClusterName: c.Name, Source: v1alpha1.RestoreSource{Bootstrap: true}, PreRestoreSnapshot: ptr.To(false)},
	}
}
