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
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
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
	if len(b.V1CRDs) != len(bases) {
		t.Errorf("the bundle has %d CRDs, config/crd/bases %d", len(b.V1CRDs), len(bases))
	}
	var role rbacv1.ClusterRole
	readYAML(t, "../config/rbac/role.yaml", &role)
	spec := b.CSV.Spec.InstallStrategy.StrategySpec
	if len(spec.ClusterPermissions) != 1 || !reflect.DeepEqual(spec.ClusterPermissions[0].Rules, role.Rules) {
		t.Errorf("the CSV's cluster permissions differ from config/rbac/role.yaml (run make bundle)")
	}
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
	if len(b.CSV.Spec.WebhookDefinitions) != 3 {
		t.Errorf("the CSV has %d webhook definitions, config/webhook 3", len(b.CSV.Spec.WebhookDefinitions))
	}
	for _, w := range b.CSV.Spec.WebhookDefinitions {
		if w.DeploymentName != spec.DeploymentSpecs[0].Name {
			t.Errorf("webhook %s is served by deployment %q, not the manager", w.GenerateName, w.DeploymentName)
		}
	}
}

// TestBundleInstallModes: the manager watches every namespace, so OLM
// must not offer to install it for some namespaces only.
func TestBundleInstallModes(t *testing.T) {
	for _, m := range loadBundle(t).CSV.Spec.InstallModes {
		if m.Supported != (m.Type == v1alpha1.InstallModeTypeAllNamespaces) {
			t.Errorf("install mode %s supported=%v; the manager watches all namespaces only", m.Type, m.Supported)
		}
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
