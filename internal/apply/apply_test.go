package apply_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/apply"
)

var (
	serviceAccountGVK = schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}
	networkPolicyGVK  = schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}
)

func newApplier(t *testing.T, objs ...client.Object) (*apply.Applier, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	return apply.New(apply.Options{Client: c, Cache: c, Live: c, FieldManager: v1alpha1.FieldManager}), c
}

// renderedChild is a rendered object as the chart labels it.
func renderedChild(gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	u := rendered(gvk, name)
	u.SetLabels(map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelCluster: "bao"})
	return u
}

func TestApplyTouchesNothingWhenOneNameIsTaken(t *testing.T) {
	ctx := context.Background()
	platform := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "ns"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	a, c := newApplier(t, platform)
	before := &networkingv1.NetworkPolicy{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(platform), before); err != nil {
		t.Fatal(err)
	}

	_, err := a.Apply(ctx, owner(), []*unstructured.Unstructured{
		renderedChild(serviceAccountGVK, "bao"), renderedChild(networkPolicyGVK, "bao"),
	})

	var taken *apply.TakenError
	if !errors.As(err, &taken) || len(taken.Refusals) != 1 || taken.Refusals[0].Kind != "NetworkPolicy" || taken.Refusals[0].Name != "bao" {
		t.Fatalf("err = %v, want the NetworkPolicy bao refused", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "bao"}, &corev1.ServiceAccount{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ServiceAccount, rendered before the taken name, was applied (get: %v)", err)
	}
	after := &networkingv1.NetworkPolicy{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(platform), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion || len(after.OwnerReferences) > 0 {
		t.Errorf("the platform's NetworkPolicy changed: resourceVersion %s -> %s, owners %v",
			before.ResourceVersion, after.ResourceVersion, after.OwnerReferences)
	}
}

func TestApplyCreatesFreeNamesAndReappliesItsOwn(t *testing.T) {
	ctx := context.Background()
	a, c := newApplier(t)
	objs := func() []*unstructured.Unstructured {
		return []*unstructured.Unstructured{renderedChild(serviceAccountGVK, "bao"), renderedChild(configMapGVK, "bao-config")}
	}
	if _, err := a.Apply(ctx, owner(), objs()); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	sa := &corev1.ServiceAccount{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "bao"}, sa); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(sa); ref == nil || ref.UID != owner().UID {
		t.Fatalf("the ServiceAccount's controller is %v, want the cluster", ref)
	}
	// A new Applier remembers nothing: it finds its own children by
	// their controller and label, and applies over them.
	again := apply.New(apply.Options{Client: c, Cache: c, Live: c, FieldManager: v1alpha1.FieldManager})
	if _, err := again.Apply(ctx, owner(), objs()); err != nil {
		t.Fatalf("second apply over the cluster's own children: %v", err)
	}
}

func TestApplyRefusesAnotherClustersChild(t *testing.T) {
	ctx := context.Background()
	a, c := newApplier(t)
	other := owner()
	other.Name, other.UID = "bao-other", "other-uid"
	if _, err := a.Apply(ctx, other, []*unstructured.Unstructured{renderedChild(serviceAccountGVK, "shared")}); err != nil {
		t.Fatal(err)
	}
	_, err := a.Apply(ctx, owner(), []*unstructured.Unstructured{renderedChild(serviceAccountGVK, "shared")})
	var taken *apply.TakenError
	if !errors.As(err, &taken) {
		t.Fatalf("err = %v, want the other cluster's ServiceAccount refused", err)
	}
	sa := &corev1.ServiceAccount{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "shared"}, sa); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(sa); ref == nil || ref.UID != "other-uid" {
		t.Fatalf("the ServiceAccount's controller became %v", ref)
	}
}
