package envtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/delegated"
)

// platformFields is the allow-list the tests install: the platform's own
// priority class and dedicated nodes, nginx's annotations, the internal
// ingress class.
var platformFields = delegated.Policy{
	PriorityClasses:    []string{"openbao"},
	TolerationKeys:     []string{"dedicated"},
	NodeSelectorKeys:   []string{"topology.kubernetes.io/zone"},
	AnnotationPrefixes: []string{"nginx.ingress.kubernetes.io/"},
	IngressClasses:     []string{"internal"},
}

// TestTheAttackerCannotHaveTheOperatorScheduleOrExposeWhatItCouldNotItself
// is issue 34's item 8: the attacker tenant (view and the editor role in
// one namespace, acting through its own client) asks the operator for a
// toleration of the control plane's taint, a system priority class, a node
// selector, a public load balancer and an Ingress annotation it could not
// set on a Pod, Service or Ingress of its own (it may create none). Each
// is refused naming the field, the rule and what the platform allows, and
// nothing is stored; values within the allow-list pass, and so do values
// outside it for a user who may create that kind itself.
func TestTheAttackerCannotHaveTheOperatorScheduleOrExposeWhatItCouldNotItself(t *testing.T) {
	ctx := context.Background()
	admin, adminCfg := startWebhookServerWith(t, controllers.Platform{Fields: platformFields})
	a := NewAttackerOn(t, adminCfg, admin, "attacker-fields")
	ns := a.Namespace
	refused := []struct{ name, spec, field string }{
		{"a toleration of the control plane's taint", `tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]`,
			"spec.tolerations[0].key"},
		{"a toleration of every taint", `tolerations: [{operator: Exists}]`, "spec.tolerations[0].key"},
		{"a system priority class", `priorityClassName: system-cluster-critical`, "spec.priorityClassName"},
		{"a node selector of the control plane", `nodeSelector: {node-role.kubernetes.io/control-plane: ""}`,
			"spec.nodeSelector[node-role.kubernetes.io/control-plane]"},
		{"a public load balancer's annotation", `service: {type: LoadBalancer, annotations: {service.beta.kubernetes.io/aws-load-balancer-scheme: internet-facing}}`,
			"spec.service.annotations[service.beta.kubernetes.io/aws-load-balancer-scheme]"},
		{"an Ingress annotation outside the platform's prefixes", `ingress: {enabled: true, host: bao.example, className: internal, annotations: {cert-manager.io/cluster-issuer: letsencrypt}}`,
			"spec.ingress.annotations[cert-manager.io/cluster-issuer]"},
		{"another ingress class", `ingress: {enabled: true, host: bao.example, className: public}`, "spec.ingress.className"},
	}
	for i, tc := range refused {
		t.Run("the attacker is refused "+tc.name, func(t *testing.T) {
			c := newCluster(t, ns, "metadata: {name: refused-"+itoa(i)+"}\nspec: {version: 2.4.0, "+tc.spec+"}")
			err := a.Client.Create(ctx, c)
			expectRefused(t, err, tc.field, delegated.Rule)
			if !strings.Contains(err.Error(), "--allowed-") || !strings.Contains(err.Error(), a.User+" may not create") {
				t.Errorf("the refusal does not name the allow-list's flag and the user: %v", err)
			}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(c), &v1alpha1.OpenBaoCluster{}); !apierrors.IsNotFound(err) {
				t.Errorf("the refused cluster was stored: %v", err)
			}
		})
	}
	t.Run("the attacker may set what the platform allows", func(t *testing.T) {
		c := newCluster(t, ns, `metadata: {name: allowed}
spec:
  version: 2.4.0
  priorityClassName: openbao
  tolerations: [{key: dedicated, value: openbao, effect: NoSchedule}]
  nodeSelector: {topology.kubernetes.io/zone: a}
  ingress: {enabled: true, host: bao.example, className: internal, annotations: {nginx.ingress.kubernetes.io/ssl-passthrough: "true"}}`)
		if err := a.Client.Create(ctx, c); err != nil {
			t.Fatalf("refused: %v", err)
		}
	})
	t.Run("a user who may create Pods, Services and Ingresses sets what it could set on its own", func(t *testing.T) {
		editor := "editor@" + ns
		bindUserOn(t, admin, ns, editor, "edit")
		waitUntil(t, 30*time.Second, editor+"'s binding in force", func() bool {
			return userAllowedOn(t, admin, editor, ns, "create", "", "pods", "")
		})
		c := newCluster(t, ns, "metadata: {name: by-editor}\nspec: {version: 2.4.0, "+refused[0].spec+", priorityClassName: high, "+
			"service: {annotations: {service.beta.kubernetes.io/aws-load-balancer-internal: \"true\"}}}")
		if err := impersonate(t, adminCfg, editor).Create(ctx, c); err != nil {
			t.Fatalf("refused: %v", err)
		}
	})
	t.Run("the attacker keeps the values an admin set, and cannot add its own", func(t *testing.T) {
		testAttackerUpdatesAnAdminsCluster(t, admin, a)
	})
	t.Run("the drill copy carries its source's values", func(t *testing.T) {
		testDrillCopyCarriesItsSourcesFields(t, admin, adminCfg, ns)
	})
}

