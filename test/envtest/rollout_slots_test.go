package envtest_test

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/upgrade"
)

// newWrapper is a bao-wrapper image of another version, which the
// operator's --wrapper-image puts into every cluster's template: a
// template change no spec asked for.
const newWrapper = "registry.example/bao-wrapper:1.0.1"

// fleet is clusters of one operator process: one reconciler, one
// rollout-slot count, a fake OpenBao per cluster.
type fleet struct {
	t        *testing.T
	clusters []*rollout
	r        *controllers.OpenBaoClusterReconciler
}

func newFleet(t *testing.T, prefix string, n int) *fleet {
	f := &fleet{t: t}
	for i := range n {
		ro := newRollout(t, fmt.Sprintf("%s-%c", prefix, 'a'+i), 3)
		ro.revision = func(sts *appsv1.StatefulSet) string {
			img := sts.Spec.Template.Spec.Containers[0].Image
			rev := "rev-" + img[strings.LastIndex(img, ":")+1:]
			for _, c := range sts.Spec.Template.Spec.InitContainers {
				if c.Image == newWrapper {
					rev += "-w101"
				}
			}
			return rev
		}
		f.clusters = append(f.clusters, ro)
	}
	return f
}

// operator starts an operator process with the bao-wrapper image
// wrapper (empty: the default) and at most max operator-caused rollouts
// at once. A new process remembers nothing of the last one.
func (f *fleet) operator(wrapper string, max int) {
	f.t.Helper()
	r, err := newReconciler(k8s, k8s, events.NewFakeRecorder(500))
	if err != nil {
		f.t.Fatal(err)
	}
	if wrapper != "" {
		r.Operator.WrapperImage = wrapper
	}
	r.RolloutSlots = &upgrade.Slots{Max: max}
	r.OpenBao = func(o openbao.Options) (openbao.Client, error) {
		for _, ro := range f.clusters {
			if strings.Contains(o.ServerName, "."+ro.ns+".") {
				ro.dialled = append(ro.dialled, o)
				return ro.bao, nil
			}
		}
		return nil, fmt.Errorf("no fake OpenBao serves %s", o.ServerName)
	}
	for _, ro := range f.clusters {
		ro.r = r
	}
	f.r = r
}

// passAll runs a pass of every cluster, then plays the StatefulSet
// controller for each.
func (f *fleet) passAll() {
	for _, ro := range f.clusters {
		ro.pass()
	}
	for _, ro := range f.clusters {
		ro.kubeControllerManager()
	}
}

// rolling names the clusters whose rollout is under way.
func (f *fleet) rolling() []string {
	var out []string
	for _, ro := range f.clusters {
		if ro.cluster().Status.Upgrade != nil {
			out = append(out, ro.ns)
		}
	}
	return out
}

// expectWaiting: ro's operator-caused rollout waits for a slot held by
// holder, and nothing of its pods moved.
func (ro *rollout) expectWaiting(holder *rollout) {
	ro.t.Helper()
	ro.expect(ro.ns+" waits for a slot", 3, "-")
	for i := range 3 {
		if rev := ro.pod(i).Labels[appsv1.ControllerRevisionHashLabelKey]; rev != "rev-2.4.0" {
			ro.t.Fatalf("%s: bao-%d moved to %s while its rollout waited for a slot", ro.ns, i, rev)
		}
	}
	c := ro.cluster()
	up := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionUpgrading)
	want := types.NamespacedName{Namespace: holder.ns, Name: "bao"}.String()
	if up == nil || up.Reason != v1alpha1.ReasonWaitingForRolloutSlot || !strings.Contains(up.Message, want) {
		ro.t.Fatalf("%s: Upgrading %+v, want WaitingForRolloutSlot naming %s", ro.ns, up, want)
	}
	if d := findDegraded(c); d != nil && d.Reason == v1alpha1.ReasonWaitingForRolloutSlot {
		ro.t.Fatalf("%s: waiting for a slot made it Degraded: %+v", ro.ns, d)
	}
}

