package envtest_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestAPIServerStoresAndReturnsAnObject(t *testing.T) {
	ctx := context.Background()
	want := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
		Data:       map[string]string{"answer": "42"},
	}
	if err := k8s.Create(ctx, want); err != nil {
		t.Fatalf("create: %v", err)
	}
	var got corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(want), &got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Data["answer"] != "42" || got.UID == "" {
		t.Fatalf("read back %+v, want data answer=42 and a UID", got)
	}
}
