// Package olm_test checks the OLM bundle (bundle/, from make bundle) and the
// catalog beside this file with the validators operator-sdk's
// operatorframework suite runs, as a library: make test needs no
// operator-sdk. Whether bundle/ is exactly what make bundle would write
// needs operator-sdk and is left to make bundle; these tests check what can
// drift without it (CRDs, RBAC, the OLM deployment).
package olm_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/internal/wrapper"
)

const bundleDir = "../bundle"

func loadBundle(t *testing.T) *manifests.Bundle {
	t.Helper()
	b, err := manifests.GetBundleFromDir(bundleDir)
	if err != nil {
		t.Fatal(err)
	}
	if b.CSV == nil {
		t.Fatal("the bundle has no ClusterServiceVersion")
	}
	return b
}

// knownWarning is the one warning operator-sdk prints too: the validator
// takes any "events" rule for events.k8s.io/v1beta1 (removed in 1.25),
// while the role names the core and events.k8s.io/v1 events.
func knownWarning(e errors.Error) bool {
	return e.Level == errors.LevelWarn && strings.Contains(e.Error(), "Migrate the API(s) for events")
}

func TestBundleValidates(t *testing.T) {
	b := loadBundle(t)
	optional := map[string]string{"k8s-version": "1.33"}
	check := func(name string, v interfaces.Validator, objs ...any) {
		for _, result := range v.Validate(append(objs, optional)...) {
			for _, e := range result.Errors {
				t.Errorf("%s: %s", name, e)
			}
			for _, w := range result.Warnings {
				if !knownWarning(w) {
					t.Errorf("%s (warning): %s", name, w)
				}
			}
		}
	}
	check("bundle", validation.BundleValidator, b)
	check("csv", validation.ClusterServiceVersionValidator, b.CSV)
	for _, crd := range b.V1CRDs {
		check("crd "+crd.Name, validation.CustomResourceDefinitionValidator, crd)
	}
	check("operatorhub", validation.OperatorHubV2Validator, b)
	check("capabilities", validation.StandardCapabilitiesValidator, b)
	check("categories", validation.StandardCategoriesValidator, b)
	check("deprecated APIs", validation.AlphaDeprecatedAPIsValidator, b)
	check("good practices", validation.GoodPracticesValidator, b)
}

