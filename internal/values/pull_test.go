package values_test

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/values"
)

func TestPulledImageFollowsTheChartsMirror(t *testing.T) {
	cases := map[string]struct {
		repo, registry, want string
	}{
		"no mirror":                  {"quay.io/openbao/openbao", "", "quay.io/openbao/openbao:2.4.0"},
		"a mirror replaces the host": {"quay.io/openbao/openbao", "mirror.example.com", "mirror.example.com/openbao/openbao:2.4.0"},
		"a host with a port":         {"registry.local:5000/openbao", "mirror.example.com", "mirror.example.com/openbao:2.4.0"},
		"no host to replace":         {"openbao/openbao", "mirror.example.com", "mirror.example.com/openbao/openbao:2.4.0"},
	}
	for title, tc := range cases {
		t.Run(title, func(t *testing.T) {
			c := &v1alpha1.OpenBaoCluster{Spec: v1alpha1.OpenBaoClusterSpec{Version: "2.4.0", Image: tc.repo}}
			op := values.Operator{}
			if tc.registry != "" {
				op.OverrideValues = map[string]any{"imageRegistry": tc.registry}
			}
			if got := values.PulledImage(c, op); got != tc.want {
				t.Errorf("PulledImage = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPullSecretNames(t *testing.T) {
	c := &v1alpha1.OpenBaoCluster{Spec: v1alpha1.OpenBaoClusterSpec{
		Values: &apiextensionsv1.JSON{Raw: []byte(`{"imagePullSecrets":[{"name":"a"},{"name":"b"}]}`)},
	}}
	got, err := values.PullSecretNames(c, values.Operator{})
	if err != nil || len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("spec.values: %v, %v; want [a b]", got, err)
	}
	op := values.Operator{OverrideValues: map[string]any{"imagePullSecrets": []any{map[string]any{"name": "site"}}}}
	got, err = values.PullSecretNames(c, op)
	if err != nil || len(got) != 1 || got[0] != "site" {
		t.Errorf("overrideValues: %v, %v; want [site], as the chart renders", got, err)
	}
}

// The digest verified for the spec's image is pinned; one verified for
// another image, or with verification off, is not.
func TestInputPinsTheVerifiedDigest(t *testing.T) {
	const digest = "sha256:0d3b5b5d1e1c4a6f0a4e0f2b9a8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c"
	cases := map[string]struct {
		enabled bool
		image   string
		want    string
	}{
		"verified for this image": {true, "quay.io/openbao/openbao:2.4.0", digest},
		"verified for another":    {true, "quay.io/openbao/openbao:2.3.0", ""},
		"verification off":        {false, "quay.io/openbao/openbao:2.4.0", ""},
	}
	for title, tc := range cases {
		t.Run(title, func(t *testing.T) {
			c := &v1alpha1.OpenBaoCluster{Spec: v1alpha1.OpenBaoClusterSpec{
				Version: "2.4.0", ImageVerification: &v1alpha1.ImageVerificationSpec{Enabled: tc.enabled, PublicKey: "k"},
			}}
			status := &v1alpha1.OpenBaoClusterStatus{ImageVerification: &v1alpha1.ImageVerificationStatus{Image: tc.image, Digest: digest}}
			if got := values.InputFor(c, status).Image.Digest; got != tc.want {
				t.Errorf("digest = %q, want %q", got, tc.want)
			}
		})
	}
}