// rollToCompletion plays pods and leadership until ro's rollout is done.
func (ro *rollout) rollToCompletion() {
	ro.t.Helper()
	for range 12 {
		ro.pass()
		c := ro.cluster()
		if c.Status.Upgrade == nil {
			if up := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionUpgrading); up == nil || up.Reason != v1alpha1.ReasonUpgradeComplete {
				ro.t.Fatalf("%s: no rollout and Upgrading %+v", ro.ns, up)
			}
			return
		}
		if c.Status.Upgrade.Step == upgrade.StepStepDown {
			ro.moveLeader(0, 2)
		}
		ro.kubeControllerManager()
	}
	ro.t.Fatalf("%s: the rollout did not complete: %+v", ro.ns, ro.cluster().Status.Upgrade)
}

// TestAnOperatorUpgradeRollsOneClusterAtATime: a change of every
// cluster's template by the operator alone (a new --wrapper-image, as an
// operator upgrade may bring) rolls one cluster at a time, also across an
// operator restart mid-rollout; the next starts when the first completes;
// a cluster whose spec changed meanwhile is not held.
func TestAnOperatorUpgradeRollsOneClusterAtATime(t *testing.T) {
	f := newFleet(t, "slots", 3)
	a, b, c := f.clusters[0], f.clusters[1], f.clusters[2]
	f.operator("", 1)
	f.passAll()
	for _, ro := range f.clusters {
		ro.expect(ro.ns+" settled", 3, "-")
		if got := ro.cluster().Status.SettledGeneration; got != ro.cluster().Generation {
			t.Fatalf("%s: settledGeneration %d, want the generation %d", ro.ns, got, ro.cluster().Generation)
		}
	}

	f.operator(newWrapper, 1) // a new wrapper version: every template changes
	f.passAll()               // applied; the StatefulSets report the new revision
	f.passAll()
	if got := f.rolling(); len(got) != 1 || got[0] != a.ns {
		t.Fatalf("rolling %v, want only %s", got, a.ns)
	}
	if cause := a.cluster().Status.Upgrade.Cause; cause != v1alpha1.RolloutCauseOperator {
		t.Fatalf("%s: cause %q, want Operator", a.ns, cause)
	}
	b.expectWaiting(a)
	c.expectWaiting(a)

	f.operator(newWrapper, 1) // restarted mid-rollout: the slot is read back from a's status
	b.pass()
	c.pass()
	b.expectWaiting(a)
	c.expectWaiting(a)

	// A tenant changes c's spec: its rollout is its own and does not wait,
	// though the operator changed its template too.
	c.setVersion("2.4.1")
	c.pass()
	c.kubeControllerManager()
	c.pass()
	if up := c.cluster().Status.Upgrade; up == nil || up.Cause != v1alpha1.RolloutCauseSpec {
		t.Fatalf("%s: after a spec change, upgrade %+v; want a rollout of cause Spec under way", c.ns, up)
	}
	b.pass()
	b.expectWaiting(a)

	a.rollToCompletion()
	b.pass()
	if got := b.cluster().Status.Upgrade; got == nil || got.Cause != v1alpha1.RolloutCauseOperator {
		t.Fatalf("%s: after %s completed, upgrade %+v; want its operator-caused rollout started", b.ns, a.ns, got)
	}
	b.rollToCompletion()
	c.rollToCompletion()
	f.passAll()
	if got := f.rolling(); len(got) != 0 {
		t.Fatalf("rolling %v after every rollout completed", got)
	}
	for _, ro := range f.clusters {
		if key := (types.NamespacedName{Namespace: ro.ns, Name: "bao"}); f.r.RolloutSlots.Remembers(key) {
			t.Errorf("%s: a rollout slot is still claimed after its rollout completed", key)
		}
	}
}
