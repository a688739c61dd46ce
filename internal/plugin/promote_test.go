package plugin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/openbao/operator/api/v1alpha1"
)

var takenAt = metav1.NewTime(time.Date(2026, 5, 1, 9, 58, 0, 0, time.UTC))

func standbyCluster(edit func(*v1alpha1.OpenBaoCluster)) *v1alpha1.OpenBaoCluster {
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "bao"},
		Spec: v1alpha1.OpenBaoClusterSpec{Replicas: 3, Version: "2.4.0",
			Bootstrap: &v1alpha1.BootstrapSpec{FromBackup: &v1alpha1.BackupBootstrap{Latest: true, SourceCluster: "bao-east",
				Target: v1alpha1.BackupTarget{PathPrefix: "site-a"}}},
			Standby: &v1alpha1.StandbySpec{}},
		Status: v1alpha1.OpenBaoClusterStatus{Standby: &v1alpha1.StandbyStatus{
			ServedKey: "site-a/prod/bao-east/20260501T095800Z-a.snap", ServedTakenAt: &takenAt,
			NewestKey: "site-a/prod/bao-east/20260501T095900Z-b.snap", LagSeconds: 60,
			Restore: "bao-standby-b", RestoreKey: "site-a/prod/bao-east/20260501T095900Z-b.snap"}}}
	if edit != nil {
		edit(c)
	}
	return c
}

func TestPlanPromotion(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster *v1alpha1.OpenBaoCluster
		err     error
		done    bool
		says    []string
	}{
		{"a cluster that is no standby is refused, naming spec.standby", standbyCluster(func(c *v1alpha1.OpenBaoCluster) { c.Spec.Standby = nil }),
			ErrNotAStandby, false, nil},
		{"an already promoted standby has nothing left to do", standbyCluster(func(c *v1alpha1.OpenBaoCluster) {
			c.Status.Standby.PromotedAt = &takenAt
		}), nil, true, nil},
		{"a standby trailing its source says what it serves, the newer snapshot, the running restore and to fence the source",
			standbyCluster(nil), nil, false, []string{"stops following the snapshots of bao-east under site-a",
				"it serves: site-a/prod/bao-east/20260501T095800Z-a.snap, taken 2026-05-01T09:58:00Z",
				"the source's newest is site-a/prod/bao-east/20260501T095900Z-b.snap (60 s newer)",
				"The restore bao-standby-b", "promotes once it ended", "fence it first", "NOT here"}},
		{"a standby that serves nothing yet says so", standbyCluster(func(c *v1alpha1.OpenBaoCluster) { c.Status.Standby = nil }),
			nil, false, []string{"serves no snapshot of its source yet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := PlanPromotion(tc.cluster)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "spec.standby") {
					t.Errorf("the refusal does not name spec.standby: %v", err)
				}
				return
			}
			if plan.Done != tc.done {
				t.Fatalf("Done %v, want %v", plan.Done, tc.done)
			}
			for _, s := range tc.says {
				if !strings.Contains(plan.Confirmation, s) {
					t.Errorf("the confirmation does not say %q:\n%s", s, plan.Confirmation)
				}
			}
		})
	}
}

// TestPromoteAsksThenPatchesOnlyTheField: off a terminal without --yes
// nothing is written; with --yes one merge patch sets
// spec.standby.promote and nothing else; --wait returns once the operator
// recorded the promotion; a promoted cluster is not patched again.
func TestPromoteAsksThenPatchesOnlyTheField(t *testing.T) {
	var patches []string
	promoted := false
	cl := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(standbyCluster(nil)).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				body, _ := patch.Data(obj)
				patches = append(patches, string(patch.Type())+" "+string(body))
				return c.Patch(ctx, obj, patch, opts...)
			},
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if err := c.Get(ctx, key, obj, opts...); err != nil {
					return err
				}
				// The operator: a stored promote is recorded on the next read.
				if b, ok := obj.(*v1alpha1.OpenBaoCluster); ok && b.Spec.Standby != nil && b.Spec.Standby.Promote && promoted {
					b.Status.Standby.PromotedAt = &takenAt
				}
				return nil
			},
		}).Build()
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		c := &cli{streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out},
			kube: genericclioptions.NewConfigFlags(true), isTerminal: func(io.Reader) bool { return false },
			clients: func() (*Commands, error) {
				return &Commands{Client: cl, Namespace: "prod", Now: func() time.Time { return requestNow }, PollInterval: time.Millisecond}, nil
			}}
		root := newRoot(c)
		root.SetArgs(args)
		err := root.Execute()
		return out.String(), err
	}

	out, err := run("promote", "bao")
	if !errors.Is(err, ErrNotConfirmed) || len(patches) != 0 {
		t.Fatalf("off a terminal without --yes: err %v, %d patches, want a refusal and none:\n%s", err, len(patches), out)
	}
	if !strings.Contains(out, "fence it first") {
		t.Errorf("promote did not say what it does before asking:\n%s", out)
	}
	promoted = true
	if out, err = run("promote", "bao", "--yes", "--wait", "--timeout", "5s"); err != nil {
		t.Fatalf("promote --yes --wait: %v\n%s", err, out)
	}
	if want := `application/merge-patch+json {"spec":{"standby":{"promote":true}}}`; len(patches) != 1 || patches[0] != want {
		t.Fatalf("patches %q, want exactly [%s]", patches, want)
	}
	if !strings.Contains(out, "promoted: it takes writes") {
		t.Errorf("--wait did not say the promotion was recorded:\n%s", out)
	}
	if out, err = run("promote", "bao", "--yes"); err != nil || len(patches) != 1 || !strings.Contains(out, "already promoted") {
		t.Fatalf("promote of a promoted cluster: err %v, %d patches (want 1), said:\n%s", err, len(patches), out)
	}
}
