package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/imageverify"
	"github.com/openbao/operator/test/cosigntest"
)

// TestTheAttackerCannotTurnOffThePlatformsImageSignaturePolicy is issue
// 34's item 3: the platform requires every image to be signed by its key
// (--image-signature-public-key-file). The attacker tenant, through its own
// client, creates clusters on a real registry's images: unsigned with no
// imageVerification, with imageVerification turned off, and signed by its
// own key under its own imageVerification with failurePolicy Warn. Each is
// held (Degraded ImageVerificationFailed naming the platform's policy) and
// no StatefulSet is created; a cluster on the platform-signed image runs
// it pinned by digest, though its spec asks for no verification.
func TestTheAttackerCannotTurnOffThePlatformsImageSignaturePolicy(t *testing.T) {
	ctx := context.Background()
	reg := cosigntest.New(t, "", "")
	platformKey, attackerKey := cosigntest.NewKey(t), cosigntest.NewKey(t)
	signed := reg.Push(t, "openbao/openbao", "2.4.0")
	reg.SignBundle(t, platformKey, signed, signed)
	reg.Push(t, "openbao/openbao", "2.4.1")
	own := reg.Push(t, "openbao/openbao", "2.4.2")
	reg.SignBundle(t, attackerKey, own, own)
	image := reg.Host + "/openbao/openbao"

	a := NewAttacker(t, "platform-signature")
	r, err := newReconciler(k8s, k8s, events.NewFakeRecorder(100))
	if err != nil {
		t.Fatal(err)
	}
	r.ImageVerifier = imageverify.NewCosign(0, nil)
	r.PlatformVerification = &controllers.PlatformVerification{Policy: imageverify.Policy{PublicKey: cosigntest.PublicPEM(t, platformKey)}}

	held := []struct{ name, spec string }{
		{"an unsigned image, no verification asked", "version: 2.4.1"},
		{"an unsigned image, verification turned off", "version: 2.4.1, imageVerification: {enabled: false}"},
		{"its own key's signature under Warn", "version: 2.4.2, imageVerification: {enabled: true, failurePolicy: Warn, publicKey: %q}"},
	}
	for i, tc := range held {
		t.Run("the attacker's cluster on "+tc.name+" is held", func(t *testing.T) {
			spec := tc.spec
			if strings.Contains(spec, "%q") {
				spec = fmt.Sprintf(spec, cosigntest.PublicPEM(t, attackerKey))
			}
			c := newCluster(t, a.Namespace, fmt.Sprintf("metadata: {name: held-%d}\nspec: {image: %s, %s}", i, image, spec))
			if err := a.Client.Create(ctx, c); err != nil {
				t.Fatalf("the attacker creates its cluster: %v", err)
			}
			reconcileFunc(t, ctx, r, c)()
			d := findDegraded(latestCluster(t, c))
			if d == nil || d.Status != metav1.ConditionTrue || d.Reason != v1alpha1.ReasonImageVerificationFailed ||
				!strings.Contains(d.Message, "the platform's signature policy") {
				t.Fatalf("Degraded %+v, want True ImageVerificationFailed naming the platform's policy", d)
			}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.StatefulSetName()}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
				t.Errorf("a StatefulSet exists for a cluster whose image the platform did not verify (%v)", err)
			}
		})
	}
	t.Run("the attacker's cluster on the platform-signed image runs it pinned", func(t *testing.T) {
		c := newCluster(t, a.Namespace, fmt.Sprintf("metadata: {name: signed}\nspec: {image: %s, version: 2.4.0}", image))
		if err := a.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		reconcileFunc(t, ctx, r, c)()
		_, got, err := serverImage(ctx, c)
		if want := image + ":2.4.0@" + signed.DigestStr(); err != nil || got != want {
			t.Fatalf("the servers run %q (%v), want %q", got, err, want)
		}
	})
}

