package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/admission"
	"github.com/openbao/operator/internal/delegated"
)

// attackerUser is issue 34's attacker tenant: in its namespace, Kubernetes'
// view role (no Secret) and the editor role the chart ships for the
// operator's kinds, nothing else.
const attackerUser = "e2e-attacker"

// TestAttackerTenantOnTheNode acts as the attacker tenant against the
// operator as the chart installs it on the node (tenancy mode, the
// platform's image policy allowing only the node's localhost images).
// Each finding of the issue that a tenant can try through the API is
// tried: each is refused at admission naming the field and the rule, or
// held by the controller with the object in the way named, and nothing
// the platform owns in the namespace changes, no Job or pod runs, no
// Secret is written.
func TestAttackerTenantOnTheNode(t *testing.T) {
	t.Parallel()
	cl := installOperator(t)
	ctx := context.Background()
	ns := createNamespace(ctx, t, cl, "attacker")
	attacker := attackerClient(ctx, t, cl, ns)
	platform := platformObjects(ctx, t, cl, ns)
	versions := resourceVersions(ctx, t, cl, platform)

	for i, tc := range []struct {
		finding, manifest, field, rule string
	}{
		{"2: another cluster's root token as the store credentials of the tenant's executor",
			`spec: {version: 2.4.0, image: localhost/openbao, backup: {jwtAuthRole: backup, executorImage: "localhost/exec:1", target: {endpoint: "https://s3.example.com", bucket: backups, credentialsSecretRef: {name: prod-root-token}}}}`,
			"spec.backup.target.credentialsSecretRef", admission.RuleManagedSecret},
		{"2: a Secret the tenant may not read as its store credentials",
			`spec: {version: 2.4.0, image: localhost/openbao, backup: {jwtAuthRole: backup, target: {endpoint: "https://s3.example.com", bucket: backups, credentialsSecretRef: {name: payments-db}}}}`,
			"spec.backup.target.credentialsSecretRef", admission.RuleAuthorRights},
		{"3: an image from a repository the platform did not allow",
			`spec: {version: 2.4.0, image: "evil.example/bao"}`, "spec.image", "is not from a repository the platform allows"},
		{"8: a toleration the tenant could not put on a pod itself",
			`spec: {version: 2.4.0, image: localhost/openbao, tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists}]}`,
			"spec.tolerations[0].key", delegated.Rule},
		{"8: a Service annotation the tenant could not put on a Service itself",
			`spec: {version: 2.4.0, image: localhost/openbao, service: {annotations: {service.beta.kubernetes.io/aws-load-balancer-internal: "false"}}}`,
			"spec.service.annotations[service.beta.kubernetes.io/aws-load-balancer-internal]", delegated.Rule},
		{"deletion: a policy that deletes volumes and Secrets the tenant may not delete",
			`spec: {version: 2.4.0, image: localhost/openbao, deletionPolicy: DeleteAll}`, "spec.deletionPolicy", admission.RuleAuthorRights},
	} {
		t.Run(tc.finding, func(t *testing.T) {
			// A name of its own: a row that is wrongly admitted must not
			// make the next fail for its name.
			obj := clusterManifest(t, ns, fmt.Sprintf("refused-%d", i), tc.manifest)
			err := attacker.Create(ctx, obj)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field+":") || !strings.Contains(err.Error(), tc.rule) {
				t.Fatalf("got %v, want a refusal naming %s and the rule %q", err, tc.field, tc.rule)
			}
		})
	}
	t.Run("1: a cluster named like the platform's NetworkPolicy takes nothing over", func(t *testing.T) {
		taken := clusterManifest(t, ns, "deny-all", `spec: {version: 2.4.0, image: localhost/openbao, replicas: 1}`)
		if err := attacker.Create(ctx, taken); err != nil {
			t.Fatalf("the attacker may create a cluster in its namespace: %v", err)
		}
		waitFor(ctx, t, time.Minute, "Degraded ChildNameTaken naming NetworkPolicy deny-all", func() (bool, string) {
			cond := statusCondition(clusterStatus(ctx, t, cl, ns, "deny-all"), v1alpha1.ConditionDegraded)
			return cond["reason"] == v1alpha1.ReasonChildNameTaken &&
				strings.Contains(fmt.Sprint(cond["message"]), "NetworkPolicy deny-all"), fmt.Sprint(cond)
		})
		if err := attacker.Delete(ctx, taken); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, time.Minute, "the cluster deny-all gone", func() (bool, string) {
			err := cl.Get(ctx, client.ObjectKeyFromObject(taken), taken.DeepCopy())
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	})

	changed := resourceVersions(ctx, t, cl, platform)
	for key, v := range versions {
		if changed[key] != v {
			t.Errorf("%s changed (resourceVersion %s, was %s)", key, changed[key], v)
		}
	}
	for what, list := range map[string]client.ObjectList{
		"Jobs": &batchv1.JobList{}, "pods": &corev1.PodList{}, "StatefulSets": &appsv1.StatefulSetList{},
	} {
		if err := cl.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if n := len(listItems(t, list)); n > 0 {
			t.Errorf("%d %s in the attacker's namespace, want none", n, what)
		}
	}
	secrets := &corev1.SecretList{}
	if err := cl.List(ctx, secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		// The cluster deny-all's own seal key and CA, which its deletion
		// policy (Retain) keeps, are the only Secrets the operator writes.
		own := strings.HasPrefix(s.Name, "deny-all-") && s.Labels[v1alpha1.LabelManagedBy] == v1alpha1.ManagedByValue &&
			s.Labels[v1alpha1.LabelCluster] == "deny-all"
		if _, platform := versions["Secret/"+s.Name]; !platform && !own {
			t.Errorf("Secret %s was written in the attacker's namespace", s.Name)
		}
	}
}

