package envtest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/children"
)

// newCluster decodes a manifest for a test; the API server defaults it.
func newCluster(t testing.TB, namespace, manifest string) *v1alpha1.OpenBaoCluster {
	t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	if err := yaml.UnmarshalStrict([]byte(manifest), c); err != nil {
		t.Fatalf("test manifest: %v", err)
	}
	c.Namespace = namespace
	return c
}

// rawCluster decodes a manifest into an unstructured object, so that every
// field reaches the API server exactly as written.
func rawCluster(t *testing.T, namespace, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		t.Fatalf("test manifest: %v", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind("OpenBaoCluster")
	u.SetNamespace(namespace)
	return u
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

// childrenOf lists, by "Kind/name", every object of a renderable kind that
// carries the cluster's label.
func childrenOf(ctx context.Context, namespace, cluster string) (map[string]metav1.PartialObjectMetadata, error) {
	out := map[string]metav1.PartialObjectMetadata{}
	for _, gvk := range children.Rendered() {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind + "List"})
		err := k8s.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{v1alpha1.LabelCluster: cluster})
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, item := range list.Items {
			out[gvk.Kind+"/"+item.Name] = item
		}
	}
	return out, nil
}

func condition(ctx context.Context, c *v1alpha1.OpenBaoCluster, condType string) (*metav1.Condition, error) {
	latest := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), latest); err != nil {
		return nil, err
	}
	cond := meta.FindStatusCondition(latest.Status.Conditions, condType)
	if cond == nil || cond.ObservedGeneration != latest.Generation {
		return nil, errNotYet
	}
	return cond, nil
}

type notYet struct{}

func (notYet) Error() string { return "not observed yet" }

var errNotYet error = notYet{}

type apiextJSON = apiextensionsv1.JSON

func jsonValue(raw string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(raw)} }

func itoa(i int) string { return strconv.Itoa(i) }

// childrenAnyCluster counts the objects of renderable kinds in a namespace
// that carry any cluster label.
func childrenAnyCluster(ctx context.Context, namespace string) (int, error) {
	n := 0
	for _, gvk := range children.Rendered() {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind + "List"})
		err := k8s.List(ctx, list, client.InNamespace(namespace), client.HasLabels{v1alpha1.LabelCluster})
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return 0, err
		}
		n += len(list.Items)
	}
	return n, nil
}

func findDegraded(c *v1alpha1.OpenBaoCluster) *metav1.Condition {
	return meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionDegraded)
}
