// Package envtest_test is the envtest tier: a real kube-apiserver and etcd,
// built by `make tools`, with no nodes and no controllers but ours.
package envtest_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/openbao/operator/test/testbin"
)

func TestAPIServerStoresAndReturnsAnObject(t *testing.T) {
	binDir, err := testbin.Dir()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: binDir}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest from %s: %v", binDir, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
		Data:       map[string]string{"answer": "42"},
	}
	if err := c.Create(ctx, want); err != nil {
		t.Fatalf("create: %v", err)
	}
	var got corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(want), &got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Data["answer"] != "42" || got.UID == "" {
		t.Fatalf("read back %+v, want data answer=42 and a UID", got)
	}
}