// testAttackerUpdatesAnAdminsCluster: a cluster the admin created with a
// toleration outside the allow-list can be relabelled by the attacker, but
// not given a priority class; the refused update changes nothing.
func testAttackerUpdatesAnAdminsCluster(t *testing.T, admin client.Client, a *Attacker) {
	ctx := context.Background()
	c := newCluster(t, a.Namespace, "metadata: {name: by-admin}\nspec: {version: 2.4.0, tolerations: [{key: gpu, operator: Exists}]}")
	if err := admin.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	mine := &v1alpha1.OpenBaoCluster{}
	if err := a.Client.Get(ctx, client.ObjectKeyFromObject(c), mine); err != nil {
		t.Fatal(err)
	}
	mine.Labels = map[string]string{"team": "a"}
	if err := a.Client.Update(ctx, mine); err != nil {
		t.Fatalf("relabelling a cluster whose toleration the admin set: %v", err)
	}
	before := mine.ResourceVersion
	mine.Spec.PriorityClassName = "system-node-critical"
	expectRefused(t, a.Client.Update(ctx, mine), "spec.priorityClassName", delegated.Rule)
	stored := &v1alpha1.OpenBaoCluster{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(c), stored); err != nil || stored.ResourceVersion != before || stored.Spec.PriorityClassName != "" {
		t.Errorf("the refused update changed the cluster: %v, resourceVersion %s (was %s)", err, stored.ResourceVersion, before)
	}
}

// testDrillCopyCarriesItsSourcesFields: the operator's restore-drill copy
// (backup.DrillCopyFor) copies its source's scheduling, which the author
// of the copy did not set and may not set itself; a cluster that only
// claims to be the copy (not controlled by the source) is refused. The
// author here may create clusters, read the seal key and delete claims and
// Secrets (the copy's DeleteAll), as the operator does, but not create
// Pods.
func testDrillCopyCarriesItsSourcesFields(t *testing.T, admin client.Client, adminCfg *rest.Config, ns string) {
	ctx := context.Background()
	source := newCluster(t, ns, "metadata: {name: source}\nspec: {version: 2.4.0, priorityClassName: high, "+
		`backup: {jwtAuthRole: backup, `+storeTarget+`}}}`)
	if err := admin.Create(ctx, source); err != nil {
		t.Fatal(err)
	}
	drills := "drills@" + ns
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "drills", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"openbaoclusters"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"delete"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "drills", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "drills"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: drills}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 30*time.Second, drills+"'s binding in force", func() bool {
		return userAllowedOn(t, admin, drills, ns, "create", v1alpha1.GroupVersion.Group, "openbaoclusters", "")
	})
	as := impersonate(t, adminCfg, drills)
	b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "source-1", Namespace: ns}}
	b.Status.Key, b.Status.SHA256 = ns+"/source/1.snap", strings.Repeat("a", 64)
	forged := backup.DrillCopyFor(source, b)
	forged.OwnerReferences = nil
	expectRefused(t, as.Create(ctx, forged), "spec.priorityClassName", delegated.Rule)
	if err := as.Create(ctx, backup.DrillCopyFor(source, b)); err != nil {
		t.Fatalf("the drill's own copy was refused: %v", err)
	}
}

// TestWithoutTheWebhookTheControllerHoldsTheAllowList: a cluster stored
// with no webhook to ask (the operator runs without it, HeldFields set)
// whose toleration is outside the allow-list is held: Degraded
// FieldNotAllowed naming the field and the rule, nothing applied; within
// it, the cluster goes on.
func TestWithoutTheWebhookTheControllerHoldsTheAllowList(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "heldfields")
	c := newCluster(t, "heldfields", `
metadata: {name: bao}
spec: {version: 2.4.0, tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists}]}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(20)
	r, err := newReconciler(k8s, k8s, rec)
	if err != nil {
		t.Fatal(err)
	}
	held := platformFields
	r.HeldFields = &held
	reconcile := reconcileFunc(t, ctx, r, c)
	reconcile()
	d := findDegraded(latestCluster(t, c))
	if d == nil || d.Status != metav1.ConditionTrue || d.Reason != v1alpha1.ReasonFieldNotAllowed ||
		!strings.Contains(d.Message, "spec.tolerations[0].key") || !strings.Contains(d.Message, delegated.Rule) {
		t.Fatalf("Degraded %+v, want True FieldNotAllowed naming spec.tolerations[0].key", d)
	}
	for _, obj := range []client.Object{&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: c.StatefulSetName()}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.TLSCASecretName()}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.UnsealKeySecretName()}}} {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "heldfields", Name: obj.GetName()}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s exists for a held cluster (%v)", obj, obj.GetName(), err)
		}
	}
	assertEvents(t, rec, v1alpha1.ReasonFieldNotAllowed)

	latest := latestCluster(t, c)
	latest.Spec.Tolerations[0].Key = "dedicated"
	if err := k8s.Update(ctx, latest); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if got := stsReplicas(t, "heldfields", c.StatefulSetName()); got != 1 {
		t.Fatalf("the cluster within the allow-list: %d replicas, want the bootstrap's 1", got)
	}
}