// TestBundleMatchesConfig catches a bundle not regenerated after config/
// changed: CRDs, the manager's rules, the deployment as OLM runs it.
func TestBundleMatchesConfig(t *testing.T) {
	b := loadBundle(t)
	for _, crd := range b.V1CRDs {
		var want apiextensionsv1.CustomResourceDefinition
		readYAML(t, "../config/crd/bases/"+crd.Name[strings.Index(crd.Name, ".")+1:]+"_"+crd.Spec.Names.Plural+".yaml", &want)
		if !reflect.DeepEqual(crd.Spec, want.Spec) {
			t.Errorf("bundle CRD %s differs from config/crd/bases (run make bundle)", crd.Name)
		}
	}
	bases, err := filepath.Glob("../config/crd/bases/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// OpenBaoTenant stays out: under OLM the OperatorGroup picks the namespaces.
	if len(b.V1CRDs) != len(bases)-1 {
		t.Errorf("the bundle has %d CRDs, config/crd/bases %d besides OpenBaoTenant", len(b.V1CRDs), len(bases)-1)
	}
	spec := b.CSV.Spec.InstallStrategy.StrategySpec
	checkPermissions(t, spec)
	if len(spec.DeploymentSpecs) != 1 {
		t.Fatalf("the CSV has %d deployments, want the manager", len(spec.DeploymentSpecs))
	}
	pod := spec.DeploymentSpecs[0].Spec.Template.Spec
	manager := pod.Containers[0]
	// OLM mounts its own certificate at the webhook's directory: the
	// operator must not issue one, nor shadow OLM's with a volume.
	if !slices.Contains(manager.Args, "--webhook-cert-managed=false") || len(pod.Volumes) != 0 || len(manager.VolumeMounts) != 0 {
		t.Errorf("the CSV's manager issues its own webhook certificate or mounts a volume: args %v, volumes %v", manager.Args, pod.Volumes)
	}
	for _, w := range b.CSV.Spec.WebhookDefinitions {
		if w.DeploymentName != spec.DeploymentSpecs[0].Name {
			t.Errorf("webhook %s is served by deployment %q, not the manager", w.GenerateName, w.DeploymentName)
		}
	}
	checkWebhooks(t, b.CSV.Spec.WebhookDefinitions)
}

// checkWebhooks: the CSV defines config/webhook's webhooks, each with the
// same path, rules, failure policy, side effects and timeout.
func checkWebhooks(t *testing.T, defs []v1alpha1.WebhookDescription) {
	t.Helper()
	var want admissionregistrationv1.ValidatingWebhookConfiguration
	readYAML(t, "../config/webhook/manifests.yaml", &want)
	if len(defs) != len(want.Webhooks) {
		t.Errorf("the CSV has %d webhook definitions, config/webhook %d (run make bundle)", len(defs), len(want.Webhooks))
	}
	for _, w := range want.Webhooks {
		i := slices.IndexFunc(defs, func(d v1alpha1.WebhookDescription) bool { return d.GenerateName == w.Name })
		if i < 0 {
			t.Errorf("the CSV lacks webhook %s (run make bundle)", w.Name)
			continue
		}
		d := defs[i]
		same := d.WebhookPath != nil && *d.WebhookPath == *w.ClientConfig.Service.Path && reflect.DeepEqual(d.Rules, w.Rules) &&
			*d.FailurePolicy == *w.FailurePolicy && *d.SideEffects == *w.SideEffects && *d.TimeoutSeconds == *w.TimeoutSeconds
		if !same {
			t.Errorf("the CSV's webhook %s differs from config/webhook's (run make bundle)", w.Name)
		}
	}
}

// checkPermissions: the controller holds the controller role cluster-wide
// and the tenant role (with leader election) as permissions, which OLM
// grants only in the OperatorGroup's namespaces. The manager's whole role
// as cluster permissions would make every install mode cluster-wide.
func checkPermissions(t *testing.T, spec v1alpha1.StrategyDetailsDeployment) {
	t.Helper()
	var controller, tenant, leaderElection rbacv1.ClusterRole
	readYAML(t, "../config/tenancy/roles/controller_role.yaml", &controller)
	readYAML(t, "../config/tenancy/roles/tenant_role.yaml", &tenant)
	readYAML(t, "../config/rbac/leader_election_role.yaml", &leaderElection)
	if len(spec.ClusterPermissions) != 1 || !sameRules(spec.ClusterPermissions[0].Rules, controller.Rules) {
		t.Errorf("the CSV's cluster permissions are not config/tenancy/roles/controller_role.yaml (run make bundle)")
	}
	want := append(slices.Clone(tenant.Rules), leaderElection.Rules...)
	if len(spec.Permissions) != 1 || !sameRules(spec.Permissions[0].Rules, want) {
		t.Errorf("the CSV's permissions are not the tenant role and leader election (run make bundle)")
	}
}

// sameRules compares two rule lists as sets.
func sameRules(a, b []rbacv1.PolicyRule) bool {
	key := func(rules []rbacv1.PolicyRule) []string {
		var out []string
		for _, r := range rules {
			data, _ := json.Marshal(r)
			out = append(out, string(data))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(key(a), key(b))
}

// TestBundleInstallModes: every install mode, because the manager watches
// the namespaces OLM writes into the olm.targetNamespaces annotation.
func TestBundleInstallModes(t *testing.T) {
	b := loadBundle(t)
	for _, m := range b.CSV.Spec.InstallModes {
		if !m.Supported {
			t.Errorf("install mode %s not supported", m.Type)
		}
	}
	manager := b.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.Containers[0]
	i := slices.IndexFunc(manager.Env, func(e corev1.EnvVar) bool { return e.Name == "WATCH_NAMESPACE" })
	if i < 0 || manager.Env[i].ValueFrom == nil || manager.Env[i].ValueFrom.FieldRef == nil ||
		manager.Env[i].ValueFrom.FieldRef.FieldPath != "metadata.annotations['olm.targetNamespaces']" {
		t.Errorf("the manager does not read WATCH_NAMESPACE from the olm.targetNamespaces annotation: %+v", manager.Env)
	}
}

// TestBundleHasAnExamplePerKind: the console offers a kind only with an
// example to start its form from.
func TestBundleHasAnExamplePerKind(t *testing.T) {
	b := loadBundle(t)
	var examples []struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal([]byte(b.CSV.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatal(err)
	}
	for _, crd := range b.CSV.Spec.CustomResourceDefinitions.Owned {
		if !slices.ContainsFunc(examples, func(e struct {
			Kind string `json:"kind"`
		}) bool {
			return e.Kind == crd.Kind
		}) {
			t.Errorf("no alm-example of %s", crd.Kind)
		}
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestBundleShipsTheUserRoles: the editor and viewer roles of config/rbac,
// which operator-sdk writes beside the CSV as ClusterRoles of their own
// (bound to no ServiceAccount of the CSV), with their rules and their
// aggregation labels.
func TestBundleShipsTheUserRoles(t *testing.T) {
	b := loadBundle(t)
	for _, file := range []string{"openbao_editor_role.yaml", "openbao_viewer_role.yaml"} {
		var want rbacv1.ClusterRole
		readYAML(t, "../config/rbac/"+file, &want)
		i := slices.IndexFunc(b.Objects, func(o *unstructured.Unstructured) bool {
			return o.GetKind() == "ClusterRole" && o.GetName() == want.Name
		})
		if i < 0 {
			t.Errorf("the bundle lacks the ClusterRole %s of config/rbac/%s (run make bundle)", want.Name, file)
			continue
		}
		var got rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(b.Objects[i].Object, &got); err != nil {
			t.Fatal(err)
		}
		for k, v := range want.Labels {
			if got.Labels[k] != v {
				t.Errorf("the bundle's %s lacks the label %s=%s", want.Name, k, v)
			}
		}
		if !reflect.DeepEqual(got.Rules, want.Rules) {
			t.Errorf("the bundle's %s rules differ from config/rbac/%s (run make bundle)", want.Name, file)
		}
	}
}

// TestTheBundleNamesOneWrapperImage: the manager reads WRAPPER_IMAGE;
// RELATED_IMAGE_WRAPPER only makes operator-sdk list it in relatedImages,
// which disconnected mirroring copies. All three must name one image, this
// wrapper's version (or a digest, once a release pins it).
func TestTheBundleNamesOneWrapperImage(t *testing.T) {
	b := loadBundle(t)
	env := map[string]string{}
	for _, e := range b.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	related := map[string]string{}
	for _, r := range b.CSV.Spec.RelatedImages {
		related[r.Name] = r.Image
	}
	image := env["WRAPPER_IMAGE"]
	if image == "" || env["RELATED_IMAGE_WRAPPER"] != image || related["wrapper"] != image {
		t.Errorf("the CSV's wrapper images disagree: WRAPPER_IMAGE %q, RELATED_IMAGE_WRAPPER %q, relatedImages %q",
			image, env["RELATED_IMAGE_WRAPPER"], related["wrapper"])
	}
	if !strings.Contains(image, "@sha256:") && !strings.HasSuffix(image, ":"+wrapper.Version) {
		t.Errorf("the CSV's WRAPPER_IMAGE %q is neither pinned by digest nor tagged with wrapper.Version %s", image, wrapper.Version)
	}
}
