package controllers

import (
	"bytes"
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/sealkey"
)

// TestTheSourceSealKeyIsCopiedFromTheNamedKey: unsealKeySecretRef is a
// SecretKeyRef like every reference to one value of a Secret: the key it
// names is copied into <cluster>-unseal-key, and "key" when it names none.
func TestTheSourceSealKeyIsCopiedFromTheNamedKey(t *testing.T) {
	named, byDefault := bytes.Repeat([]byte{1}, sealkey.Size), bytes.Repeat([]byte{2}, sealkey.Size)
	for _, tc := range []struct {
		name, key string
		want      []byte
	}{
		{"the seal key is copied from the named key", "seal", named},
		{"the seal key is copied from key key when none is named", "", byDefault},
	} {
		t.Run(tc.name, func(t *testing.T) {
			source := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "src-key", Namespace: "ns"},
				Data: map[string][]byte{"seal": named, "key": byDefault}}
			c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "ns", UID: "u"},
				Spec: v1alpha1.OpenBaoClusterSpec{Bootstrap: &v1alpha1.BootstrapSpec{FromBackup: &v1alpha1.BackupBootstrap{
					SourceCluster: "src", Latest: true, UnsealKeySecretRef: &v1alpha1.SecretKeyRef{Name: "src-key", Key: tc.key}}}}}
			kube := (&tokenRequests{}).client(t, source)
			r := &OpenBaoClusterReconciler{Client: kube, APIReader: kube}
			if err := r.copySourceKey(context.Background(), &pass{cluster: c, status: &c.Status}); err != nil {
				t.Fatal(err)
			}
			got := &corev1.Secret{}
			if err := kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: c.UnsealKeySecretName()}, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Data[sealkey.DataKey], tc.want) {
				t.Errorf("copied the wrong key of Secret src-key")
			}
		})
	}
}
