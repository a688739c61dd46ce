package controllers

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
)

// tokenRequests records the TokenRequests a reconciler makes: which
// ServiceAccount, for which audiences.
type tokenRequests struct{ got []string }

func (tr *tokenRequests) client(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		SubResourceCreate: func(_ context.Context, _ client.Client, sub string, obj client.Object, req client.Object, _ ...client.SubResourceCreateOption) error {
			if tok, ok := req.(*authenticationv1.TokenRequest); ok && sub == "token" {
				tr.got = append(tr.got, obj.GetName()+" for "+tok.Spec.Audiences[0])
				tok.Status.Token = "jwt"
			}
			return nil
		},
	}).Build()
}

// TestTheOperatorHandsADrillsCopyOnlyTheDrillToken: before the copy holds
// the snapshot the operator logs in to it as the copy's own upgrade role;
// once it does, as the source's drill role with the snapshot's audience,
// never with the source's upgrade account or audience (which the source
// accepts), whatever the source's spec.upgrade says. A copy a user made
// keeping the source's identity logs in as the source's upgrade role at
// the revision the source records.
func TestTheOperatorHandsADrillsCopyOnlyTheDrillToken(t *testing.T) {
	src := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "ns", UID: "u1"},
		Spec:   v1alpha1.OpenBaoClusterSpec{Backup: &v1alpha1.BackupSpec{Target: v1alpha1.BackupTarget{Bucket: "b"}}},
		Status: v1alpha1.OpenBaoClusterStatus{IdentityConfigured: true, IdentityRevision: identity.Revision}}
	b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: "ns"},
		Status: v1alpha1.OpenBaoBackupStatus{Phase: v1alpha1.BackupSucceeded, Key: "p/ns/bao/k.snap"}}
	installed := &v1alpha1.FromBackupStatus{InstalledAt: &metav1.Time{Time: time.Unix(1, 0)}}
	drillCopy := func(fb *v1alpha1.FromBackupStatus) *v1alpha1.OpenBaoCluster {
		cp := backup.DrillCopyFor(src, b)
		cp.Status = v1alpha1.OpenBaoClusterStatus{IdentityConfigured: true, IdentityRevision: identity.Revision, FromBackup: fb}
		return cp
	}
	userCopy := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "copy", Namespace: "ns"},
		Spec: v1alpha1.OpenBaoClusterSpec{Bootstrap: &v1alpha1.BootstrapSpec{FromBackup: &v1alpha1.BackupBootstrap{
			SourceCluster: "bao", Key: "p/ns/bao/k.snap", KeepSourceIdentity: true}}},
		Status: v1alpha1.OpenBaoClusterStatus{IdentityConfigured: true, IdentityRevision: identity.Revision, FromBackup: installed}}
	for _, tc := range []struct {
		name        string
		c           *v1alpha1.OpenBaoCluster
		token, role string
	}{
		{"the source", src, "bao-upgrade-serviceaccount for openbao-operator:ns/bao:upgrade", "openbao-operator/upgrade"},
		{"the drill's copy before the snapshot", drillCopy(nil), "bao-drill-upgrade-serviceaccount for openbao-operator:ns/bao-drill:upgrade", "openbao-operator/upgrade"},
		{"the drill's copy holding the snapshot", drillCopy(installed),
			"bao-drill-serviceaccount for " + src.DrillTokenAudience(b.Status.Key), "openbao-operator/drill"},
		{"a user's copy keeping the source's identity", userCopy, "bao-upgrade-serviceaccount for openbao-operator:ns/bao:upgrade", "openbao-operator/upgrade"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &tokenRequests{}
			bao := &openbaofake.Client{LoginToken: openbao.NewToken("t"), LoginTTL: time.Minute}
			r := &OpenBaoClusterReconciler{Client: tr.client(t, src), OpenBao: func(openbao.Options) (openbao.Client, error) { return bao, nil }}
			p := &pass{cluster: tc.c, status: &tc.c.Status}
			if _, _, err := r.loginAsUpgrade(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			if len(tr.got) != 1 || tr.got[0] != tc.token || len(bao.Logins) != 1 || bao.Logins[0] != tc.role {
				t.Errorf("token of %v, logins %v; want %s at %s", tr.got, bao.Logins, tc.token, tc.role)
			}
		})
	}
}
