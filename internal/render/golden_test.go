package render_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/test/fixtures"
	"github.com/openbao/operator/test/golden"
)

// testOperator is the operator context every golden render uses.
var testOperator = values.Operator{Namespace: "openbao-operator-system", WrapperImage: "registry.example.com/bao-wrapper:1.1.1"}

// testIssuer stands for the Kubernetes service-account issuer, whose key
// the operator's identity requests carry into self-init.
var testIssuer = identity.Issuer{URL: "https://kubernetes.default.svc.cluster.local", PublicKeysPEM: []string{`-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEfgmQYctP/zoqvrqIK9TTBPC4bm2a
xs0cHU2aas8CPNTu8V7HKZyVV4ItoQo0DslsBpmcgAgxN3zoxKWDRVaFnQ==
-----END PUBLIC KEY-----
`}}

// renderFixture runs the whole pure pipeline: CR → config → values → objects.
func renderFixture(t testing.TB, r *render.Renderer, c *v1alpha1.OpenBaoCluster) (values.Config, map[string]any, []*unstructured.Unstructured) {
	t.Helper()
	in := values.InputFor(c, &c.Status)
	in.Issuer = &testIssuer
	cfg, err := values.ConfigFor(in)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	vals, err := values.Compute(in, testOperator, cfg)
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	objs, err := r.Render(c.Namespace, c.Name, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return cfg, vals, objs
}

// TestGolden renders every sample and test fixture and compares its values,
// config.hcl and manifests with testdata/golden/<fixture>/.
func TestGolden(t *testing.T) {
	r, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	files := fixtures.Files(t)
	set := golden.NewSet(t, filepath.Join("testdata", "golden"))
	for _, name := range fixtures.Names(files) {
		t.Run(name, func(t *testing.T) {
			c := fixtures.Load(t, files[name])
			cfg, vals, objs := renderFixture(t, r, c)
			dir := filepath.Join("testdata", "golden", name)
			set.Assert(t, filepath.Join(dir, "config.hcl"), []byte(cfg.HCL))
			if cfg.ReadHCL != "" {
				set.Assert(t, filepath.Join(dir, "read-config.hcl"), []byte(cfg.ReadHCL))
			}
			if cfg.SelfInitHCL != "" {
				set.Assert(t, filepath.Join(dir, "self-init.hcl"), []byte(cfg.SelfInitHCL))
			}
			set.Assert(t, filepath.Join(dir, "values.yaml"), mustYAML(t, vals))
			set.Assert(t, filepath.Join(dir, "manifests.yaml"), manifests(t, objs))
		})
	}
}

func manifests(t testing.TB, objs []*unstructured.Unstructured) []byte {
	var buf bytes.Buffer
	for _, obj := range objs {
		buf.WriteString("---\n")
		buf.Write(mustYAML(t, obj.Object))
	}
	return buf.Bytes()
}

func mustYAML(t testing.TB, v any) []byte {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
