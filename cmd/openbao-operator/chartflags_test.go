package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// managerArgs renders the install chart with values and returns the
// manager container's arguments.
func managerArgs(t *testing.T, values map[string]any) []string {
	t.Helper()
	c, err := loader.LoadDir("../../helm-charts/openbao-operator")
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(c, values,
		chartutil.ReleaseOptions{Name: "openbao-operator", Namespace: "openbao-operator-system", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Engine{Strict: true}.Render(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split([]byte(files["openbao-operator/templates/deployment.yaml"]), []byte("\n---\n")) {
		var d appsv1.Deployment
		if err := yaml.Unmarshal(doc, &d); err != nil {
			t.Fatal(err)
		}
		for _, ctr := range d.Spec.Template.Spec.Containers {
			if ctr.Name == "manager" {
				return ctr.Args
			}
		}
	}
	t.Fatal("the chart renders no manager container")
	return nil
}

// TestTheManagerTakesEveryFlagTheInstallChartRenders: the chart's values
// become flags of this manager (the chart's logLevel its zap level), so a
// renamed flag or a value the chart spells differently fails here, not in
// a crash-looping pod.
func TestTheManagerTakesEveryFlagTheInstallChartRenders(t *testing.T) {
	t.Setenv("ALLOWED_IMAGE_REPOSITORIES", "")
	cases := map[string]struct {
		values  map[string]any
		enabled zapcore.Level // the most verbose level logged
	}{
		"the defaults": {nil, zapcore.InfoLevel},
		"every flag the chart can set": {map[string]any{
			"logLevel": "debug", "maxConcurrentRollouts": 3, "watchNamespaces": []any{"team-a"},
			"imagePolicy": map[string]any{"allowedRepositories": []any{"ghcr.io/openbao"}, "signature": map[string]any{"keyless": map[string]any{
				"issuer": "https://token.actions.githubusercontent.com", "subjectRegExp": "^https://github.com/corp/", "trustedRootConfigMap": "sigstore-root"}}},
			"tenantFields": map[string]any{"allowedPriorityClasses": []any{"a"}, "allowedTolerationKeys": []any{"b"}, "allowedNodeSelectorKeys": []any{"c"},
				"allowedAnnotationPrefixes": []any{"d/"}, "allowedIngressClasses": []any{"e"}},
			"metrics": map[string]any{"secure": false}, "webhook": map[string]any{"certManaged": false, "certSecret": "tls"},
		}, zapcore.DebugLevel},
		"tenancy, a public key, no webhook": {map[string]any{"tenancy": map[string]any{"enabled": true}, "webhook": map[string]any{"enabled": false},
			"imagePolicy": map[string]any{"signature": map[string]any{"publicKeyConfigMap": "cosign"}}}, zapcore.InfoLevel},
		"a numbered debug level": {map[string]any{"logLevel": 3}, zapcore.Level(-3)},
		"errors only":            {map[string]any{"logLevel": "error"}, zapcore.ErrorLevel},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			args := managerArgs(t, tc.values)
			_, zapOpts, err := parseManagerFlags(args)
			if err != nil {
				t.Fatalf("the manager refuses the chart's flags %s: %v", strings.Join(args, " "), err)
			}
			var enabler zapcore.LevelEnabler = zapcore.InfoLevel // zap.Options' production default
			if zapOpts.Level != nil {
				enabler = zapOpts.Level
			}
			if !enabler.Enabled(tc.enabled) || enabler.Enabled(tc.enabled-1) {
				t.Errorf("the manager does not log from level %v on (args %s)", tc.enabled, strings.Join(args, " "))
			}
		})
	}
}