// attackerClient binds view and the chart's editor role to attackerUser
// in ns, and acts as that user.
func attackerClient(ctx context.Context, t *testing.T, cl client.Client, ns string) client.Client {
	t.Helper()
	for _, role := range []string{"view", "openbao-operator-openbao-editor"} {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "attacker-" + role, Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: attackerUser}}}
		if err := cl.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := node.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: attackerUser, Groups: []string{"system:authenticated"}}
	attacker, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// RBAC caches bindings briefly: wait until the attacker may create.
	waitFor(ctx, t, 30*time.Second, "the attacker's bindings in force", func() (bool, string) {
		err := attacker.Create(ctx, clusterManifest(t, ns, "probe", `spec: {version: 2.4.0, image: localhost/openbao}`), client.DryRunAll)
		return err == nil, fmt.Sprint(err)
	})
	return webhookRetrying{attacker}
}

// platformObjects are what the platform put in the namespace: its
// default-deny NetworkPolicy, a Service, an application's Secret, and a
// Secret the operator manages for another cluster, prod.
func platformObjects(ctx context.Context, t *testing.T, cl client.Client, ns string) []client.Object {
	t.Helper()
	objs := []client.Object{
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: ns},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: ns},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "payments-db", Namespace: ns}, StringData: map[string]string{"password": "e2e-not-a-password"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "prod-root-token", Namespace: ns,
			Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelCluster: "prod"}},
			StringData: map[string]string{"token": "e2e-not-a-token"}},
	}
	for _, obj := range objs {
		if err := breakGlassClient(t).Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	return objs
}

func resourceVersions(ctx context.Context, t *testing.T, cl client.Client, objs []client.Object) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, obj := range objs {
		kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1.")
		if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatalf("%s/%s: %v", kind, obj.GetName(), err)
		}
		out[kind+"/"+obj.GetName()] = obj.GetResourceVersion()
	}
	return out
}

func clusterManifest(t *testing.T, ns, name, spec string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(spec), &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetAPIVersion("openbao.org/v1alpha1")
	u.SetKind("OpenBaoCluster")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func statusCondition(status map[string]any, condType string) map[string]any {
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == condType {
			return m
		}
	}
	return nil
}

func listItems(t *testing.T, list client.ObjectList) []any {
	t.Helper()
	switch l := list.(type) {
	case *batchv1.JobList:
		return anySlice(l.Items)
	case *corev1.PodList:
		return anySlice(l.Items)
	case *appsv1.StatefulSetList:
		return anySlice(l.Items)
	}
	t.Fatalf("unknown list %T", list)
	return nil
}

func anySlice[T any](items []T) []any {
	out := make([]any, len(items))
	for i := range items {
		out[i] = items[i]
	}
	return out
}
