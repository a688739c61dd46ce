package crdschema_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/config/crd"
	"github.com/openbao/operator/internal/crdschema"
)

func load(t *testing.T) *crdschema.Schema {
	t.Helper()
	s, err := crdschema.Load(crd.OpenBaoClusters, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func object(t *testing.T, manifest string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

const minimal = `
apiVersion: openbao.org/v1alpha1
kind: OpenBaoCluster
metadata: {name: bao, namespace: ns}
spec:
  version: 2.4.0
`

func get(obj map[string]any, path ...string) any {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func TestAdmitAppliesDefaults(t *testing.T) {
	obj := object(t, minimal)
	if errs := load(t).Admit(context.Background(), obj, nil); len(errs) > 0 {
		t.Fatalf("minimal cluster rejected: %v", errs.ToAggregate())
	}
	cases := map[string]struct {
		path []string
		want any
	}{
		"replicas default to 3":                {[]string{"spec", "replicas"}, int64(3)},
		"tls.mode defaults to OperatorManaged": {[]string{"spec", "tls", "mode"}, "OperatorManaged"},
		"unseal.type defaults to static":       {[]string{"spec", "unseal", "type"}, "static"},
		"deletionPolicy defaults to Retain":    {[]string{"spec", "deletionPolicy"}, "Retain"},
		"storage.size defaults to 10Gi":        {[]string{"spec", "storage", "size"}, "10Gi"},
		"image defaults to quay.io":            {[]string{"spec", "image"}, "quay.io/openbao/openbao"},
		"the network policy is on by default":  {[]string{"spec", "networkPolicy", "enabled"}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := get(obj, tc.path...)
			if f, ok := got.(float64); ok { // defaults may decode as JSON numbers
				got = int64(f)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s = %#v, want %#v", strings.Join(tc.path, "."), got, tc.want)
			}
		})
	}
}

func TestAdmitPrunesUnknownFields(t *testing.T) {
	obj := object(t, minimal+"  bogus: 1\n")
	if errs := load(t).Admit(context.Background(), obj, nil); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	if _, ok := get(obj, "spec").(map[string]any)["bogus"]; ok {
		t.Error("spec.bogus survived admission")
	}
}

func TestAdmitReportsViolations(t *testing.T) {
	cases := map[string]struct {
		spec      string
		wantField string
		wantText  string
	}{
		"a CEL rule reports its message": {
			spec:      "{version: 2.4.0, tls: {mode: ACME}}",
			wantField: "spec.tls", wantText: "tls.acme is required when tls.mode is ACME",
		},
		"a CEL messageExpression names the credential": {
			spec:      "{version: 2.4.0, unseal: {type: awskms, options: {secret_key: x}}}",
			wantField: "spec.unseal", wantText: "unseal.options.secret_key is a credential",
		},
		"self-init without requests is rejected": {
			spec:      "{version: 2.4.0, selfInit: {enabled: true}}",
			wantField: "spec", wantText: "selfInit.requests must hold at least one request",
		},
		"read replicas with ACME": {
			spec:      "{version: 2.4.0, tls: {mode: ACME, acme: {directory: 'https://acme.example.com/dir', domains: [bao.example.com]}}, readReplicas: {replicas: 1}}",
			wantField: "spec", wantText: "readReplicas cannot be used with tls.mode ACME",
		},
		"read replicas above the maximum": {
			spec: "{version: 2.4.0, readReplicas: {replicas: 11}}", wantField: "spec.readReplicas.replicas", wantText: "10",
		},
		"replicas above the maximum": {
			spec: "{version: 2.4.0, replicas: 12}", wantField: "spec.replicas", wantText: "11",
		},
		"an owned config key is forbidden by name": {
			spec: "{version: 2.4.0, config: {listener: {}}}", wantField: "spec.config.listener", wantText: "must not validate",
		},
		"an owned values key is forbidden by name": {
			spec: "{version: 2.4.0, values: {replicas: 5}}", wantField: "spec.values.replicas", wantText: "must not validate",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := object(t, "apiVersion: openbao.org/v1alpha1\nkind: OpenBaoCluster\nmetadata: {name: bao}\nspec: "+tc.spec+"\n")
			errs := load(t).Admit(context.Background(), obj, nil)
			if !hasError(errs, tc.wantField, tc.wantText) {
				t.Errorf("want an error at %s containing %q, got %v", tc.wantField, tc.wantText, errs)
			}
		})
	}
}

// hasError reports whether an error names path (as its field, or quoted in
// its message, as schema "not" errors do) and contains text.
func hasError(errs field.ErrorList, path, text string) bool {
	for _, e := range errs {
		named := e.Field == path || strings.Contains(e.Error(), `"`+path+`"`)
		if named && strings.Contains(e.Error(), text) {
			return true
		}
	}
	return false
}

func TestAdmitRunsTransitionRulesAgainstTheOldObject(t *testing.T) {
	s := load(t)
	old := object(t, minimal+"  storage: {size: 1Gi}\n")
	if errs := s.Admit(context.Background(), old, nil); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	cases := map[string]struct {
		spec     string
		wantText string // "" when admitted
	}{
		"an unchanged storage is admitted":              {spec: "  storage: {size: 1Gi}\n"},
		"a changed storage size is left to the webhook": {spec: "  storage: {size: 2Gi}\n"},
		"a changed storage class is rejected":           {spec: "  storage: {size: 1Gi, storageClassName: other}\n", wantText: "storage.storageClassName is immutable"},
		"a changed unseal type is rejected":             {spec: "  storage: {size: 1Gi}\n  unseal: {type: transit}\n", wantText: "unseal.type is immutable"},
		"a changed replica count is admitted":           {spec: "  storage: {size: 1Gi}\n  replicas: 5\n"},
		"a scale-down below 3 is rejected":              {spec: "  storage: {size: 1Gi}\n  replicas: 1\n", wantText: "replicas cannot go below 3"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := s.Admit(context.Background(), object(t, minimal+tc.spec), old)
			if tc.wantText == "" {
				if len(errs) > 0 {
					t.Fatalf("rejected: %v", errs.ToAggregate())
				}
				return
			}
			if !hasError(errs, fieldOf(errs, tc.wantText), tc.wantText) {
				t.Errorf("want an error containing %q, got %v", tc.wantText, errs)
			}
		})
	}
	if errs := s.Admit(context.Background(), object(t, minimal+"  storage: {size: 2Gi}\n"), nil); len(errs) > 0 {
		t.Errorf("a transition rule fired on create: %v", errs.ToAggregate())
	}
}

func fieldOf(errs field.ErrorList, text string) string {
	for _, e := range errs {
		if strings.Contains(e.Error(), text) {
			return e.Field
		}
	}
	return ""
}

const ruleCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
              x-kubernetes-validations:
                - rule: RULE
                  message: size must be small
`

func TestLoadChecksRules(t *testing.T) {
	cases := map[string]struct {
		rule    string
		wantErr string // "" when it loads
	}{
		"a rule that compiles loads":             {rule: "'!has(self.size) || self.size < 10'"},
		"a rule with a syntax error is rejected": {rule: "'self.size <'", wantErr: "Syntax error"},
		"a rule naming no field is rejected":     {rule: "'self.nope > 1'", wantErr: "self.nope"},
		"a rule of the wrong type is rejected":   {rule: "'self.size'", wantErr: "bool"},
		"a constant rule loads":                  {rule: "'true'"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := crdschema.Load([]byte(strings.Replace(ruleCRD, "RULE", tc.rule, 1)), "v1")
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	if _, err := crdschema.Load([]byte(strings.Replace(ruleCRD, "RULE", "'true'", 1)), "v2"); err == nil {
		t.Error("Load of a version the CRD lacks succeeded")
	}
}

func TestAdmitEnforcesALoadedRule(t *testing.T) {
	s, err := crdschema.Load([]byte(strings.Replace(ruleCRD, "RULE", "'!has(self.size) || self.size < 10'", 1)), "v1")
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"},
		"spec": map[string]any{"size": int64(12)}}
	if errs := s.Admit(context.Background(), obj, nil); !hasError(errs, "spec", "size must be small") {
		t.Errorf("want the rule's message at spec, got %v", errs)
	}
}

func TestAdmitRefusesLabelsTheOperatorOwnsInSpecValues(t *testing.T) {
	s := load(t)
	bad := object(t, minimal+"  values: {podLabels: {openbao.org/cluster: other, team: a}}\n")
	errs := s.Admit(context.Background(), bad, nil)
	if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "spec.values.podLabels.openbao.org/cluster") {
		t.Fatalf("want spec.values.podLabels.openbao.org/cluster refused, got %v", errs)
	}
	good := object(t, minimal+"  values: {podLabels: {team: a}, commonLabels: {owner: b}}\n")
	if errs := s.Admit(context.Background(), good, nil); len(errs) > 0 {
		t.Fatalf("ordinary labels refused: %v", errs.ToAggregate())
	}
}

// TestAdmitReadsWholeNumbersAsIntegers: YAML gives every number as a
// float64; the API server's decoder gives integers, which CEL rules over
// integer fields need.
func TestAdmitReadsWholeNumbersAsIntegers(t *testing.T) {
	obj := object(t, minimal+`
  replicas: 5
  backup:
    jwtAuthRole: backup
    target: {endpoint: "https://s3.example.com", bucket: backups}
    retention: {maxCount: 3}
`)
	if errs := load(t).Admit(context.Background(), obj, nil); len(errs) > 0 {
		t.Fatalf("rejected: %v", errs.ToAggregate())
	}
	if got := get(obj, "spec", "replicas"); got != int64(5) {
		t.Errorf("replicas is %T %v, want int64 5", got, got)
	}
}

// TestRotationPeriodAppliesToEveryOperatorIssuedCertificate: with ACME the
// operator issues the internal listener's certificate, so its validity may
// be set; External certificates are not the operator's to rotate.
func TestRotationPeriodAppliesToEveryOperatorIssuedCertificate(t *testing.T) {
	acme := `{version: 2.4.0, tls: {mode: ACME, rotationPeriod: 720h, acme: {directory: "https://acme.example/dir", domains: [bao.example.com]}}}`
	for spec, allowed := range map[string]bool{
		`{version: 2.4.0, tls: {rotationPeriod: 720h}}`: true,
		acme: true,
		`{version: 2.4.0, tls: {mode: External, external: {serverSecretRef: {name: bao-cert}}, rotationPeriod: 720h}}`: false,
	} {
		obj := object(t, "apiVersion: openbao.org/v1alpha1\nkind: OpenBaoCluster\nmetadata: {name: bao}\nspec: "+spec+"\n")
		errs := load(t).Admit(context.Background(), obj, nil)
		if rejected := hasError(errs, "spec.tls", "rotationPeriod applies only"); rejected == allowed {
			t.Errorf("%s: rejected %v, want %v (%v)", spec, rejected, !allowed, errs)
		}
	}
}

// TestAdmitRefusesATypedFieldAndItsValuesKeyTogether: the CRD's rules
// refuse what values.CheckTypedOverlap refuses, naming both fields, and
// let either alone through.
func TestAdmitRefusesATypedFieldAndItsValuesKeyTogether(t *testing.T) {
	s := load(t)
	for _, tc := range []struct{ typed, values, field, key string }{
		{"imagePullSecrets: [{name: a}]", "{imagePullSecrets: [{name: b}]}", "imagePullSecrets", "imagePullSecrets"},
		{"podDisruptionBudget: {maxUnavailable: 1}", "{podDisruptionBudget: {enabled: false}}", "podDisruptionBudget", "podDisruptionBudget"},
		{"monitoring: {serviceMonitor: {enabled: true}}", "{serviceMonitor: {interval: 1m}}", "monitoring", "serviceMonitor"},
	} {
		both := object(t, minimal+"  "+tc.typed+"\n  values: "+tc.values+"\n")
		want := "spec." + tc.field + " and spec.values." + tc.key + " are both set"
		if errs := s.Admit(context.Background(), both, nil); len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), want) {
			t.Errorf("%s with values %s: got %v, want %q", tc.typed, tc.values, errs, want)
		}
		for _, alone := range []string{"  " + tc.typed + "\n", "  values: " + tc.values + "\n"} {
			if errs := s.Admit(context.Background(), object(t, minimal+alone), nil); len(errs) > 0 {
				t.Errorf("%q alone is refused: %v", alone, errs.ToAggregate())
			}
		}
	}
}
