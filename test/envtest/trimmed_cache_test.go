package envtest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
)

// TestTheTrimmedCacheKeepsWhatTheApplierAndOthersNeed: the manager's cache
// keeps, of each object's managedFields, the operator's apply entry alone
// (apply.TrimManagedFields). Against the real API server, through that
// cache: a child applied and unchanged is not applied again, one whose
// owned field another manager changed is; and a Secret the operator
// updates from the cache keeps the other managers' entries.
func TestTheTrimmedCacheKeepsWhatTheApplierAndOthersNeed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "trimmed-cache"
	createNamespace(t, ns)
	opts := controllers.CacheOptions()
	opts.Scheme = scheme
	opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	informers, err := cache.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = informers.Start(ctx) }()
	owner := newCluster(t, ns, "metadata: {name: bao}\nspec: {version: 2.4.0}\n")
	if err := k8s.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	countedCfg, counter := countingConfig()
	cl, err := client.New(countedCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	applier := controllers.NewApplier(cl, informers, cl)
	key := client.ObjectKey{Namespace: ns, Name: "bao-config"}
	applyConfigMap := func(what string) int64 {
		t.Helper()
		counter.writes.Store(0)
		cm := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": key.Name, "namespace": ns, "labels": map[string]any{
				v1alpha1.LabelCluster: "bao", v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}},
			"data": map[string]any{"config.hcl": "ui = false\n"},
		}}
		if _, err := applier.Apply(ctx, owner, []*unstructured.Unstructured{cm}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return counter.writes.Load()
	}
	// cachedAt waits until the cache holds the object at the API server's
	// resourceVersion, and returns the cached copy.
	cachedAt := func(obj client.Object) client.Object {
		t.Helper()
		live := obj.DeepCopyObject().(client.Object)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
			t.Fatal(err)
		}
		cached := obj.DeepCopyObject().(client.Object)
		eventually(t, 10*time.Second, "the cache sees "+obj.GetName(), func() error {
			if err := informers.Get(ctx, client.ObjectKeyFromObject(obj), cached); err != nil {
				return err
			}
			if cached.GetResourceVersion() != live.GetResourceVersion() {
				return fmt.Errorf("cached at %s, live at %s", cached.GetResourceVersion(), live.GetResourceVersion())
			}
			return nil
		})
		return cached
	}

	if n := applyConfigMap("first apply"); n != 1 {
		t.Fatalf("first apply: %d writes, want 1", n)
	}
	cm := cachedAt(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}})
	if mf := cm.GetManagedFields(); len(mf) != 1 || mf[0].Manager != v1alpha1.FieldManager {
		t.Fatalf("cached managedFields %v, want the operator's apply entry alone", managers(mf))
	}
	if n := applyConfigMap("an unchanged child"); n != 0 {
		t.Errorf("an unchanged child: %d writes, want 0", n)
	}

	edited := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, key, edited); err != nil {
		t.Fatal(err)
	}
	edited.Data["config.hcl"] = "ui = true\n"
	if err := k8s.Update(ctx, edited, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	cachedAt(edited)
	if n := applyConfigMap("a child another manager changed"); n != 1 {
		t.Errorf("a child another manager changed: %d writes, want 1", n)
	}
	if err := k8s.Get(ctx, key, edited); err != nil || edited.Data["config.hcl"] != "ui = false\n" {
		t.Errorf("config.hcl %q after the apply (%v), want it set back", edited.Data["config.hcl"], err)
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bao-unseal-key",
		Labels: map[string]string{v1alpha1.LabelCluster: "bao"}}, Data: map[string][]byte{"key": []byte("one")}}
	if err := k8s.Create(ctx, secret, client.FieldOwner("creator")); err != nil {
		t.Fatal(err)
	}
	secret.Annotations = map[string]string{"team": "platform"}
	if err := k8s.Update(ctx, secret, client.FieldOwner("annotator")); err != nil {
		t.Fatal(err)
	}
	fromCache := cachedAt(secret).(*corev1.Secret)
	if len(fromCache.ManagedFields) != 0 {
		t.Fatalf("cached Secret managedFields %v, want none", managers(fromCache.ManagedFields))
	}
	fromCache.Data = map[string][]byte{"key": []byte("two")}
	if err := cl.Update(ctx, fromCache, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"creator", "annotator", v1alpha1.FieldManager} {
		if !slices.Contains(managers(secret.ManagedFields), m) {
			t.Errorf("after an update from the cache, the Secret's managers are %v: %s lost", managers(secret.ManagedFields), m)
		}
	}
}

func managers(mf []metav1.ManagedFieldsEntry) []string {
	out := make([]string, 0, len(mf))
	for _, e := range mf {
		out = append(out, e.Manager)
	}
	return out
}
