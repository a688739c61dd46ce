package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
)

// TestAClusterNeverTakesOverAnObjectItDidNotMake creates a cluster whose
// children's names are taken by the namespace's own NetworkPolicy and
// Service and a workload's StatefulSet: the operator applies nothing, says
// which objects are in the way (Degraded ChildNameTaken), leaves them as
// they were (no owner reference for the garbage collector to follow) and
// leaves them when the cluster is deleted (its finalizer deletes only its
// own StatefulSet). Before, a cluster named deny-all replaced the
// namespace's NetworkPolicy deny-all, and its deletion deleted it.
func TestAClusterNeverTakesOverAnObjectItDidNotMake(t *testing.T) {
	ctx := context.Background()
	policy := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: managedNamespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{}, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: managedNamespace},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "payments"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	// Someone else's workload of the StatefulSet's name: the finalizer,
	// which stops the cluster's servers, must not delete it.
	workload := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: managedNamespace},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "payments"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "payments"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "payments:1"}}},
			},
		},
	}
	taken := []client.Object{policy, service, workload}
	for _, obj := range taken {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	}
	c := newCluster(t, managedNamespace, "metadata: {name: deny-all}\nspec: {version: 2.4.0, replicas: 1}\n")
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "Degraded ChildNameTaken", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionDegraded)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonChildNameTaken {
			return fmt.Errorf("Degraded %s/%s: %s", cond.Status, cond.Reason, cond.Message)
		}
		for _, want := range []string{"NetworkPolicy deny-all exists", "Service deny-all exists", "StatefulSet deny-all exists", "delete or rename"} {
			if !strings.Contains(cond.Message, want) {
				t.Errorf("the condition %q does not say %q", cond.Message, want)
			}
		}
		return nil
	})
	got, err := childrenOf(ctx, managedNamespace, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > 0 {
		t.Errorf("%d children applied beside the taken names", len(got))
	}
	untouched := func(when string) {
		t.Helper()
		for _, want := range taken {
			live := want.DeepCopyObject().(client.Object)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(want), live); err != nil {
				t.Fatalf("%s: %T %s: %v", when, want, want.GetName(), err)
			}
			if live.GetResourceVersion() != want.GetResourceVersion() || len(live.GetOwnerReferences()) > 0 ||
				len(live.GetLabels()) > 0 || live.GetDeletionTimestamp() != nil {
				t.Errorf("%s: %T %s changed: resourceVersion %s -> %s, owners %v, labels %v", when, want, want.GetName(),
					want.GetResourceVersion(), live.GetResourceVersion(), live.GetOwnerReferences(), live.GetLabels())
			}
		}
	}
	untouched("while the cluster exists")

	if err := k8s.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "the cluster is gone", func() error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(c), &v1alpha1.OpenBaoCluster{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	untouched("after the cluster's deletion")
}

// TestAClusterNeverTakesAnotherClustersChild: a cluster named like
// another's child (bao-internal, bao's headless Service), which the
// webhook refuses but which may exist from before it or while it was
// away, does not take that child.
func TestAClusterNeverTakesAnotherClustersChild(t *testing.T) {
	ctx := context.Background()
	first := newCluster(t, managedNamespace, "metadata: {name: pair}\nspec: {version: 2.4.0, replicas: 1}\n")
	if err := k8s.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), first) })
	headless := &corev1.Service{}
	eventually(t, wait, "pair's headless Service", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: first.HeadlessServiceName()}, headless)
	})
	second := newCluster(t, managedNamespace, "metadata: {name: pair-internal}\nspec: {version: 2.4.0, replicas: 1}\n")
	if err := k8s.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), second) })
	eventually(t, wait, "Degraded ChildNameTaken", func() error {
		cond, err := condition(ctx, second, v1alpha1.ConditionDegraded)
		if err != nil {
			return err
		}
		if cond.Reason != v1alpha1.ReasonChildNameTaken || !strings.Contains(cond.Message, "Service pair-internal exists and is controlled by OpenBaoCluster pair") {
			return fmt.Errorf("Degraded %s/%s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	live := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(headless), live); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(live); ref == nil || ref.UID != first.UID || live.Labels[v1alpha1.LabelCluster] != "pair" {
		t.Errorf("pair's headless Service was taken: controller %v, labels %v", ref, live.Labels)
	}
}
