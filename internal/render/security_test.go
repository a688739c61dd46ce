package render_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/test/fixtures"
)

// crdKinds are rendered kinds whose types live outside client-go.
var crdKinds = map[string]bool{"TLSRoute": true, "ServiceMonitor": true, "PrometheusRule": true}

// TestRenderedObjectsDecodeStrictly converts every built-in object into its
// typed Go struct and fails on any field the type does not know, so a typo
// in a template (say, readOnlyRootFileSystem) cannot be applied silently.
func TestRenderedObjectsDecodeStrictly(t *testing.T) {
	r := newRenderer(t)
	files := fixtures.Files(t)
	for _, name := range fixtures.Names(files) {
		t.Run(name, func(t *testing.T) {
			_, _, objs := renderFixture(t, r, fixtures.Load(t, files[name]))
			for _, obj := range objs {
				if crdKinds[obj.GetKind()] {
					continue
				}
				typedObj, err := clientgoscheme.Scheme.New(obj.GroupVersionKind())
				if err != nil {
					t.Errorf("%s %s: not a built-in kind: %v", obj.GetKind(), obj.GetName(), err)
					continue
				}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, typedObj, true); err != nil {
					t.Errorf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
				}
			}
		})
	}
}

func TestPodTemplateIsRestricted(t *testing.T) {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restricted := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
	r := newRenderer(t)
	files := fixtures.Files(t)
	for _, name := range fixtures.Names(files) {
		for _, openshift := range []bool{false, true} {
			t.Run(name+platform(openshift), func(t *testing.T) {
				op := values.Operator{Namespace: testOperator.Namespace, OpenShift: openshift}
				objs := renderWith(t, r, fixtures.Load(t, files[name]), op)
				for _, sts := range statefulSets(t, objs) {
					pod := sts.Spec.Template
					for _, res := range evaluator.EvaluatePod(restricted, &pod.ObjectMeta, &pod.Spec) {
						if !res.Allowed {
							t.Errorf("%s: pod security restricted: %s: %s", sts.Name, res.ForbiddenReason, res.ForbiddenDetail)
						}
					}
					checkRestrictedByHand(t, &pod.Spec)
					if openshift {
						checkNoIDs(t, &pod.Spec)
					}
				}
			})
		}
	}
}

func platform(openshift bool) string {
	if openshift {
		return "/openshift"
	}
	return "/kubernetes"
}

// checkRestrictedByHand asserts the fields the brief names, beyond what the
// evaluator demands (readOnlyRootFilesystem is not a PSS check).
func checkRestrictedByHand(t *testing.T, spec *corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod seccompProfile is not RuntimeDefault")
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("pod uses a host namespace")
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a hostPath", v.Name)
		}
	}
	for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("container %s has no securityContext", c.Name)
			continue
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("container %s: readOnlyRootFilesystem is not true", c.Name)
		case sc.Privileged != nil && *sc.Privileged:
			t.Errorf("container %s is privileged", c.Name)
		case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
			t.Errorf("container %s: capabilities drop is not [ALL]", c.Name)
		case len(sc.Capabilities.Add) > 0:
			t.Errorf("container %s adds capabilities %v", c.Name, sc.Capabilities.Add)
		}
	}
}

// checkNoIDs: OpenShift's restricted SCC assigns user and group IDs from the
// namespace's range and rejects pods that pick their own.
func checkNoIDs(t *testing.T, spec *corev1.PodSpec) {
	t.Helper()
	if psc := spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil || psc.RunAsGroup != nil || psc.FSGroup != nil {
			t.Errorf("pod sets IDs on OpenShift: runAsUser %v runAsGroup %v fsGroup %v", psc.RunAsUser, psc.RunAsGroup, psc.FSGroup)
		}
	}
	for _, c := range spec.Containers {
		if sc := c.SecurityContext; sc != nil && (sc.RunAsUser != nil || sc.RunAsGroup != nil) {
			t.Errorf("container %s sets IDs on OpenShift", c.Name)
		}
	}
}

