package envtest_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/test/testbin"
)

const (
	lockedNamespace = "locked"
	operatorUser    = "system:serviceaccount:openbao-operator-system:openbao-operator-controller-manager"
	breakGlassGroup = "openbao-operator:break-glass"
)

// TestManagedObjectsAreLockedToTheOperator installs the lock of
// config/admission and sends requests as the identities it tells apart,
// through impersonation. Everyone impersonated is also in system:masters:
// RBAC lets them all, so whatever is refused is refused by the policy.
func TestManagedObjectsAreLockedToTheOperator(t *testing.T) {
	ctx := context.Background()
	installLock(t)
	operator := as(t, operatorUser)
	alice := as(t, "alice")
	breakGlass := as(t, "bob", breakGlassGroup)
	gc := as(t, "system:serviceaccount:kube-system:generic-garbage-collector")
	nsController := as(t, "system:serviceaccount:kube-system:namespace-controller")
	// A ServiceAccount of kube-system that is none of the controllers the
	// lock names: any workload deployed there may run as one.
	otherKubeSystem := as(t, "system:serviceaccount:kube-system:default")
	daemonSets := as(t, "system:serviceaccount:kube-system:daemon-set-controller")

	// The API server loads new policies asynchronously: probe until it
	// refuses (a delete: the operator's create may pass either way).
	probe := managedConfigMap("probe")
	if err := operator.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the lock in force", func() bool {
		err := alice.Delete(ctx, probe)
		if err == nil {
			probe = managedConfigMap("probe")
			_ = operator.Create(ctx, probe)
		}
		return apierrors.IsForbidden(err)
	})

	update := func(c client.Client, obj client.Object) error {
		obj.SetAnnotations(map[string]string{"edited": "by hand"})
		return c.Update(ctx, obj)
	}
	del := func(c client.Client, obj client.Object) error { return c.Delete(ctx, obj) }
	stripLabels := func(c client.Client, obj client.Object) error {
		obj.SetLabels(nil)
		return c.Update(ctx, obj)
	}
	orphan := func(c client.Client, obj client.Object) error {
		obj.SetOwnerReferences(nil)
		return c.Update(ctx, obj)
	}
	cases := map[string]lockCase{
		"an ordinary user edits the seal key":            {who: alice, fixture: managedSecret, req: update, refused: "update"},
		"an ordinary user deletes the StatefulSet":       {who: alice, fixture: managedStatefulSet, req: del, refused: "delete"},
		"an ordinary user strips the labels off":         {who: alice, fixture: managedConfigMap, req: stripLabels, refused: "update"},
		"an ordinary user forges a managed Secret":       {who: alice, create: managedSecret("forged"), refused: "create"},
		"an ordinary user labels a Secret of theirs":     {who: alice, create: labelled(plainSecret("adopted"), v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue), refused: "create"},
		"the garbage collector may not create":           {who: gc, create: managedSecret("gc-made"), refused: "create"},
		"the operator creates":                           {who: operator, create: managedSecret("made")},
		"the operator updates":                           {who: operator, fixture: managedStatefulSet, req: update},
		"the operator deletes":                           {who: operator, fixture: managedSecret, req: del},
		"break glass edits the seal key":                 {who: breakGlass, fixture: managedSecret, req: update},
		"break glass deletes the StatefulSet":            {who: breakGlass, fixture: managedStatefulSet, req: del},
		"break glass creates a managed Secret":           {who: breakGlass, create: managedSecret("repaired")},
		"the garbage collector deletes an owned Service": {who: gc, fixture: managedService, req: del},
		"the garbage collector orphans an object":        {who: gc, fixture: managedService, req: orphan},
		"the namespace controller empties a namespace":   {who: nsController, fixture: managedSecret, req: del},
		"kube-system's default ServiceAccount deletes the seal key": {
			who: otherKubeSystem, fixture: managedSecret, req: del, refused: "delete"},
		"kube-system's default ServiceAccount edits the StatefulSet": {
			who: otherKubeSystem, fixture: managedStatefulSet, req: update, refused: "update"},
		"a controller the lock does not name deletes a managed Service": {
			who: daemonSets, fixture: managedService, req: del, refused: "delete"},
		"an ordinary user edits an unlabelled Secret":   {who: alice, fixture: plainSecret, req: update},
		"an ordinary user deletes an unlabelled Secret": {who: alice, fixture: plainSecret, req: del},
		"an ordinary user deletes a cluster's pod":      {who: alice, fixture: managedPod, req: del},
		"StatefulSet status is written as before": {who: alice, fixture: managedStatefulSet, req: func(c client.Client, obj client.Object) error {
			obj.(*appsv1.StatefulSet).Status.ObservedGeneration = 1
			return c.Status().Update(ctx, obj)
		}},
	}
	for _, kind := range []func(string) client.Object{managedService, managedServiceAccount, managedRole, managedRoleBinding,
		managedBudget, managedNetworkPolicy} {
		name := typeName(kind("x"))
		cases["an ordinary user deletes a managed "+name] = lockCase{who: alice, fixture: kind, req: del, refused: "delete"}
	}
	i := 0
	for name, tc := range cases {
		i++
		var err error
		var obj client.Object
		if tc.create != nil {
			obj = tc.create
			err = tc.who.Create(ctx, obj)
		} else {
			obj = tc.fixture(fmt.Sprintf("case-%d", i))
			if cerr := operator.Create(ctx, obj); cerr != nil {
				t.Fatalf("%s: the operator creates the fixture: %v", name, cerr)
			}
			err = tc.req(tc.who, obj)
		}
		checkLockAnswer(t, name, obj, err, tc.refused)
	}
}

