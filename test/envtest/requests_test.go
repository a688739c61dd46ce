package envtest_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/pki"
)

// TestARestartRequestRollsEveryServerOnceThroughTheRollout:
// spec.restartRequest changes the pod template once, and the servers roll
// through the rollout (a Spec rollout, the active server stepped down
// last), across an operator restart in the middle; status.restart records
// the request and when it completed. The same value, or the field
// cleared, changes nothing.
func TestARestartRequestRollsEveryServerOnceThroughTheRollout(t *testing.T) {
	ro := newRollout(t, "restart-request", 3)
	ro.revision = func(sts *appsv1.StatefulSet) string {
		if r := sts.Spec.Template.Annotations[v1alpha1.AnnotationRestartRequest]; r != "" {
			return "rev-2.4.0-" + r
		}
		return "rev-2.4.0"
	}
	request := func(v string) {
		t.Helper()
		c := ro.latest()
		c.Spec.RestartRequest = v
		if err := k8s.Update(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	ro.pass()
	ro.expect("settled", 3, "-")

	request("r1")
	ro.pass() // recorded, and the template carries it in the same pass
	c := ro.latest()
	if r := c.Status.Restart; r == nil || r.Request != "r1" || r.Generation != c.Generation || r.CompletedTime != nil {
		t.Fatalf("status.restart after the request: %+v (generation %d)", r, c.Generation)
	}
	sts := ro.statefulSet()
	if got := sts.Spec.Template.Annotations[v1alpha1.AnnotationRestartRequest]; got != "r1" {
		t.Fatalf("the pod template carries %q, want r1", got)
	}
	ro.expect("template applied, no pod moved", 3, "-")
	ro.kubeControllerManager()
	ro.pass()
	ro.expect("rollout started", 2, "PodReady")
	if up := ro.latest().Status.Upgrade; up == nil || up.Cause != v1alpha1.RolloutCauseSpec {
		t.Fatalf("status.upgrade %+v: want a Spec rollout, which no rollout slot holds", up)
	}
	ro.kubeControllerManager()
	ro.pass()
	ro.expect("bao-2 done", 1, "PodReady")

	// The operator restarts: a reconciler with no memory carries on.
	r, err := newReconciler(k8s, k8s, ro.rec)
	if err != nil {
		t.Fatal(err)
	}
	r.OpenBao = func(openbao.Options) (openbao.Client, error) { return ro.bao, nil }
	ro.r = r
	ro.kubeControllerManager()
	ro.pass()
	ro.expect("bao-0 asked to step down after the restart", 1, "StepDown")
	ro.moveLeader(0, 2)
	ro.pass()
	ro.expect("bao-0 released", 0, "PodReady")
	ro.kubeControllerManager()
	ro.pass()
	ro.expect("complete", 3, "-")
	ro.kubeControllerManager() // observes the partition locked again
	ro.pass()                  // settled: the restart is complete
	done := ro.latest().Status.Restart
	if done == nil || done.Request != "r1" || done.CompletedTime == nil {
		t.Fatalf("status.restart after the rollout: %+v", done)
	}
	if n := ro.bao.CallCount("StepDown"); n != 1 {
		t.Errorf("%d step-downs, want 1 (the active server, last)", n)
	}
	for i := range 3 {
		if rev := ro.pod(i).Labels[appsv1.ControllerRevisionHashLabelKey]; rev != "rev-2.4.0-r1" {
			t.Errorf("bao-%d is on %s, want rev-2.4.0-r1", i, rev)
		}
	}
	assertEvents(t, ro.rec, v1alpha1.EventRestartRequested, "UpgradeStarted", "UpgradeComplete", v1alpha1.EventRestartCompleted)

	generation, uids := ro.statefulSet().Generation, map[int]string{}
	for i := range 3 {
		uids[i] = string(ro.pod(i).UID)
	}
	for _, v := range []string{"r1", ""} {
		request(v)
		ro.pass()
		ro.kubeControllerManager()
		ro.pass()
		if g := ro.statefulSet().Generation; g != generation {
			t.Errorf("spec.restartRequest %q: the StatefulSet changed (generation %d, was %d)", v, g, generation)
		}
		for i := range 3 {
			if uid := string(ro.pod(i).UID); uid != uids[i] {
				t.Errorf("spec.restartRequest %q: bao-%d was replaced", v, i)
			}
		}
	}
}

// TestARotateRequestReissuesTheServerCertificateOnce: spec.tls.rotateRequest
// reissues the server certificate once per value (the CA stays), records
// it in status.tls, and changes no pod template: the servers reload the
// certificate, as on a scheduled rotation.
func TestARotateRequestReissuesTheServerCertificateOnce(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "rotate-request")
	c := newCluster(t, "rotate-request", `
metadata: {name: rotated}
spec: {version: 2.4.0}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	clock := clocktesting.NewFakeClock(time.Now())
	rec := events.NewFakeRecorder(100)
	r, err := newReconciler(k8s, k8s, rec)
	if err != nil {
		t.Fatal(err)
	}
	r.Clock, r.Random = clock, rand.Reader
	pass := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	}
	template := func() string {
		t.Helper()
		sts := &appsv1.StatefulSet{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.StatefulSetName()}, sts); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(sts.Spec.Template)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	latest := func() *v1alpha1.OpenBaoCluster {
		t.Helper()
		got := &v1alpha1.OpenBaoCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	ask := func(v string) {
		t.Helper()
		got := latest()
		got.Spec.TLS.RotateRequest = v
		if err := k8s.Update(ctx, got); err != nil {
			t.Fatal(err)
		}
	}
	pass()
	pass()
	ca0, server0 := tlsSecrets(t, c)
	template0 := template()

	clock.Step(time.Minute)
	ask("2026-05-01T10:00:00Z")
	pass()
	ca1, server1 := tlsSecrets(t, c)
	if serial(t, server1.Data[pki.CertKey]) == serial(t, server0.Data[pki.CertKey]) {
		t.Fatal("the request did not reissue the server certificate")
	}
	if ca1.ResourceVersion != ca0.ResourceVersion {
		t.Error("the request rewrote the CA Secret")
	}
	verifyServerSecret(t, server1, ca1.Data[pki.CAKey], clock.Now())
	if st := latest().Status.TLS; st == nil || st.RotateRequest != "2026-05-01T10:00:00Z" || st.RotatedAt == nil {
		t.Fatalf("status.tls: %+v", st)
	}
	assertEvents(t, rec, "TLS"+string(pki.ReasonRotateRequested))

	clock.Step(time.Minute)
	pass()
	pass()
	if _, server2 := tlsSecrets(t, c); server2.ResourceVersion != server1.ResourceVersion {
		t.Error("the same request reissued the certificate again")
	}
	if template() != template0 {
		t.Error("the rotation changed the pod template: the servers would restart")
	}
}
