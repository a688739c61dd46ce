package restore

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
)

// JobLabels are the labels of a restore Job and its pod. The component is
// the backup's: the pod runs under the backup service account, and the
// cluster's NetworkPolicy admits that component to the API port.
func JobLabels(c *v1alpha1.OpenBaoCluster, r *v1alpha1.OpenBaoRestore) map[string]string {
	return map[string]string{
		v1alpha1.LabelCluster: c.Name, v1alpha1.LabelRestore: r.Name,
		v1alpha1.LabelComponent: v1alpha1.ComponentBackup, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
	}
}

// JobFor builds the Job of one restore: the backup Job's pod (backup
// service account, restricted pod security, nothing writable, the same
// mounts and deadline) running `openbao-operator restore`.
func JobFor(c *v1alpha1.OpenBaoCluster, r *v1alpha1.OpenBaoRestore, operatorImage string, env []corev1.EnvVar) *batchv1.Job {
	return backup.ExecutorJob(backup.ExecutorJobInput{
		Cluster: ViewFor(c, r), Name: r.Status.JobName, Owner: r.ControllerReference(), Labels: JobLabels(c, r),
		Args: ExecutorConfigFor(c, r).Args(), OperatorImage: operatorImage, Env: env,
	})
}
