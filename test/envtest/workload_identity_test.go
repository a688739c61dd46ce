package envtest_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/delegated"
)

// TestAWorkloadIdentityAnnotatesTheServiceAccountsAndOtherKeysAreRefused
// (issue 29): the attacker tenant, who may create no ServiceAccount,
// names a cloud identity on its servers' ServiceAccount (Azure, whose
// pods then carry azure.workload.identity/use) and on its backup and
// restore Jobs' (IRSA): admitted, since the cloud's trust policy names
// this namespace and ServiceAccount, and the operator's apply carries them
// onto the ServiceAccounts. An annotation key that is no workload
// identity's is refused at admission naming the field and what is allowed.
func TestAWorkloadIdentityAnnotatesTheServiceAccountsAndOtherKeysAreRefused(t *testing.T) {
	ctx := context.Background()
	admin, adminCfg := startWebhookServerWith(t, controllers.Platform{Fields: platformFields})
	a := NewAttackerOn(t, adminCfg, admin, "attacker-identity")
	ns := a.Namespace
	for i, tc := range []struct{ spec, field string }{
		{`serviceAccount: {annotations: {example.com/steer: "x"}}`, "spec.serviceAccount.annotations[example.com/steer]"},
		{`backup: {jwtAuthRole: backup, ` + storeTarget + `}, serviceAccount: {annotations: {kubernetes.io/enforce-mountable-secrets: "true"}}}`,
			"spec.backup.serviceAccount.annotations[kubernetes.io/enforce-mountable-secrets]"},
	} {
		c := newCluster(t, ns, "metadata: {name: refused-"+itoa(i)+"}\nspec: {version: 2.4.0, "+tc.spec+"}")
		err := a.Client.Create(ctx, c)
		expectRefused(t, err, tc.field, delegated.Rule)
		for _, want := range []string{"eks.amazonaws.com/role-arn", "iam.gke.io/gcp-service-account", "azure.workload.identity/client-id", "--allowed-annotation-prefixes"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal of %s does not say %q is allowed: %v", tc.field, want, err)
			}
		}
	}
	c := newCluster(t, ns, `metadata: {name: cloud}
spec:
  version: 2.4.0
  serviceAccount: {annotations: {azure.workload.identity/client-id: 00000000-0000-0000-0000-000000000001}}
  backup: {jwtAuthRole: backup, `+storeTarget+`}, serviceAccount: {annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::111122223333:role/bao"}}}`)
	if err := a.Client.Create(ctx, c); err != nil {
		t.Fatalf("the workload identity keys were refused: %v", err)
	}
	r, err := newReconciler(admin, admin, events.NewFakeRecorder(50))
	if err != nil {
		t.Fatal(err)
	}
	reconcile := reconcileFunc(t, ctx, r, c)
	for range 3 { // the first passes add the finalizer and the PKI
		reconcile()
	}
	want := map[string][2]string{
		c.ServiceAccountName():        {"azure.workload.identity/client-id", "00000000-0000-0000-0000-000000000001"},
		c.BackupServiceAccountName():  {"eks.amazonaws.com/role-arn", "arn:aws:iam::111122223333:role/bao"},
		c.RestoreServiceAccountName(): {"eks.amazonaws.com/role-arn", "arn:aws:iam::111122223333:role/bao"},
	}
	for name, kv := range want {
		sa := &corev1.ServiceAccount{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sa); err != nil {
			t.Fatalf("ServiceAccount %s: %v", name, err)
		}
		if sa.Annotations[kv[0]] != kv[1] {
			t.Errorf("ServiceAccount %s annotations %v, want %s=%s", name, sa.Annotations, kv[0], kv[1])
		}
	}
	sts := &appsv1.StatefulSet{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.StatefulSetName()}, sts); err != nil {
		t.Fatal(err)
	}
	if got := sts.Spec.Template.Labels[delegated.AzureUseLabel]; got != "true" {
		t.Errorf("server pods' label %s=%q, want true", delegated.AzureUseLabel, got)
	}
}
