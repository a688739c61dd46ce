package backup_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
)

// TestAnExternalTLSClustersJobTrustsTheCAOfTheUsersSecret: a backup Job
// verifies the servers against what they serve: with tls.mode External,
// ca.crt of the Secret spec.tls.external.serverSecretRef names, and only
// that key of it (never tls.key).
func TestAnExternalTLSClustersJobTrustsTheCAOfTheUsersSecret(t *testing.T) {
	c := backupCluster(func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.TLS = v1alpha1.TLSSpec{Mode: v1alpha1.TLSModeExternal,
			External: &v1alpha1.ExternalTLSSpec{ServerSecretRef: v1alpha1.TLSSecretRef{Name: "bao-cert"}}}
	})
	b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}, Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: c.Name}}
	job := backup.JobFor(backup.JobInput{Cluster: c, Backup: b, Name: "j", OperatorImage: "op:1"})
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name != "openbao-ca" {
			continue
		}
		s := v.Secret
		if s == nil || s.SecretName != "bao-cert" || len(s.Items) != 1 || s.Items[0].Key != "ca.crt" {
			t.Fatalf("volume openbao-ca is %+v, want key ca.crt of Secret bao-cert alone", v.VolumeSource)
		}
		return
	}
	t.Fatal("the Job mounts no openbao-ca volume")
}
