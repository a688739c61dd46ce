// Package envtest_test is the envtest tier: a real kube-apiserver and etcd,
// built by `make tools`, with the OpenBaoCluster CRD installed and the
// operator's reconciler running in a manager against them.
package envtest_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/day2"
	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/test/testbin"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// managedNamespace is watched by the manager the suite runs; other
// namespaces are left to tests that drive the reconciler themselves.
const managedNamespace = "managed"

var (
	cfg    *rest.Config
	scheme = runtime.NewScheme()
	k8s    client.Client // the tests' own client
	// metricsURL is the manager's Prometheus endpoint, served as the
	// operator serves it.
	metricsURL string
	// apiServerCertDir holds the API server's certificates and its
	// service-account signing key (sa-signer.key).
	apiServerCertDir string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(false), zap.Level(zapcore.Level(zapLevel()))))
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	binDir, err := testbin.Dir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	root, _ := testbin.RepoRoot()
	env := &envtest.Environment{
		BinaryAssetsDirectory: binDir,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "start envtest from %s: %v\n", binDir, err)
		return 1
	}
	apiServerCertDir = env.ControlPlane.APIServer.CertDir
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop envtest: %v\n", err)
		}
	}()
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := startManager(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func zapLevel() int8 {
	if os.Getenv("ENVTEST_VERBOSE") != "" {
		return -1
	}
	return 1 // errors and warnings only: keep the tier's output readable
}

// startManager runs the OpenBaoCluster reconciler the way the operator's
// manager does (the same constructor and cache options, so the same label
// filters), scoped to managedNamespace.
func startManager(ctx context.Context) error {
	metricsAddr, err := freeLoopbackAddress()
	if err != nil {
		return err
	}
	metricsURL = "https://" + metricsAddr + "/metrics"
	opts := controllers.ManagerOptions(controllers.ManagerSettings{
		Scheme: scheme, MetricsAddr: metricsAddr,
	})
	// The one difference: the suite's manager owns one namespace, so that
	// tests may drive the reconciler by hand elsewhere.
	opts.Cache.DefaultNamespaces = map[string]cache.Config{managedNamespace: {}}
	// The manager acts as the operator's ServiceAccount with exactly the
	// generated ClusterRole, so that a right the code needs and the role
	// lacks fails here (stop 40's missing delete on openbaorestores showed
	// only on the node).
	managerCfg, err := asOperator(ctx)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(managerCfg, opts)
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	r, err := controllers.NewReconciler(mgr, controllers.Options{
		Operator: values.Operator{Namespace: "openbao-operator-system"}, ResyncPeriod: 10 * time.Minute,
	})
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr, 2); err != nil {
		return err
	}
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managedNamespace}}); err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "manager stopped: %v\n", err)
		}
	}()
	return waitForListener(metricsAddr, 30*time.Second)
}

// suiteManagerUser is the suite's manager: a ServiceAccount of its own,
// bound to the operator's generated ClusterRole. The tenancy tests act as
// the operator's own ServiceAccount with the tenancy install's rights,
// which a cluster-wide binding of that name would widen.
const suiteManagerUser = "system:serviceaccount:" + operatorNamespace + ":envtest-manager"

// asOperator creates the operator's generated ClusterRole
// (config/rbac/role.yaml) and binds it to suiteManagerUser, and returns a
// config that acts as that ServiceAccount: exactly the role's rights.
func asOperator(ctx context.Context) (*rest.Config, error) {
	root, _ := testbin.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		return nil, fmt.Errorf("config/rbac/role.yaml: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "envtest-manager"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "envtest-manager", Namespace: operatorNamespace}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
		}
	}
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: suiteManagerUser, Groups: serviceAccountGroups(operatorNamespace)}
	return c, nil
}

// waitForListener waits until addr accepts connections: the metrics
// server starts with the manager, after its self-signed certificate.
func waitForListener(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the metrics endpoint %s is not up after %s: %w", addr, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freeLoopbackAddress finds a port nobody listens on: the metrics server
// does not tell which port ":0" gave it.
func freeLoopbackAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port for the metrics endpoint: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func newReconciler(c client.Client, reader client.Reader, rec recorder.EventRecorder) (*controllers.OpenBaoClusterReconciler, error) {
	renderer, err := render.New()
	if err != nil {
		return nil, err
	}
	return &controllers.OpenBaoClusterReconciler{
		Client:       c,
		APIReader:    reader,
		Renderer:     renderer,
		Applier:      controllers.NewApplier(c, c, reader),
		Operator:     values.Operator{Namespace: "openbao-operator-system"},
		Recorder:     rec,
		Clock:        clock.RealClock{},
		ResyncPeriod: 10 * time.Minute,
		Operations:   &day2.Registry{},
	}, nil
}

// writeCounter counts the requests that change state in the API server.
type writeCounter struct {
	next   http.RoundTripper
	writes atomic.Int64
	log    chan string
}

func (w *writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		w.writes.Add(1)
		select {
		case w.log <- req.Method + " " + req.URL.Path:
		default:
		}
	}
	return w.next.RoundTrip(req)
}

// countingConfig returns a copy of cfg whose writes are counted.
func countingConfig() (*rest.Config, *writeCounter) {
	counter := &writeCounter{log: make(chan string, 64)}
	c := rest.CopyConfig(cfg)
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		counter.next = rt
		return counter
	}
	return c, counter
}

func createNamespace(t testing.TB, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}
