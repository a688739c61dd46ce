package controllers

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/standby"
)

// TestAStandbyDeletesOnlyTheEndedRestoreItSaw: the standby saw restore r
// ended (UID "ended"); by the time it deletes, r was deleted and created
// again under the same name by someone else (UID "another"). The delete
// carries the UID it saw, so the new restore stays; the one it saw goes.
// The fake client ignores delete preconditions; the interceptor refuses as
// the API server does (409 Conflict) when the UID differs.
func TestAStandbyDeletesOnlyTheEndedRestoreItSaw(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "dr", Namespace: "ns"}}
	for name, tc := range map[string]struct {
		live  types.UID
		stays bool
	}{
		"a restore created since under the name stays": {"another", true},
		"the restore seen ended is deleted":            {"ended", false},
	} {
		t.Run(name, func(t *testing.T) {
			rs := &v1alpha1.OpenBaoRestore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: tc.live}}
			cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(rs).WithInterceptorFuncs(interceptor.Funcs{
				Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					o := &client.DeleteOptions{}
					o.ApplyOptions(opts)
					live := &v1alpha1.OpenBaoRestore{}
					if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
						return err
					}
					if o.Preconditions != nil && o.Preconditions.UID != nil && *o.Preconditions.UID != live.UID {
						return apierrors.NewConflict(schema.GroupResource{Group: "openbao.org", Resource: "openbaorestores"},
							obj.GetName(), errors.New("the UID in the precondition does not match"))
					}
					return cl.Delete(ctx, obj, opts...)
				}}).Build()
			r := &OpenBaoClusterReconciler{Client: cl}
			if err := r.deleteEndedRestores(context.Background(), c, []string{"r"}, map[string]types.UID{"r": "ended"}); err != nil {
				t.Fatal(err)
			}
			err := cl.Get(context.Background(), client.ObjectKeyFromObject(rs), &v1alpha1.OpenBaoRestore{})
			if stays := err == nil; stays != tc.stays {
				t.Fatalf("restore %s (UID %s) stays: %v, want %v (%v)", rs.Name, tc.live, stays, tc.stays, err)
			}
		})
	}
}

// TestAStandbyWhoseEndedRestoresCannotBeDeletedKeepsFollowing: the delete
// is refused (a role without the right, as the tenancy install's was); the
// cleanup says so in a Warning event and hands no error to the pass, whose
// error backoff would otherwise grow until the standby stopped polling.
func TestAStandbyWhoseEndedRestoresCannotBeDeletedKeepsFollowing(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rs := &v1alpha1.OpenBaoRestore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "ended"}}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(rs).WithInterceptorFuncs(interceptor.Funcs{
		Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Group: "openbao.org", Resource: "openbaorestores"}, "r", errors.New("no delete"))
		}}).Build()
	rec := events.NewFakeRecorder(5)
	r := &OpenBaoClusterReconciler{Client: cl, Recorder: rec}
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "dr", Namespace: "ns"}}
	r.cleanUpEndedRestores(context.Background(), c, []string{"r"}, map[string]types.UID{"r": "ended"})
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "Warning "+standby.ReasonStandbyCleanupFailed) || !strings.Contains(e, "forbidden") {
			t.Fatalf("event %q, want a Warning %s naming the refusal", e, standby.ReasonStandbyCleanupFailed)
		}
	default:
		t.Fatal("no event says the ended restores are left")
	}
}
