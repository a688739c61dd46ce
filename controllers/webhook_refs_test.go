package controllers

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/openbao/operator/api/v1alpha1"
	decide "github.com/openbao/operator/internal/admission"
)

// fakeAuthorizer answers SubjectAccessReviews: the user may do exactly
// what allowed lists ("verb resource/name"), and each question is kept.
type fakeAuthorizer struct {
	allowed map[string]bool
	asked   []authorizationv1.SubjectAccessReviewSpec
}

func (a *fakeAuthorizer) client(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			sar, ok := obj.(*authorizationv1.SubjectAccessReview)
			if !ok {
				return c.Create(ctx, obj, opts...)
			}
			a.asked = append(a.asked, sar.Spec)
			ra := sar.Spec.ResourceAttributes
			sar.Status.Allowed = a.allowed[ra.Verb+" "+ra.Resource+"/"+ra.Name]
			return nil
		},
	}).Build()
}

func asUser(name string) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UserInfo: authenticationv1.UserInfo{Username: name, UID: "u-1", Groups: []string{"team-a", "system:authenticated"},
			Extra: map[string]authenticationv1.ExtraValue{"scopes": {"x"}}},
	}})
}

func stealer(cred string) *v1alpha1.OpenBaoCluster {
	return &v1alpha1.OpenBaoCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "steal", Namespace: "team"},
		Spec: v1alpha1.OpenBaoClusterSpec{Version: "2.4.0", Backup: &v1alpha1.BackupSpec{JWTAuthRole: "backup",
			ExecutorImage: "evil.example/exec:1", Target: v1alpha1.BackupTarget{Endpoint: "https://s3.example", Bucket: "b",
				CredentialsSecretRef: &corev1.LocalObjectReference{Name: cred}}}},
	}
}

// TestTheClusterWebhookRefusesWhatItsAuthorMayNotHandOver drives the
// cluster validator as the API server would: with the request's user in
// the context, the authorizer answering its SubjectAccessReviews.
func TestTheClusterWebhookRefusesWhatItsAuthorMayNotHandOver(t *testing.T) {
	tests := map[string]struct {
		cred, field, rule string
	}{
		"another cluster's root token is refused by the managed-Secret rule":   {"prod-root-token", "spec.backup.target.credentialsSecretRef", decide.RuleManagedSecret},
		"a Secret the author may not get is refused by the author-rights rule": {"other-s3", "spec.backup.target.credentialsSecretRef", decide.RuleAuthorRights},
		"a Secret carrying the operator's label is refused whatever its name":  {"renamed", "spec.backup.target.credentialsSecretRef", decide.RuleManagedSecret},
		"a Secret the author may get is admitted":                              {"team-s3", "", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			authz := &fakeAuthorizer{allowed: map[string]bool{"get secrets/team-s3": true, "get secrets/renamed": true, "get secrets/prod-root-token": true}}
			cl := authz.client(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "renamed", Namespace: "team",
				Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}}})
			v := clusterValidator{rules: referenceRules{reader: cl, reviews: cl}}
			_, err := v.ValidateCreate(asUser("tenant"), stealer(tc.cred))
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.field+": Forbidden") || !strings.Contains(err.Error(), tc.rule) {
				t.Fatalf("got %v, want a refusal of %s by rule %q", err, tc.field, tc.rule)
			}
			if len(authz.asked) != 1 {
				t.Fatalf("asked %d reviews, want 1", len(authz.asked))
			}
			got := authz.asked[0]
			if got.User != "tenant" || got.UID != "u-1" || len(got.Groups) != 2 || got.Extra["scopes"][0] != "x" ||
				got.ResourceAttributes.Namespace != "team" || got.ResourceAttributes.Verb != "get" {
				t.Errorf("the review does not ask for the request's user in the namespace: %+v", got)
			}
		})
	}
}

func TestABackupOrRestoreNeedsTheRightToUpdateItsCluster(t *testing.T) {
	cluster := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: "team"},
		Spec: v1alpha1.OpenBaoClusterSpec{Version: "2.4.0", Backup: &v1alpha1.BackupSpec{JWTAuthRole: "backup",
			Target: v1alpha1.BackupTarget{Endpoint: "https://s3.example", Bucket: "b"}}}}
	for _, allowed := range []bool{false, true} {
		authz := &fakeAuthorizer{allowed: map[string]bool{"update openbaoclusters/prod": allowed}}
		cl := authz.client(t, cluster)
		rules := referenceRules{reader: cl, reviews: cl}
		_, bErr := backupValidator{reader: cl, rules: rules}.ValidateCreate(asUser("viewer"),
			&v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "team"}, Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: "prod"}})
		_, rErr := restoreValidator{reader: cl, rules: rules}.ValidateCreate(asUser("viewer"),
			&v1alpha1.OpenBaoRestore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "team"},
				Spec: v1alpha1.OpenBaoRestoreSpec{ClusterName: "prod", Source: v1alpha1.RestoreSource{Latest: true}}})
		for kind, err := range map[string]error{"backup": bErr, "restore": rErr} {
			switch {
			case allowed && err != nil:
				t.Errorf("a %s by a user who may update prod was refused: %v", kind, err)
			case !allowed && (err == nil || !strings.Contains(err.Error(), "spec.clusterName: Forbidden") || !strings.Contains(err.Error(), decide.RuleAuthorRights)):
				t.Errorf("a %s by a user who may not update prod: %v, want refused naming spec.clusterName", kind, err)
			}
		}
	}
}
