package bootstrap_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/openbao/operator/internal/autopilot"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
)

// logCtx returns a context whose logger records every line for the token
// scan, and the lines.
func logCtx(t *testing.T) (context.Context, *[]string) {
	t.Helper()
	lines := &[]string{}
	log := funcr.New(func(prefix, args string) {
		line := prefix + " " + args
		*lines = append(*lines, line)
		record(line)
	}, funcr.Options{Verbosity: 10})
	return logr.NewContext(context.Background(), log), lines
}

func template() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bao-root-token", Namespace: "ns", Labels: map[string]string{"openbao.org/cluster": "bao"}}}
}

var secretGR = schema.GroupResource{Resource: "secrets"}

// kube returns a fake Kubernetes client whose creates fail as told:
// dryRun and real errors, real failing for the first realFailures calls
// (-1: always).
func kube(dryRun, real error, realFailures int) (client.WithWatch, *int) {
	calls := 0
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			o := &client.CreateOptions{}
			o.ApplyOptions(opts)
			if len(o.DryRun) > 0 {
				if dryRun != nil {
					return dryRun
				}
				return c.Create(ctx, obj, opts...)
			}
			calls++
			if real != nil && (realFailures < 0 || calls <= realFailures) {
				return real
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	return c, &calls
}

func noSleep(context.Context, time.Duration) error { return nil }

func storedToken(t *testing.T, c client.Client) (string, bool) {
	t.Helper()
	var s corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "bao-root-token"}, &s); err != nil {
		return "", false
	}
	return string(s.Data[bootstrap.RootTokenDataKey]), true
}

func TestInitialize(t *testing.T) {
	// An admission webhook that echoes the object it refused.
	echo := apierrors.NewForbidden(secretGR, "bao-root-token", errors.New("denied object with data token="+rootToken))
	if !strings.Contains(echo.Error(), rootToken) {
		t.Fatal("the echoing webhook's error should hold the token, or the case proves nothing")
	}
	tests := []struct {
		name         string
		dryRun, real error
		realFailures int
		initErr      error
		reason       string // "" for success
		initCalls    int
		stored       bool
		initialized  bool
	}{
		{name: "the token is stored and the cluster initialized", initCalls: 1, stored: true},
		{name: "a failing dry run never calls sys/init",
			dryRun: apierrors.NewForbidden(secretGR, "bao-root-token", errors.New("RBAC")), reason: bootstrap.ReasonRootTokenSecretUnwritable},
		{name: "an existing Secret fails the dry run and never calls sys/init",
			dryRun: apierrors.NewAlreadyExists(secretGR, "bao-root-token"), reason: bootstrap.ReasonRootTokenSecretUnwritable},
		{name: "a failed sys/init stores nothing and is retried later",
			initErr: &openbao.StatusError{Op: "sys/init", Code: 503}, initCalls: 1, reason: bootstrap.ReasonInitFailed},
		{name: "a create that fails twice after init is retried with the in-memory token",
			real: apierrors.NewServiceUnavailable("etcd leader change"), realFailures: 2, initCalls: 1, stored: true},
		{name: "a create that always fails after init loses the token without showing it",
			real: echo, realFailures: -1, initCalls: 1, reason: bootstrap.ReasonRootTokenLost, initialized: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, lines := logCtx(t)
			kc, creates := kube(tc.dryRun, tc.real, tc.realFailures)
			bao := &openbaofake.Client{InitAnswer: openbao.InitResult{RootToken: openbao.NewToken(rootToken)}, InitErr: tc.initErr}
			_, err := bootstrap.Initialize(ctx, bao, &bootstrap.SecretTokenStore{Client: kc, Template: template()},
				bootstrap.InitOptions{Sleep: noSleep, StoreAttempts: 3})
			recordErr(err)
			if got := bao.CallCount("Init"); got != tc.initCalls {
				t.Errorf("sys/init called %d time(s), want %d", got, tc.initCalls)
			}
			token, stored := storedToken(t, kc)
			if stored != tc.stored || (stored && token != rootToken) {
				t.Errorf("stored %v, want %v", stored, tc.stored)
			}
			var ie *bootstrap.InitError
			switch {
			case tc.reason == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.reason != "" && !errors.As(err, &ie):
				t.Fatalf("error %v, want an InitError %s", err, tc.reason)
			case tc.reason != "":
				if ie.Reason != tc.reason || ie.Initialized != tc.initialized {
					t.Errorf("reason %s initialized %v, want %s %v", ie.Reason, ie.Initialized, tc.reason, tc.initialized)
				}
			}
			if tc.reason == bootstrap.ReasonRootTokenLost {
				if !errors.Is(err, bootstrap.ErrTokenNotStored) || *creates != 3 {
					t.Errorf("error %v after %d creates, want ErrTokenNotStored after 3", err, *creates)
				}
				if !strings.Contains(strings.Join(*lines, "\n"), `"event_type"="openbao.bootstrap.root_token_lost"`) {
					t.Errorf("no audit line for the lost token: %v", *lines)
				}
			}
			if tc.stored && !strings.Contains(strings.Join(*lines, "\n"), `"audit"=true "event_type"="openbao.bootstrap.initialized"`) {
				t.Errorf("no audit line for init: %v", *lines)
			}
		})
	}
}

