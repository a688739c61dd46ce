package restore_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/restore"
)

func bootstrapCluster(source string, keep bool) *v1alpha1.OpenBaoCluster {
	c := runningCluster()
	c.Spec.Bootstrap = fromBackup(source)
	c.Spec.Bootstrap.FromBackup.KeepSourceIdentity = keep
	if source != "" && !keep {
		c.Spec.Bootstrap.FromBackup.TokenSecretRef = &v1alpha1.SecretKeyRef{Name: "src-token"}
	}
	return c
}

func TestTheIdentityOfASnapshotFromAnotherClusterOrNamespaceNeedsATokenOrToBeKeptInThisNamespace(t *testing.T) {
	token := &v1alpha1.SecretKeyRef{Name: "src-token"}
	for _, tc := range []struct {
		name       string
		source, ns string
		keep       bool
		token      *v1alpha1.SecretKeyRef
		wantField  string
	}{
		{name: "this cluster's own snapshot needs nothing"},
		{name: "this cluster's own namespace, named, needs nothing", ns: "ns"},
		{name: "another cluster's snapshot with a token", source: "src", token: token},
		{name: "another cluster's snapshot kept in this namespace", source: "src", keep: true},
		{name: "another cluster's snapshot needs a token", source: "src", wantField: "spec.bootstrap.fromBackup.tokenSecretRef"},
		{name: "a same-named source in another namespace needs a token", ns: "prod", wantField: "spec.bootstrap.fromBackup.tokenSecretRef"},
		{name: "a same-named source in another namespace with a token", ns: "prod", token: token},
		{name: "a source in another namespace cannot keep its identity", source: "src", ns: "prod", keep: true,
			wantField: "spec.bootstrap.fromBackup.keepSourceIdentity"},
		{name: "a same-named source in another namespace cannot keep its identity", ns: "prod", keep: true,
			wantField: "spec.bootstrap.fromBackup.keepSourceIdentity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := runningCluster()
			c.Spec.Bootstrap = fromBackup(tc.source)
			fb := c.Spec.Bootstrap.FromBackup
			fb.SourceNamespace, fb.KeepSourceIdentity, fb.TokenSecretRef = tc.ns, tc.keep, tc.token
			errs := restore.BootstrapRefused(c)
			if tc.wantField == "" {
				if len(errs) != 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tc.wantField {
				t.Fatalf("got %v, want one error on %s", errs, tc.wantField)
			}
			// The controller restores nothing while the rule fails.
			d := restore.DecideBootstrap(restore.BootstrapObserved{Cluster: c, Initialized: true})
			if d.CreateRestore || d.Reason != restore.ReasonBootstrapMisconfigured || !d.Degraded || !strings.Contains(d.Message, tc.wantField) {
				t.Fatalf("the fromBackup step: %+v", d)
			}
		})
	}
}

func restoreIn(phase v1alpha1.RestorePhase, step v1alpha1.RestoreStep, installed bool) *v1alpha1.OpenBaoRestore {
	r := bootstrapRestore()
	r.Status.Phase, r.Status.Step, r.Status.Reason, r.Status.Key, r.Status.SHA256 = phase, step, "R", "k", "s"
	if installed {
		at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		r.Status.RestoredAt = &at
	}
	if phase.Done() {
		at := metav1.NewTime(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC))
		r.Status.CompletionTime = &at
	}
	return r
}