func TestOpenShiftRendersNoIDsAnywhere(t *testing.T) {
	r := newRenderer(t)
	objs := renderWith(t, r, fixture(t, "overrides"), values.Operator{Namespace: "ops", OpenShift: true})
	for _, obj := range objs {
		for _, key := range []string{"runAsUser", "runAsGroup", "fsGroup"} {
			if path := findKey(obj.Object, key, obj.GetKind()); path != "" {
				t.Errorf("%s sets %s on OpenShift", path, key)
			}
		}
	}
	// Off OpenShift the IDs are set, so the search above can find them.
	plain := renderWith(t, r, fixture(t, "overrides"), values.Operator{Namespace: "ops"})
	if findKey(find(plain, "StatefulSet")[0].Object, "fsGroup", "StatefulSet") == "" {
		t.Error("fsGroup is missing off OpenShift; the test above is vacuous")
	}
}

// findKey returns the path of the first map key named key, or "".
func findKey(v any, key, path string) string {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if k == key {
				return path + "." + k
			}
			if p := findKey(child, key, path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for _, child := range v {
			if p := findKey(child, key, path+"[]"); p != "" {
				return p
			}
		}
	}
	return ""
}

// TestStrictDecodingCatchesATypo proves the strict check above can fail:
// a misspelt field in a rendered StatefulSet is reported.
func TestStrictDecodingCatchesATypo(t *testing.T) {
	objs := renderWith(t, newRenderer(t), fixture(t, sample), testOperator)
	sts := find(objs, "StatefulSet")[0]
	containers, _, err := unstructured.NestedSlice(sts.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) == 0 {
		t.Fatalf("no containers: %v", err)
	}
	containers[0].(map[string]any)["securityContext"].(map[string]any)["readOnlyRootFileSystem"] = true
	if err := unstructured.SetNestedSlice(sts.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	typedObj, err := clientgoscheme.Scheme.New(sts.GroupVersionKind())
	if err != nil {
		t.Fatal(err)
	}
	err = runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(sts.Object, typedObj, true)
	if err == nil || !strings.Contains(err.Error(), "readOnlyRootFileSystem") {
		t.Fatalf("error %v, want one naming the unknown field", err)
	}
}

// TestServersMayLabelOnlyTheirOwnPods keeps the service-registration Role
// from writing to any pod but the cluster's: with a grant on every pod, a
// server could forge openbao-active or openbao-initialized on another
// cluster's pods. Only list, which reads, is unbounded (Raft auto_join).
func TestServersMayLabelOnlyTheirOwnPods(t *testing.T) {
	r := newRenderer(t)
	files := fixtures.Files(t)
	for _, name := range fixtures.Names(files) {
		t.Run(name, func(t *testing.T) {
			c := fixtures.Load(t, files[name])
			var role rbacv1.Role
			typed(t, renderWith(t, r, c, testOperator), "Role", &role)
			want := c.PodNames()
			if c.Spec.ReadReplicas != nil && c.Status.Initialized {
				want = append(want, c.ReadPodNames()...) // the read replicas label themselves too
			}
			for _, rule := range role.Rules {
				if len(rule.ResourceNames) > 0 {
					if !slices.Equal(rule.ResourceNames, want) {
						t.Errorf("rule %v names %v, want the cluster's pods %v", rule.Verbs, rule.ResourceNames, want)
					}
					continue
				}
				for _, verb := range rule.Verbs {
					if verb != "list" {
						t.Errorf("%s on %v is not limited to the cluster's pods", verb, rule.Resources)
					}
				}
			}
		})
	}
}

// TestEveryRenderedObjectCarriesTheOperatorsLabel: the operator applies
// over an existing object only when it carries this label (apply.Claim),
// so a child rendered without it would be refused at the next pass.
func TestEveryRenderedObjectCarriesTheOperatorsLabel(t *testing.T) {
	r := newRenderer(t)
	files := fixtures.Files(t)
	for _, name := range fixtures.Names(files) {
		t.Run(name, func(t *testing.T) {
			for _, obj := range renderWith(t, r, fixtures.Load(t, files[name]), testOperator) {
				if obj.GetLabels()[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
					t.Errorf("%s %s lacks %s=%s", obj.GetKind(), obj.GetName(), v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue)
				}
			}
		})
	}
}
