package controllers

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
)

// TestTheUpgradeTokenIsReadFromTheNamedKey: spec.upgrade.tokenSecretRef
// is a SecretKeyRef like every other tokenSecretRef: its key is read, and
// "token" when it names none. A missing key is named in the error, and no
// value of the Secret is.
func TestTheUpgradeTokenIsReadFromTheNamedKey(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "up", Namespace: "ns"},
		Data: map[string][]byte{"token": []byte("s.DEFAULT-KEY"), "bao-token": []byte("s.NAMED-KEY")}}
	for _, tc := range []struct {
		name, key, want, wantErr string
	}{
		{name: "the upgrade token is read from the named key", key: "bao-token", want: "s.NAMED-KEY"},
		{name: "the upgrade token is read from key token when none is named", want: "s.DEFAULT-KEY"},
		{name: "a key the Secret lacks is named in the error", key: "other", wantErr: "spec.upgrade.tokenSecretRef: Secret up has no key other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "ns"}}
			c.Spec.Upgrade.TokenSecretRef = &v1alpha1.SecretKeyRef{Name: "up", Key: tc.key}
			kube := (&tokenRequests{}).client(t, secret)
			r := &OpenBaoClusterReconciler{Client: kube, APIReader: kube}
			tok, err := r.upgradeToken(context.Background(), &pass{cluster: c, status: &c.Status})
			switch {
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			case err != nil && strings.Contains(err.Error(), "s."):
				t.Fatalf("the error holds a token: %v", err)
			case tc.wantErr == "" && (err != nil || tok.Reveal() != tc.want):
				t.Fatalf("token %q, %v; want %q", tok.Reveal(), err, tc.want)
			}
		})
	}
}