func TestABootstrapRestoreFollowsItsRestore(t *testing.T) {
	installed := &v1alpha1.FromBackupStatus{Restore: "bao-from-backup", InstalledAt: &metav1.Time{Time: time.Unix(1, 0)}}
	bound := installed.DeepCopy()
	bound.IdentityBound = true
	for _, tc := range []struct {
		name        string
		cluster     *v1alpha1.OpenBaoCluster
		initialized bool
		status      *v1alpha1.FromBackupStatus
		restore     *v1alpha1.OpenBaoRestore
		another     bool
		want        restore.BootstrapDecision
		completed   bool
	}{
		{name: "nothing before the cluster is initialized", cluster: bootstrapCluster("", false)},
		{name: "the restore is created once initialized", cluster: bootstrapCluster("", false), initialized: true,
			want: restore.BootstrapDecision{CreateRestore: true, Reason: restore.ReasonBootstrapRestoreCreated}},
		{name: "a running restore is followed", cluster: bootstrapCluster("", false), initialized: true,
			status:  &v1alpha1.FromBackupStatus{Restore: "bao-from-backup"},
			restore: restoreIn(v1alpha1.RestoreRunning, v1alpha1.RestoreStepRestoring, false),
			want:    restore.BootstrapDecision{Reason: restore.ReasonBootstrapRestoring}},
		{name: "the install voids the root token; the own snapshot needs no binding", cluster: bootstrapCluster("", false), initialized: true,
			status:  &v1alpha1.FromBackupStatus{Restore: "bao-from-backup"},
			restore: restoreIn(v1alpha1.RestoreRunning, v1alpha1.RestoreStepVerifying, true),
			want:    restore.BootstrapDecision{VoidRootToken: true, Reason: restore.ReasonBootstrapRestoring}},
		{name: "another cluster's snapshot is bound before anything else", cluster: bootstrapCluster("src", false), initialized: true,
			status:  &v1alpha1.FromBackupStatus{Restore: "bao-from-backup"},
			restore: restoreIn(v1alpha1.RestoreRunning, v1alpha1.RestoreStepVerifying, true),
			want:    restore.BootstrapDecision{VoidRootToken: true, BindIdentity: true, Reason: restore.ReasonBindingIdentity}},
		{name: "binding holds back success", cluster: bootstrapCluster("src", false), initialized: true, status: installed,
			restore: restoreIn(v1alpha1.RestoreSucceeded, "", true),
			want:    restore.BootstrapDecision{BindIdentity: true, Reason: restore.ReasonBindingIdentity}},
		{name: "a kept source identity is not bound", cluster: bootstrapCluster("src", true), initialized: true, status: installed,
			restore: restoreIn(v1alpha1.RestoreSucceeded, "", true), completed: true,
			want: restore.BootstrapDecision{Value: true, Reason: restore.ReasonRestoredFromBackup}},
		{name: "bound and succeeded", cluster: bootstrapCluster("src", false), initialized: true, status: bound,
			restore: restoreIn(v1alpha1.RestoreSucceeded, "", true), completed: true,
			want: restore.BootstrapDecision{Value: true, Reason: restore.ReasonRestoredFromBackup}},
		{name: "a failed restore degrades the cluster and says how to retry", cluster: bootstrapCluster("", false), initialized: true,
			status:  &v1alpha1.FromBackupStatus{Restore: "bao-from-backup"},
			restore: restoreIn(v1alpha1.RestoreFailed, "", false),
			want:    restore.BootstrapDecision{Reason: restore.ReasonBootstrapRestoreFailed, Degraded: true}},
		{name: "a restore under another seal says to start over with the right key", cluster: bootstrapCluster("", false), initialized: true,
			status: &v1alpha1.FromBackupStatus{Restore: "bao-from-backup"},
			restore: func() *v1alpha1.OpenBaoRestore {
				r := restoreIn(v1alpha1.RestoreFailed, "", false)
				r.Status.Reason = restore.ReasonSealMismatch
				return r
			}(),
			want: restore.BootstrapDecision{Reason: restore.ReasonBootstrapRestoreFailed, Degraded: true, Message: "unsealKeySecretRef must name the source"}},
		{name: "the restore of an earlier cluster of this name is waited out, not taken", cluster: bootstrapCluster("", false), initialized: true,
			status: &v1alpha1.FromBackupStatus{Restore: "bao-from-backup"}, restore: restoreIn(v1alpha1.RestoreSucceeded, "", true), another: true,
			want: restore.BootstrapDecision{Reason: restore.ReasonBootstrapRestoreCreated}},
		{name: "a deleted failed restore is created again", cluster: bootstrapCluster("", false), initialized: true,
			status: &v1alpha1.FromBackupStatus{Restore: "bao-from-backup", Failed: "SealMismatch"},
			want:   restore.BootstrapDecision{CreateRestore: true, Reason: restore.ReasonBootstrapRestoreCreated}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := restore.DecideBootstrap(restore.BootstrapObserved{Cluster: tc.cluster, Initialized: tc.initialized,
				Status: tc.status, Restore: tc.restore, RestoreOfAnother: tc.another, Now: metav1.Now()})
			if d.CreateRestore != tc.want.CreateRestore || d.VoidRootToken != tc.want.VoidRootToken || d.BindIdentity != tc.want.BindIdentity ||
				d.Value != tc.want.Value || d.Reason != tc.want.Reason || d.Degraded != tc.want.Degraded {
				t.Fatalf("got %+v, want %+v", d, tc.want)
			}
			if done := d.Status != nil && d.Status.CompletedAt != nil; done != tc.completed {
				t.Fatalf("completed %v, want %v (%+v)", done, tc.completed, d.Status)
			}
			if !strings.Contains(d.Message, tc.want.Message) {
				t.Fatalf("message %q lacks %q", d.Message, tc.want.Message)
			}
			if d.Status != nil && d.Status.Failed != "" && tc.want.Reason != restore.ReasonBootstrapRestoreFailed {
				t.Fatalf("status still failed: %+v", d.Status)
			}
		})
	}
}