// TestTheAttackerCannotRunAnUnsignedExecutorUnderThePlatformsPolicy: with
// the platform's signature policy, the backup executor image a tenant
// names (spec.backup.executorImage, which runs with the store credentials
// and the cluster's backup identity) is verified before its Job is made.
// The attacker's backup of a cluster whose executor is unsigned fails
// (ImageVerificationFailed, naming the platform's policy) and no Job is
// created; signed by the platform, the Job runs it by digest.
func TestTheAttackerCannotRunAnUnsignedExecutorUnderThePlatformsPolicy(t *testing.T) {
	ctx := context.Background()
	reg := cosigntest.New(t, "", "")
	platformKey := cosigntest.NewKey(t)
	signed := reg.Push(t, "team/executor", "1")
	reg.SignBundle(t, platformKey, signed, signed)
	reg.Push(t, "team/executor", "evil")
	const ns = "platform-executor"
	rig := newBackupRig(t, ns, scheduledSpec+"executorImage: "+reg.Host+"/team/executor:evil\n", time.Now())
	rig.br.ImageVerifier = imageverify.NewCosign(0, nil)
	rig.br.PlatformVerification = &controllers.PlatformVerification{Policy: imageverify.Policy{PublicKey: cosigntest.PublicPEM(t, platformKey)}}
	a := NewAttacker(t, ns)

	b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "evil", Namespace: ns}, Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: "bao"}}
	if err := a.Client.Create(ctx, b); err != nil {
		t.Fatalf("the attacker creates its backup: %v", err)
	}
	rig.reconcileBackup("evil")
	got := rig.backup("evil")
	if got.Status.Phase != v1alpha1.BackupFailed || got.Status.Reason != v1alpha1.ReasonImageVerificationFailed ||
		!strings.Contains(got.Status.Message, "spec.backup.executorImage") || !strings.Contains(got.Status.Message, "the platform's signature policy") {
		t.Fatalf("backup status %+v, want Failed ImageVerificationFailed naming the executor image and the platform's policy", got.Status)
	}
	jobs := &batchv1.JobList{}
	if err := k8s.List(ctx, jobs, client.InNamespace(ns)); err != nil || len(jobs.Items) != 0 {
		t.Fatalf("%d Jobs (%v) for an executor the platform did not verify", len(jobs.Items), err)
	}

	c := rig.get()
	c.Spec.Backup.ExecutorImage = reg.Host + "/team/executor:1"
	if err := k8s.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	b = &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "signed", Namespace: ns}, Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: "bao"}}
	if err := a.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	rig.reconcileBackup("signed")
	job := &batchv1.Job{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: rig.backup("signed").Status.JobName}, job); err != nil {
		t.Fatalf("the Job of a platform-signed executor: %v", err)
	}
	if got, want := job.Spec.Template.Spec.Containers[0].Image, reg.Host+"/team/executor@"+signed.DigestStr(); got != want {
		t.Errorf("the executor runs %q, want %q", got, want)
	}
}

// TestTheAttackerCannotRestoreThroughAnUnsignedExecutor: the same for a
// restore, whose executor writes the snapshot into the cluster: the
// attacker's OpenBaoRestore of a cluster whose executor is unsigned fails
// (ImageVerificationFailed) and no Job is created.
func TestTheAttackerCannotRestoreThroughAnUnsignedExecutor(t *testing.T) {
	ctx := context.Background()
	reg := cosigntest.New(t, "", "")
	reg.Push(t, "team/executor", "evil")
	const ns = "platform-restore"
	rig := newRestoreRig(t, ns)
	rig.rr.ImageVerifier = imageverify.NewCosign(0, nil)
	rig.rr.PlatformVerification = &controllers.PlatformVerification{Policy: imageverify.Policy{PublicKey: cosigntest.PublicPEM(t, cosigntest.NewKey(t))}}
	c := rig.get()
	c.Spec.Backup.ExecutorImage = reg.Host + "/team/executor:evil"
	if err := k8s.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	a := NewAttacker(t, ns)
	rs := &v1alpha1.OpenBaoRestore{ObjectMeta: metav1.ObjectMeta{Name: "evil", Namespace: ns},
		Spec: v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao", Source: v1alpha1.RestoreSource{Latest: true}, PreRestoreSnapshot: ptr.To(false)}}
	if err := a.Client.Create(ctx, rs); err != nil {
		t.Fatalf("the attacker creates its restore: %v", err)
	}
	rig.reconcileRestore("evil")
	got := rig.restore("evil").Status
	if got.Phase != v1alpha1.RestoreFailed || got.Reason != v1alpha1.ReasonImageVerificationFailed ||
		!strings.Contains(got.Message, "spec.backup.executorImage") || !strings.Contains(got.Message, "the platform's signature policy") {
		t.Fatalf("restore status %+v, want Failed ImageVerificationFailed naming the executor image and the platform's policy", got)
	}
	jobs := &batchv1.JobList{}
	if err := k8s.List(ctx, jobs, client.InNamespace(ns)); err != nil || len(jobs.Items) != 0 {
		t.Fatalf("%d Jobs (%v) for an executor the platform did not verify", len(jobs.Items), err)
	}
}
