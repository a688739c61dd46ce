package admission_test

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/admission"
)

// referenceField matches the JSON names of fields that name a Secret, a
// ConfigMap or another cluster; refTypes are the types that hold such a
// name whatever the field is called.
var (
	referenceField = regexp.MustCompile(`(?i)(secretref|configmapref|secretname|configmapname)$|^(sourcecluster|clustername)$`)
	refTypes       = map[reflect.Type]bool{
		reflect.TypeFor[corev1.LocalObjectReference]():          true,
		reflect.TypeFor[v1alpha1.SecretKeyRef]():                true,
		reflect.TypeFor[v1alpha1.TrustedRootConfigMapRef]():     true,
		reflect.TypeFor[corev1.SecretKeySelector]():             true,
		reflect.TypeFor[corev1.ConfigMapKeySelector]():          true,
		reflect.TypeFor[corev1.SecretReference]():               true,
		reflect.TypeFor[corev1.ObjectReference]():               true,
		reflect.TypeFor[corev1.TypedLocalObjectReference]():     true,
		reflect.TypeFor[corev1.SecretVolumeSource]():            true,
		reflect.TypeFor[corev1.ConfigMapVolumeSource]():         true,
		reflect.TypeFor[corev1.ProjectedVolumeSource]():         true,
		reflect.TypeFor[corev1.EnvFromSource]():                 true,
		reflect.TypeFor[corev1.ServiceAccountTokenProjection](): true,
	}
)

// found is one reference field of the API types: the struct field indexes
// that reach it from the spec, and its JSON path.
type found struct {
	index []int
	path  string
}

// referenceFields walks a spec type and returns every field that names a
// Secret, a ConfigMap or a cluster, by name or by type. It descends into
// this API's own structs (through pointers and slices) only.
func referenceFields(t reflect.Type, index []int, path string) []found {
	var out []found
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		idx := append(append([]int(nil), index...), i)
		p := path + "." + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			if ft.Kind() == reflect.Slice {
				p += "[0]"
			}
			ft = ft.Elem()
		}
		if referenceField.MatchString(name) || refTypes[ft] {
			out = append(out, found{idx, p})
			continue
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == reflect.TypeFor[v1alpha1.OpenBaoClusterSpec]().PkgPath() {
			out = append(out, referenceFields(ft, idx, p)...)
		}
	}
	return out
}

// setReference fills the field at index in v (allocating what lies on the
// way) with a reference to name, and returns false for a type it cannot fill.
func setReference(v reflect.Value, index []int, name string) bool {
	for i, x := range index {
		for v.Kind() == reflect.Pointer || v.Kind() == reflect.Slice {
			switch v.Kind() {
			case reflect.Pointer:
				if v.IsNil() {
					v.Set(reflect.New(v.Type().Elem()))
				}
				v = v.Elem()
			case reflect.Slice:
				if v.Len() == 0 {
					v.Set(reflect.MakeSlice(v.Type(), 1, 1))
				}
				v = v.Index(0)
			}
		}
		v = v.Field(x)
		if i == len(index)-1 {
			break
		}
	}
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Slice {
		if v.Kind() == reflect.Slice {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			v = v.Index(0)
			continue
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	switch {
	case v.Kind() == reflect.String:
		v.SetString(name)
	case v.Kind() == reflect.Struct && v.FieldByName("Name").IsValid() && v.FieldByName("Name").Kind() == reflect.String:
		v.FieldByName("Name").SetString(name)
	default:
		return false
	}
	return true
}

// specKind is one kind's object, its spec, and the walker's list for it.
type specKind struct {
	obj  any
	spec reflect.Value
	list func() admission.References
}

// TestEveryReferenceFieldIsListed fills each field of the three specs that
// names a Secret, a ConfigMap or a cluster, one at a time, and wants the
// walker to list it at its path: a field added to the API types without
// being added to the walker fails here.
func TestEveryReferenceFieldIsListed(t *testing.T) {
	c := &v1alpha1.OpenBaoCluster{}
	b := &v1alpha1.OpenBaoBackup{}
	r := &v1alpha1.OpenBaoRestore{}
	kinds := []specKind{
		{c, reflect.ValueOf(&c.Spec).Elem(), func() admission.References { return admission.ClusterReferences(c) }},
		{b, reflect.ValueOf(&b.Spec).Elem(), func() admission.References { return admission.BackupReferences(b) }},
		{r, reflect.ValueOf(&r.Spec).Elem(), func() admission.References { return admission.RestoreReferences(r) }},
	}
	total := 0
	for _, k := range kinds {
		for _, f := range referenceFields(k.spec.Type(), nil, "spec") {
			total++
			t.Run(fmt.Sprintf("%T %s", k.obj, f.path), func(t *testing.T) {
				k.spec.Set(reflect.Zero(k.spec.Type()))
				c.Name = "self"
				name := "ref-" + strings.ToLower(strings.NewReplacer(".", "-", "[", "", "]", "").Replace(f.path))
				if !setReference(k.spec, f.index, name) {
					t.Fatalf("%s is of a type the test cannot fill: teach the walker and this test", f.path)
				}
				if !listed(k.list(), f.path, name) {
					t.Errorf("%s names %s, but the walker does not list it: add it to admission.*References", f.path, name)
				}
			})
		}
	}
	if total < 14 {
		t.Errorf("found %d reference fields, want at least 14: the walk of the types is broken", total)
	}
}

func listed(refs admission.References, path, name string) bool {
	for _, r := range refs.Objects {
		if r.Path.String() == path && r.Name == name {
			return true
		}
	}
	for _, n := range refs.Clusters {
		if n.Path.String() == path && n.Name == name {
			return true
		}
	}
	return false
}

// TestThePullSecretsOfSpecValuesAreListed: spec.values is free-form, so
// the reflective walk cannot see its imagePullSecrets; they are listed.
func TestThePullSecretsOfSpecValuesAreListed(t *testing.T) {
	c := &v1alpha1.OpenBaoCluster{}
	c.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"imagePullSecrets":[{"name":"mine"},{"name":"theirs"}]}`)}
	if refs := admission.ClusterReferences(c); !listed(refs, "spec.values.imagePullSecrets[1].name", "theirs") {
		t.Fatalf("the second pull Secret is not listed: %+v", refs.Objects)
	}
}
