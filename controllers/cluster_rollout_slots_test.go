package controllers

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/upgrade"
)

func rollingCluster(ns string, cause v1alpha1.RolloutCause, deleting bool) *v1alpha1.OpenBaoCluster {
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bao"}}
	if cause != "" {
		c.Status.Upgrade = &v1alpha1.UpgradeStatus{TargetVersion: "2.4.0", Cause: cause}
	}
	if deleting {
		now := metav1.Now()
		c.Finalizers, c.DeletionTimestamp = []string{"openbao.org/finalizer"}, &now
	}
	return c
}

// TestTheSlotsHeldAreTheOperatorCausedRolloutsOfClustersNotBeingDeleted:
// what the cache lists decides who holds a slot; a spec-caused rollout,
// one an older operator started (no cause), and one of a cluster being
// deleted (abandoned) hold none.
func TestTheSlotsHeldAreTheOperatorCausedRolloutsOfClustersNotBeingDeleted(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	k := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		rollingCluster("holder", v1alpha1.RolloutCauseOperator, false),
		rollingCluster("tenant", v1alpha1.RolloutCauseSpec, false),
		rollingCluster("older", "", false),
		rollingCluster("deleted", v1alpha1.RolloutCauseOperator, true),
	).Build()
	r := &OpenBaoClusterReconciler{Client: k, RolloutSlots: &upgrade.Slots{Max: 1}}
	want := rollingCluster("next", "", false)
	v, err := r.claimSlot(context.Background(), want, v1alpha1.RolloutCauseOperator, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.Holders, []string{"holder/bao"}) {
		t.Fatalf("holders %v, want only holder/bao", v.Holders)
	}
	r.RolloutSlots.Max = 2
	if v, _ := r.claimSlot(context.Background(), want, v1alpha1.RolloutCauseOperator, false); !v.OK() {
		t.Fatalf("with 2 slots: waits for %v", v.Holders)
	}
	if v, _ := r.claimSlot(context.Background(), want, v1alpha1.RolloutCauseSpec, false); !v.OK() {
		t.Fatalf("a spec-caused rollout waits for %v", v.Holders)
	}
}

func TestRenderedGenerationIsTheAnnotationOrTheLastObservedGeneration(t *testing.T) {
	sts := func(a map[string]string) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Annotations: a}}
	}
	for _, tc := range []struct {
		name string
		sts  *appsv1.StatefulSet
		want int64
	}{
		{"the annotation says it", sts(map[string]string{v1alpha1.AnnotationRenderedGeneration: "5"}), 5},
		{"rendered by an operator before the annotation: the generation the last pass observed", sts(nil), 4},
		{"an annotation that is not a number is not trusted", sts(map[string]string{v1alpha1.AnnotationRenderedGeneration: "x"}), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := renderedGeneration(tc.sts, 4); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}
