package plugin

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/openbao/operator/api/v1alpha1"
)

var requestNow = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

// requestFixture is a fake API server holding one cluster, which records
// every write and, when operator is set, plays the operator: each read
// after the request shows what operator makes of the stored cluster.
type requestFixture struct {
	cl       client.Client
	patches  []string
	updates  int
	operator func(*v1alpha1.OpenBaoCluster)
}

func newRequestFixture(t *testing.T, mode v1alpha1.TLSMode) *requestFixture {
	t.Helper()
	f := &requestFixture{}
	cluster := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "bao"},
		Spec: v1alpha1.OpenBaoClusterSpec{Replicas: 3, Version: "2.4.0", TLS: v1alpha1.TLSSpec{Mode: mode}}}
	f.cl = fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(cluster).WithStatusSubresource(cluster).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				body, _ := patch.Data(obj)
				f.patches = append(f.patches, string(patch.Type())+" "+string(body))
				return c.Patch(ctx, obj, patch, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				f.updates++
				return c.Update(ctx, obj, opts...)
			},
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if err := c.Get(ctx, key, obj, opts...); err != nil || f.operator == nil || len(f.patches) == 0 {
					return err
				}
				if cl, ok := obj.(*v1alpha1.OpenBaoCluster); ok {
					f.operator(cl)
				}
				return nil
			},
		}).Build()
	return f
}

func (f *requestFixture) run(args ...string) (string, error) {
	var out bytes.Buffer
	c := &cli{streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out},
		kube: genericclioptions.NewConfigFlags(true),
		clients: func() (*Commands, error) {
			return &Commands{Client: f.cl, Namespace: "prod", Now: func() time.Time { return requestNow }, PollInterval: time.Millisecond}, nil
		}}
	root := newRoot(c)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func (f *requestFixture) stored(t *testing.T) *v1alpha1.OpenBaoCluster {
	t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	if err := f.cl.Get(context.Background(), types.NamespacedName{Namespace: "prod", Name: "bao"}, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRestartAndRotateCertsPatchOnlyTheirField: each command writes its
// request, the time, with one merge patch of that field alone (never an
// update, which would write back a spec read earlier), says what it
// asked, and a second request at the same instant is a new value.
func TestRestartAndRotateCertsPatchOnlyTheirField(t *testing.T) {
	for _, tc := range []struct {
		command, patch string
		field          func(*v1alpha1.OpenBaoCluster) string
	}{
		{"restart", `{"spec":{"restartRequest":"2026-05-01T10:00:00Z"}}`, func(c *v1alpha1.OpenBaoCluster) string { return c.Spec.RestartRequest }},
		{"rotate-certs", `{"spec":{"tls":{"rotateRequest":"2026-05-01T10:00:00Z"}}}`, func(c *v1alpha1.OpenBaoCluster) string { return c.Spec.TLS.RotateRequest }},
	} {
		t.Run(tc.command, func(t *testing.T) {
			f := newRequestFixture(t, v1alpha1.TLSModeOperatorManaged)
			out, err := f.run(tc.command, "bao")
			if err != nil {
				t.Fatal(err)
			}
			if len(f.patches) != 1 || f.patches[0] != string(types.MergePatchType)+" "+tc.patch || f.updates != 0 {
				t.Fatalf("writes: patches %q, %d updates; want the one merge patch %s", f.patches, f.updates, tc.patch)
			}
			stored := f.stored(t)
			if tc.field(stored) != "2026-05-01T10:00:00Z" || stored.Spec.Replicas != 3 || stored.Spec.Version != "2.4.0" {
				t.Errorf("stored spec: %+v", stored.Spec)
			}
			if !strings.Contains(out, "2026-05-01T10:00:00Z") {
				t.Errorf("output does not say what was asked: %q", out)
			}
			if _, err := f.run(tc.command, "bao"); err != nil {
				t.Fatal(err)
			}
			if again := tc.field(f.stored(t)); again == "2026-05-01T10:00:00Z" {
				t.Errorf("a second request at the same instant wrote the same value %q: the operator would not act", again)
			}
		})
	}
}

// TestRotateCertsRefusesAnExternalCertificate: the operator issues no
// certificate in External mode, so nothing is written and the error says
// where to renew it.
func TestRotateCertsRefusesAnExternalCertificate(t *testing.T) {
	f := newRequestFixture(t, v1alpha1.TLSModeExternal)
	_, err := f.run("rotate-certs", "bao")
	if !errors.Is(err, ErrOperatorManagedOnly) || !strings.Contains(err.Error(), "spec.tls.external.serverSecretRef") {
		t.Errorf("got %v, want a refusal naming spec.tls.external.serverSecretRef", err)
	}
	if len(f.patches) != 0 {
		t.Errorf("patched %q", f.patches)
	}
}

// TestWaitEndsWhenStatusShowsTheRequestHandled: --wait returns once the
// operator's status shows this request done, and not before: a restart
// recorded but still rolling, or a rotation of another request, keeps it
// waiting until its timeout.
func TestWaitEndsWhenStatusShowsTheRequestHandled(t *testing.T) {
	done := metav1.NewTime(requestNow.Add(time.Minute))
	for _, tc := range []struct {
		name     string
		args     []string
		operator func(*v1alpha1.OpenBaoCluster)
		ok       bool
	}{
		{"a restart completed", []string{"restart", "bao"}, func(c *v1alpha1.OpenBaoCluster) {
			c.Status.Restart = &v1alpha1.RestartStatus{Request: c.Spec.RestartRequest, CompletedTime: &done}
		}, true},
		{"a restart still rolling", []string{"restart", "bao"}, func(c *v1alpha1.OpenBaoCluster) {
			c.Status.Restart = &v1alpha1.RestartStatus{Request: c.Spec.RestartRequest}
		}, false},
		{"an earlier restart completed", []string{"restart", "bao"}, func(c *v1alpha1.OpenBaoCluster) {
			c.Status.Restart = &v1alpha1.RestartStatus{Request: "earlier", CompletedTime: &done}
		}, false},
		{"a rotation done", []string{"rotate-certs", "bao"}, func(c *v1alpha1.OpenBaoCluster) {
			c.Status.TLS = &v1alpha1.TLSStatus{RotateRequest: c.Spec.TLS.RotateRequest, RotatedAt: &done}
		}, true},
		{"an earlier rotation", []string{"rotate-certs", "bao"}, func(c *v1alpha1.OpenBaoCluster) {
			c.Status.TLS = &v1alpha1.TLSStatus{RotateRequest: "earlier", RotatedAt: &done}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRequestFixture(t, v1alpha1.TLSModeOperatorManaged)
			f.operator = tc.operator
			_, err := f.run(append(tc.args, "--wait", "--timeout", "50ms")...)
			if tc.ok && err != nil {
				t.Errorf("got %v, want the wait to end", err)
			}
			if !tc.ok && !errors.Is(err, ErrWaitTimedOut) {
				t.Errorf("got %v, want a timeout", err)
			}
		})
	}
}
