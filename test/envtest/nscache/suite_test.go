// Package nscache_test runs internal/nscache against the real
// kube-apiserver and etcd from bin/: its own control plane, no CRDs and no
// operator, since the cache is all that is under test.
package nscache_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/openbao/operator/internal/nscache"
	"github.com/openbao/operator/test/testbin"
)

var (
	cfg    *rest.Config
	scheme = runtime.NewScheme()
	k8s    client.Client // the tests' own client, as cluster admin
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	level := zapcore.Level(1) // errors only: keep the output readable
	if os.Getenv("ENVTEST_VERBOSE") != "" {
		level = -1
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(level)))
	_ = clientgoscheme.AddToScheme(scheme)
	binDir, err := testbin.Dir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env := &envtest.Environment{BinaryAssetsDirectory: binDir}
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "start envtest from %s: %v\n", binDir, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop envtest: %v\n", err)
		}
	}()
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

var configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

// startCache runs an nscache on restCfg until the test ends, serving
// namespaces, and returns it once Start runs.
func startCache(t *testing.T, restCfg *rest.Config, opts cache.Options, clusterWide func(schema.GroupVersionKind) bool, namespaces ...string) *nscache.Cache {
	t.Helper()
	opts.Scheme = scheme
	c, err := nscache.New(restCfg, opts, clusterWide)
	if err != nil {
		t.Fatalf("nscache.New: %v", err)
	}
	c.SetNamespaces(namespaces)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-stopped:
			if err != nil {
				t.Errorf("Start returned %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("Start did not return 30s after its context ended")
		}
	})
	syncCtx, done := context.WithTimeout(ctx, 30*time.Second)
	defer done()
	if !c.WaitForCacheSync(syncCtx) {
		t.Fatal("the cache did not sync")
	}
	return c
}

var nsCounter atomic.Int32

// namespace creates a namespace named after the test and returns its name.
func namespace(t *testing.T, label string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%s-%d", strings.ToLower(t.Name()), label, nsCounter.Add(1))
	name = strings.NewReplacer("/", "-", "_", "-").Replace(name)
	if len(name) > 63 {
		name = name[len(name)-63:]
	}
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return name
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
}

func configMap(ns, name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

// eventually polls cond until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// names returns "namespace/name" of each item, in order.
func names(list *corev1.ConfigMapList) []string {
	out := make([]string, 0, len(list.Items))
	for _, cm := range list.Items {
		out = append(out, cm.Namespace+"/"+cm.Name)
	}
	return out
}

func metaWithLabels(ns, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
}