func TestInitializeSetsTheBootstrapAutopilotWithTheNewToken(t *testing.T) {
	ctx, _ := logCtx(t)
	kc, _ := kube(nil, nil, 0)
	bao := &openbaofake.Client{InitAnswer: openbao.InitResult{RootToken: openbao.NewToken(rootToken)}}
	withToken := &openbaofake.Client{}
	var gotToken openbao.Token
	want := autopilot.For(3, autopilot.Overrides{}, autopilot.PhaseBootstrap)
	out, err := bootstrap.Initialize(ctx, bao, &bootstrap.SecretTokenStore{Client: kc, Template: template()}, bootstrap.InitOptions{
		Autopilot:       &want,
		ClientWithToken: func(tok openbao.Token) (openbao.Client, error) { gotToken = tok; return withToken, nil },
	})
	recordErr(err)
	if err != nil || out.AutopilotErr != nil {
		t.Fatalf("error %v, autopilot %v", err, out.AutopilotErr)
	}
	if gotToken.Reveal() != rootToken || withToken.Autopilot != want {
		t.Errorf("autopilot %+v with the new token %v, want %+v", withToken.Autopilot, gotToken.Reveal() == rootToken, want)
	}
}

func TestInitializeAutopilotWrite(t *testing.T) {
	notActive := &openbao.StatusError{Op: "autopilot", Code: 500, Messages: []string{"local node not active but active cluster node not found"}}
	tests := []struct {
		name     string
		err      error
		failures int
		calls    int
		is       error // nil: written
	}{
		{name: "a node not yet active right after init is retried until it is", err: notActive, failures: 2, calls: 3},
		{name: "a refusal is final and reported without failing init", err: &openbao.StatusError{Op: "autopilot", Code: 400}, calls: 1, is: openbao.ErrInvalidRequest},
		{name: "a node that never becomes active is given up after the bound", err: notActive, calls: 4, is: notActive},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, _ := logCtx(t)
			kc, _ := kube(nil, nil, 0)
			bao := &openbaofake.Client{InitAnswer: openbao.InitResult{RootToken: openbao.NewToken(rootToken)}}
			withToken := &openbaofake.Client{SetAutopilotErr: tc.err, SetAutopilotFailures: tc.failures}
			cfg := autopilot.For(3, autopilot.Overrides{}, autopilot.PhaseBootstrap)
			out, err := bootstrap.Initialize(ctx, bao, &bootstrap.SecretTokenStore{Client: kc, Template: template()}, bootstrap.InitOptions{
				Autopilot: &cfg, Sleep: noSleep, AutopilotAttempts: 4,
				ClientWithToken: func(openbao.Token) (openbao.Client, error) { return withToken, nil },
			})
			recordErr(err)
			recordErr(out.AutopilotErr)
			if err != nil {
				t.Fatalf("init failed over autopilot: %v", err)
			}
			if got := withToken.CallCount("SetAutopilotConfiguration"); got != tc.calls {
				t.Errorf("%d write(s), want %d", got, tc.calls)
			}
			if tc.is == nil && out.AutopilotErr != nil || tc.is != nil && !errors.Is(out.AutopilotErr, tc.is) {
				t.Errorf("autopilot error %v, want %v", out.AutopilotErr, tc.is)
			}
		})
	}
}

