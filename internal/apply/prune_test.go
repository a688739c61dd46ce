package apply_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/apply"
)

var (
	configMapGVK   = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	statefulSetGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}
)

func owner() *v1alpha1.OpenBaoCluster {
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "ns", UID: "owner-uid"}}
	c.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("OpenBaoCluster"))
	return c
}

// live builds listed object metadata, labelled as the operator labels its
// children; refs are its owner references.
func live(gvk schema.GroupVersionKind, name string, refs ...metav1.OwnerReference) metav1.PartialObjectMetadata {
	obj := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), OwnerReferences: refs,
		Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelCluster: "bao"},
	}}
	obj.SetGroupVersionKind(gvk)
	return obj
}

func unlabelled(obj metav1.PartialObjectMetadata) metav1.PartialObjectMetadata {
	delete(obj.Labels, v1alpha1.LabelManagedBy)
	return obj
}

func ref(uid types.UID, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "OpenBaoCluster", Name: "bao", UID: uid, Controller: &controller,
	}
}

func rendered(gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace("ns")
	u.SetName(name)
	return u
}

func TestLeftovers(t *testing.T) {
	ours, theirs := ref("owner-uid", true), ref("other-uid", true)
	cases := map[string]struct {
		live []metav1.PartialObjectMetadata
		keep []*unstructured.Unstructured
		want []string
	}{
		"nothing live leaves nothing": {},
		"an object still rendered is kept": {
			live: []metav1.PartialObjectMetadata{live(configMapGVK, "bao-config", ours)},
			keep: []*unstructured.Unstructured{rendered(configMapGVK, "bao-config")},
		},
		"an object no longer rendered is a leftover": {
			live: []metav1.PartialObjectMetadata{live(configMapGVK, "bao-old", ours)},
			keep: []*unstructured.Unstructured{rendered(configMapGVK, "bao-config")},
			want: []string{"bao-old"},
		},
		"an object of another kind with a kept name is a leftover": {
			live: []metav1.PartialObjectMetadata{live(statefulSetGVK, "bao", ours)},
			keep: []*unstructured.Unstructured{rendered(configMapGVK, "bao")},
			want: []string{"bao"},
		},
		"an object controlled by another owner is left alone": {
			live: []metav1.PartialObjectMetadata{live(configMapGVK, "foreign", theirs)},
		},
		"an object owned but not controlled by the cluster is left alone": {
			live: []metav1.PartialObjectMetadata{live(configMapGVK, "shared", ref("owner-uid", false))},
		},
		"an object with no owner is left alone": {
			live: []metav1.PartialObjectMetadata{live(configMapGVK, "orphan")},
		},
		"an object naming the cluster as controller without the operator's label is left alone": {
			live: []metav1.PartialObjectMetadata{unlabelled(live(configMapGVK, "hand-made", ours))},
		},
		"only the leftovers among many are returned, in list order": {
			live: []metav1.PartialObjectMetadata{
				live(configMapGVK, "z-old", ours), live(configMapGVK, "bao-config", ours),
				live(configMapGVK, "foreign", theirs), live(configMapGVK, "a-old", ours),
			},
			keep: []*unstructured.Unstructured{rendered(configMapGVK, "bao-config")},
			want: []string{"z-old", "a-old"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := apply.Leftovers(owner(), tc.live, tc.keep)
			var names []string
			for _, obj := range got {
				names = append(names, obj.Name)
			}
			if len(names) != len(tc.want) {
				t.Fatalf("leftovers %v, want %v", names, tc.want)
			}
			for i := range names {
				if names[i] != tc.want[i] {
					t.Fatalf("leftovers %v, want %v", names, tc.want)
				}
			}
		})
	}
}
