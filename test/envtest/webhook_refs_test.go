package envtest_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/admission"
	"github.com/openbao/operator/internal/backup"
)

// The attacker tenant of issue "Confused deputy": in one namespace,
// Kubernetes' view ClusterRole (which reads no Secret) and an editor Role
// for the operator's kinds. A second user, the creator, may create the
// operator's kinds but not change others' (view and a create-only Role).
const (
	attackerUser = "tenant-attacker"
	creatorUser  = "tenant-creator"
)

// tenantRoles binds view and the roles the two users hold; the attacker
// may also get the one Secret team-s3 (its own store credentials), the
// creator team-s3 and team-key.
func tenantRoles(t *testing.T, admin client.Client) {
	t.Helper()
	kinds := []string{"openbaoclusters", "openbaobackups", "openbaorestores"}
	objs := []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "openbao-editor", Namespace: webhookNamespace}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: kinds,
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}},
			{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"openbaoclusters/status", "openbaobackups/status", "openbaorestores/status"},
				Verbs: []string{"get"}},
		}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "openbao-creator", Namespace: webhookNamespace}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: kinds, Verbs: []string{"get", "list", "watch", "create"}},
		}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "own-secrets", Namespace: webhookNamespace}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"team-s3", "team-key"}},
		}},
	}
	bind := func(name, kind, role string, users ...string) {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: webhookNamespace},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role}}
		for _, u := range users {
			rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
		}
		objs = append(objs, rb)
	}
	bind("view", "ClusterRole", "view", attackerUser, creatorUser)
	bind("openbao-editor", "Role", "openbao-editor", attackerUser)
	bind("openbao-creator", "Role", "openbao-creator", creatorUser)
	bind("own-secrets", "Role", "own-secrets", attackerUser, creatorUser)
	for _, s := range []struct {
		name    string
		managed bool
	}{{"prod-root-token", true}, {"prod-unseal-key", true}, {"team-s3", false}, {"team-key", false}, {"other-s3", false}} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: webhookNamespace},
			Data: map[string][]byte{"token": []byte("not-a-real-token"), "key": []byte("0123456789abcdef0123456789abcdef")}}
		if s.managed {
			sec.Labels = map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelCluster: "prod"}
		}
		objs = append(objs, sec)
	}
	for _, o := range objs {
		if err := admin.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

func impersonate(t *testing.T, admin *rest.Config, user string) client.Client {
	t.Helper()
	c := rest.CopyConfig(admin)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	cl, err := client.New(c, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

const storeTarget = `target: {endpoint: "https://s3.example.com", bucket: backups`

// TestATenantCannotHandTheOperatorSecretsOrClustersItMayNotUse acts as
// the attacker tenant and the creator through the webhook: each spec that
// names an operator-managed Secret, a Secret its author may not read, or
// a cluster its author may not update is refused naming the field and the
// rule, and is not stored; a spec naming the author's own Secret is
// admitted.
func TestATenantCannotHandTheOperatorSecretsOrClustersItMayNotUse(t *testing.T) {
	ctx := context.Background()
	admin, cfg := startWebhookServer(t)
	tenantRoles(t, admin)
	prod := object(t, "OpenBaoCluster", `metadata: {name: prod}
spec: {version: 2.4.0, backup: {jwtAuthRole: backup, `+storeTarget+`}}}`)
	if err := admin.Create(ctx, prod); err != nil {
		t.Fatalf("the admin's cluster prod was refused: %v", err)
	}
	attacker, creator := impersonate(t, cfg, attackerUser), impersonate(t, cfg, creatorUser)
	refused := []struct {
		name     string
		as       client.Client
		kind     string
		manifest string
		field    string
		rule     string
	}{
		{"another cluster's root token as the store credentials of the tenant's executor", attacker, "OpenBaoCluster",
			`spec: {version: 2.4.0, backup: {jwtAuthRole: backup, executorImage: "evil.example/exec:1", ` + storeTarget + `, credentialsSecretRef: {name: prod-root-token}}}}`,
			"spec.backup.target.credentialsSecretRef", admission.RuleManagedSecret},
		{"another cluster's seal key copied into the tenant's image", attacker, "OpenBaoCluster",
			`spec: {version: 2.4.0, image: "evil.example/bao", bootstrap: {fromBackup: {` + storeTarget + `}, latest: true, sourceCluster: prod, keepSourceIdentity: true, unsealKeySecretRef: {name: prod-unseal-key}}}}`,
			"spec.bootstrap.fromBackup.unsealKeySecretRef", admission.RuleManagedSecret},
		{"a Secret the tenant may not read as its store credentials", attacker, "OpenBaoCluster",
			`spec: {version: 2.4.0, backup: {jwtAuthRole: backup, ` + storeTarget + `, credentialsSecretRef: {name: other-s3}}}}`,
			"spec.backup.target.credentialsSecretRef", admission.RuleAuthorRights},
		{"a source cluster its author may not update, for its identity", creator, "OpenBaoCluster",
			`spec: {version: 2.4.0, bootstrap: {fromBackup: {` + storeTarget + `}, latest: true, sourceCluster: prod, keepSourceIdentity: true, unsealKeySecretRef: {name: team-key}}}}`,
			"spec.bootstrap.fromBackup.sourceCluster", admission.RuleAuthorRights},
		{"a Secret the tenant may not read as the certificate its servers serve", attacker, "OpenBaoCluster",
			`spec: {version: 2.4.0, tls: {mode: External, external: {serverSecretRef: {name: other-s3}}}}`,
			"spec.tls.external.serverSecretRef", admission.RuleAuthorRights},
		{"another cluster's server certificate and key as the tenant's External TLS", attacker, "OpenBaoCluster",
			`spec: {version: 2.4.0, tls: {mode: External, external: {serverSecretRef: {name: prod-tls-server}}}}`,
			"spec.tls.external.serverSecretRef", admission.RuleManagedSecret},
		{"a deletion policy that deletes volumes and Secrets its author may not delete", attacker, "OpenBaoCluster",
			`spec: {version: 2.4.0, deletionPolicy: DeleteAll}`, "spec.deletionPolicy", admission.RuleAuthorRights},
		{"a backup of a cluster its author may not update", creator, "OpenBaoBackup", `spec: {clusterName: prod}`,
			"spec.clusterName", admission.RuleAuthorRights},
		{"a restore into a cluster its author may not update", creator, "OpenBaoRestore", `spec: {clusterName: prod, source: {latest: true}}`,
			"spec.clusterName", admission.RuleAuthorRights},
	}
	for i, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			obj := object(t, tc.kind, tc.manifest)
			obj.SetName("refused-" + itoa(i))
			err := tc.as.Create(ctx, obj)
			expectRefused(t, err, tc.field, tc.rule)
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(obj.GroupVersionKind())
			if err := admin.Get(ctx, client.ObjectKeyFromObject(obj), got); !apierrors.IsNotFound(err) {
				t.Errorf("the refused %s %s was stored: %v", tc.kind, obj.GetName(), err)
			}
		})
	}
	t.Run("a spec naming the tenant's own Secret is admitted", func(t *testing.T) {
		own := object(t, "OpenBaoCluster", `metadata: {name: mine}
spec: {version: 2.4.0, backup: {jwtAuthRole: backup, `+storeTarget+`, credentialsSecretRef: {name: team-s3}}}}`)
		if err := attacker.Create(ctx, own); err != nil {
			t.Fatalf("refused: %v", err)
		}
		for _, tc := range []struct{ kind, manifest string }{
			{"OpenBaoBackup", `metadata: {name: mine-now}
spec: {clusterName: mine}`},
			{"OpenBaoRestore", `metadata: {name: mine-latest}
spec: {clusterName: mine, source: {latest: true}}`},
		} {
			if err := attacker.Create(ctx, object(t, tc.kind, tc.manifest)); err != nil {
				t.Errorf("the editor's %s of its own cluster was refused: %v", tc.kind, err)
			}
		}
	})
	t.Run("the operator's drill copy may name its source's seal key, a copy running another image may not", func(t *testing.T) {
		source := &v1alpha1.OpenBaoCluster{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(prod), source); err != nil {
			t.Fatal(err)
		}
		b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "prod-1", Namespace: webhookNamespace}}
		b.Status.Key, b.Status.SHA256 = "webhook/prod/1.snap", strings.Repeat("a", 64)
		forged := backup.DrillCopyFor(source, b)
		forged.Spec.Image = "evil.example/bao"
		err := admin.Create(ctx, forged)
		expectRefused(t, err, "spec.bootstrap.fromBackup.unsealKeySecretRef", admission.RuleManagedSecret)
		if err := admin.Create(ctx, backup.DrillCopyFor(source, b)); err != nil {
			t.Fatalf("the drill's own copy was refused: %v", err)
		}
	})
	t.Run("an update that names a managed Secret anew is refused, one that keeps the spec's names is not", func(t *testing.T) {
		mine := &v1alpha1.OpenBaoCluster{}
		if err := attacker.Get(ctx, client.ObjectKey{Namespace: webhookNamespace, Name: "mine"}, mine); err != nil {
			t.Fatal(err)
		}
		changed := mine.DeepCopy()
		changed.Spec.Backup.Target.CredentialsSecretRef.Name = "prod-root-token"
		err := attacker.Update(ctx, changed)
		expectRefused(t, err, "spec.backup.target.credentialsSecretRef", admission.RuleManagedSecret)
		if !strings.Contains(err.Error(), "ends in -root-token") {
			t.Errorf("the refusal does not say why the Secret is the operator's: %v", err)
		}
		widened := mine.DeepCopy()
		widened.Spec.DeletionPolicy = v1alpha1.DeletionPolicyDeletePVCs
		err = attacker.Update(ctx, widened)
		expectRefused(t, err, "spec.deletionPolicy", admission.RuleAuthorRights)
		if !strings.Contains(err.Error(), "may not delete persistentvolumeclaims") {
			t.Errorf("the refusal does not name the right the policy would hand over: %v", err)
		}
		mine.Spec.Version = "2.5.0"
		if err := attacker.Update(ctx, mine); err != nil {
			t.Errorf("an upgrade of a cluster whose names did not change was refused: %v", err)
		}
	})
}