func TestACreateWhoseAnswerWasLostCountsAsStored(t *testing.T) {
	ctx, _ := logCtx(t)
	// The first create reaches etcd, but the client sees a timeout; the
	// second finds the Secret holding the same token.
	calls := 0
	kc := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			calls++
			err := c.Create(ctx, obj, opts...)
			if calls == 2 && err == nil {
				return apierrors.NewTimeoutError("slow etcd", 1)
			}
			return err
		},
	}).Build()
	bao := &openbaofake.Client{InitAnswer: openbao.InitResult{RootToken: openbao.NewToken(rootToken)}}
	_, err := bootstrap.Initialize(ctx, bao, &bootstrap.SecretTokenStore{Client: kc, Template: template()}, bootstrap.InitOptions{Sleep: noSleep})
	recordErr(err)
	if err != nil {
		t.Fatalf("error %v", err)
	}
	if token, ok := storedToken(t, kc); !ok || token != rootToken {
		t.Error("token not stored")
	}
}

func TestASecretHoldingAnotherTokenIsNotTakenForOurs(t *testing.T) {
	ctx, _ := logCtx(t)
	existing := template()
	existing.Data = map[string][]byte{bootstrap.RootTokenDataKey: []byte("someone else's")}
	// The dry run passed (the Secret appeared between dry run and create).
	kc := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			o := &client.CreateOptions{}
			o.ApplyOptions(opts)
			if len(o.DryRun) == 0 {
				_ = c.Create(ctx, existing.DeepCopy())
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	bao := &openbaofake.Client{InitAnswer: openbao.InitResult{RootToken: openbao.NewToken(rootToken)}}
	_, err := bootstrap.Initialize(ctx, bao, &bootstrap.SecretTokenStore{Client: kc, Template: template()}, bootstrap.InitOptions{Sleep: noSleep, StoreAttempts: 2})
	recordErr(err)
	var ie *bootstrap.InitError
	if !errors.As(err, &ie) || ie.Reason != bootstrap.ReasonRootTokenLost {
		t.Fatalf("error %v, want RootTokenLost", err)
	}
}

// cancelDuringInit ends the caller's context while sys/init runs, as a
// SIGTERM to the manager would.
type cancelDuringInit struct {
	*openbaofake.Client
	cancel context.CancelFunc
}

func (c cancelDuringInit) Init(ctx context.Context, req openbao.InitRequest) (openbao.InitResult, error) {
	c.cancel()
	return c.Client.Init(ctx, req)
}

// contextAwareKube fails writes on an ended context, as client-go does.
func contextAwareKube() client.WithWatch {
	return fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
}

// OpenBao finishes sys/init whatever happens to the caller, so a shutdown
// that began during the call must not keep the token from its Secret.
func TestAShutdownDuringSysInitStillStoresTheToken(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kc := contextAwareKube()
	bao := cancelDuringInit{Client: &openbaofake.Client{InitAnswer: openbao.InitResult{RootToken: openbao.NewToken(rootToken)}}, cancel: cancel}
	_, err := bootstrap.Initialize(ctx, bao, &bootstrap.SecretTokenStore{Client: kc, Template: template()}, bootstrap.InitOptions{Sleep: noSleep})
	recordErr(err)
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if got, ok := storedToken(t, kc); !ok || got != rootToken {
		t.Fatal("the token did not reach its Secret after a shutdown began during sys/init")
	}
}

func TestAShutdownBeforeSysInitDoesNotStartIt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	kc := fake.NewClientBuilder().Build()
	bao := &openbaofake.Client{InitAnswer: openbao.InitResult{RootToken: openbao.NewToken(rootToken)}}
	store := &bootstrap.SecretTokenStore{Client: kc, Template: template()}
	cancel()
	_, err := bootstrap.Initialize(ctx, bao, store, bootstrap.InitOptions{Sleep: noSleep})
	if initErr := (*bootstrap.InitError)(nil); !errors.As(err, &initErr) || initErr.Initialized {
		t.Fatalf("error %v, want an InitError with the cluster uninitialized", err)
	}
	if n := bao.CallCount("Init"); n != 0 {
		t.Fatalf("sys/init called %d time(s) after the shutdown began", n)
	}
}
