package restore

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/identity"
)

// JobLabels are the labels of a restore Job and its pod. The component is
// the backup's: the cluster's NetworkPolicy admits that component to the
// API port.
func JobLabels(c *v1alpha1.OpenBaoCluster, r *v1alpha1.OpenBaoRestore) map[string]string {
	return map[string]string{
		v1alpha1.LabelCluster: c.Name, v1alpha1.LabelRestore: r.Name,
		v1alpha1.LabelComponent: v1alpha1.ComponentBackup, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
	}
}

// JobFor builds the Job of one restore: the backup Job's pod (under the
// restore's own ServiceAccount and audience, identity.LoginFor; restricted
// pod security, nothing writable, the same
// mounts and deadline) running `openbao-operator restore`, with one
// difference: it runs one pod, once. A second pod would post the snapshot
// again and silently lose what was written in between, so no pod failure
// is retried (backoffLimit 0), a disruption (eviction, preemption, a node
// drain) fails the Job instead of being ignored and retried as the backup
// Job's policy does, and no replacement starts while a failed pod is still
// terminating.
func JobFor(c *v1alpha1.OpenBaoCluster, r *v1alpha1.OpenBaoRestore, operatorImage string, env []corev1.EnvVar) *batchv1.Job {
	cfg := ExecutorConfigFor(c, r)
	job := backup.ExecutorJob(backup.ExecutorJobInput{
		Cluster: ViewFor(c, r), Login: identity.LoginFor(c, identity.RestoreRole, identity.RestoreRole), Name: r.Status.JobName,
		Owner: r.ControllerReference(), Labels: JobLabels(c, r), Args: cfg.Args(), OperatorImage: operatorImage, Env: env,
		ProvenanceSecret: cfg.ProvenanceSecret(), ProvenanceOptional: true,
	})
	job.Spec.BackoffLimit = ptr.To[int32](0)
	job.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	job.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionFailJob, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
		{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To(backup.ExecutorName), Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0}}},
	}}
	return job
}