// lockCase is one request to the lock.
type lockCase struct {
	who     client.Client
	fixture func(name string) client.Object // created by the operator, then req sent on it
	create  client.Object                   // created by who instead, when set
	req     func(c client.Client, obj client.Object) error
	refused string // the request's operation in the refusal; "" when it must pass
}

// checkLockAnswer checks that a request passed, or was refused by the lock
// with a message saying what, who may and how to break glass.
func checkLockAnswer(t *testing.T, name string, obj client.Object, err error, refused string) {
	t.Helper()
	if refused == "" {
		if err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
		return
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("%s: got %v, want a refusal", name, err)
		return
	}
	for _, want := range []string{
		"/" + obj.GetName() + " is managed by the OpenBao operator",
		"only the operator (" + operatorUser + ") may " + refused + " it",
		"a member of the group " + breakGlassGroup,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: refusal %q does not say %q", name, err, want)
		}
	}
}

// installLock creates the lock from config/admission with its binding
// narrowed to lockedNamespace: the suite's manager writes managed objects
// elsewhere as the test user, not as the operator's ServiceAccount.
func installLock(t *testing.T) {
	t.Helper()
	root, _ := testbin.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "config", "admission", "managed-objects.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	policy, binding := &admissionv1.ValidatingAdmissionPolicy{}, &admissionv1.ValidatingAdmissionPolicyBinding{}
	if err := dec.Decode(policy); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(binding); err != nil {
		t.Fatal(err)
	}
	binding.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"kubernetes.io/metadata.name": lockedNamespace}}}
	createNamespace(t, lockedNamespace)
	for _, obj := range []client.Object{policy, binding} {
		if err := k8s.Create(context.Background(), obj); err != nil {
			t.Fatalf("create %s: %v", obj.GetName(), err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	}
}

// as is a client acting as user in groups, and in system:masters.
func as(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:masters")}
	cl, err := client.New(c, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func typeName(obj client.Object) string {
	gvks, _, _ := scheme.ObjectKinds(obj)
	return gvks[0].Kind
}

func managedMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: lockedNamespace, Labels: map[string]string{
		v1alpha1.LabelCluster: "bao", v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		v1alpha1.LabelAppName: v1alpha1.AppName, v1alpha1.LabelAppInstance: "bao"}}
}

func labelled(obj client.Object, key, value string) client.Object {
	obj.SetLabels(map[string]string{key: value})
	return obj
}

func plainSecret(name string) client.Object {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: lockedNamespace}}
}

func managedSecret(name string) client.Object {
	// The cluster label alone marks it: a seal key adopted by hand has no other.
	m := managedMeta(name)
	m.Labels = map[string]string{v1alpha1.LabelCluster: "bao"}
	return &corev1.Secret{ObjectMeta: m, Data: map[string][]byte{"key": []byte("not a key")}}
}

func managedConfigMap(name string) client.Object {
	return &corev1.ConfigMap{ObjectMeta: managedMeta(name)}
}

func managedService(name string) client.Object {
	m := managedMeta(name)
	// Owned by something, as the chart's objects are by their cluster.
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "00000000-0000-0000-0000-000000000001"}}
	return &corev1.Service{ObjectMeta: m, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8200}}}}
}

func managedServiceAccount(name string) client.Object {
	return &corev1.ServiceAccount{ObjectMeta: managedMeta(name)}
}

func managedRole(name string) client.Object { return &rbacv1.Role{ObjectMeta: managedMeta(name)} }

func managedRoleBinding(name string) client.Object {
	return &rbacv1.RoleBinding{ObjectMeta: managedMeta(name),
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}
}

func managedBudget(name string) client.Object {
	return &policyv1.PodDisruptionBudget{ObjectMeta: managedMeta(name), Spec: policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelAppInstance: "bao"}}}}
}

func managedNetworkPolicy(name string) client.Object {
	return &networkingv1.NetworkPolicy{ObjectMeta: managedMeta(name)}
}

func managedPod(name string) client.Object {
	return &corev1.Pod{ObjectMeta: managedMeta(name), Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "openbao", Image: "openbao/openbao:2.4.0"}}}}
}

func managedStatefulSet(name string) client.Object {
	m := managedMeta(name)
	selector := map[string]string{v1alpha1.LabelAppInstance: name}
	return &appsv1.StatefulSet{ObjectMeta: m, Spec: appsv1.StatefulSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: selector},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: selector}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "openbao", Image: "openbao/openbao:2.4.0"}}}},
	}}
}
