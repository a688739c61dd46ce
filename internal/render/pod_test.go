package render_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// podFacts are what a fixture's pod template must and must not have.
type podFacts struct {
	mounts      []string // mount paths of the openbao container
	noMounts    []string
	envFrom     string // Secret name in envFrom, "" for none
	env         map[string]string
	noEnv       []string
	noVolumeFor string // a volume name that must be absent
}

func TestPodTemplateMountsBySealAndTLS(t *testing.T) {
	cases := map[string]struct {
		fixture string
		want    podFacts
	}{
		"a static seal mounts the unseal key and operator TLS": {fixture: sample, want: podFacts{
			mounts:   []string{"/etc/bao/unseal", "/etc/bao/tls", "/etc/bao/config", "/bao/data", "/tmp"},
			noMounts: []string{"/etc/bao/seal-creds"}, env: map[string]string{"BAO_CACERT": "/etc/bao/tls/ca.crt"},
			noEnv: []string{"GOOGLE_APPLICATION_CREDENTIALS"},
		}},
		"AWS KMS with credentials mounts and loads the Secret": {fixture: "seal_awskms", want: podFacts{
			mounts: []string{"/etc/bao/seal-creds"}, noMounts: []string{"/etc/bao/unseal"}, envFrom: "aws-kms-creds",
			noEnv: []string{"GOOGLE_APPLICATION_CREDENTIALS"},
		}},
		"Azure Key Vault with credentials mounts and loads the Secret": {fixture: "seal_azurekeyvault", want: podFacts{
			mounts: []string{"/etc/bao/seal-creds"}, noMounts: []string{"/etc/bao/unseal"}, envFrom: "azure-kv-creds",
		}},
		"transit with a token mounts and loads the Secret": {fixture: "seal_transit", want: podFacts{
			mounts: []string{"/etc/bao/seal-creds"}, noMounts: []string{"/etc/bao/unseal"}, envFrom: "transit-unseal-token",
		}},
		"GCP KMS points GOOGLE_APPLICATION_CREDENTIALS at the mounted Secret": {fixture: "seal_gcpckms", want: podFacts{
			mounts: []string{"/etc/bao/seal-creds"}, envFrom: "gcp-kms-creds",
			env: map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": "/etc/bao/seal-creds/credentials.json"},
		}},
		"ACME mounts no TLS volume": {fixture: "tls_acme", want: podFacts{
			mounts: []string{"/etc/bao/unseal"}, noMounts: []string{"/etc/bao/tls"}, noEnv: []string{"BAO_CACERT"},
			noVolumeFor: "tls",
		}},
		"External TLS mounts the TLS volume": {fixture: "tls_external", want: podFacts{
			mounts: []string{"/etc/bao/tls"}, env: map[string]string{"BAO_CACERT": "/etc/bao/tls/ca.crt"},
		}},
	}
	r := newRenderer(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := statefulSet(t, renderWith(t, r, fixture(t, tc.fixture), testOperator)).Spec.Template.Spec
			checkPodFacts(t, &spec, tc.want)
		})
	}
}

func checkPodFacts(t *testing.T, spec *corev1.PodSpec, want podFacts) {
	t.Helper()
	c := spec.Containers[0]
	mounts, env := map[string]string{}, map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for _, p := range want.mounts {
		if _, ok := mounts[p]; !ok {
			t.Errorf("no mount at %s; mounts %v", p, mounts)
		}
	}
	for _, p := range want.noMounts {
		if _, ok := mounts[p]; ok {
			t.Errorf("unexpected mount at %s", p)
		}
	}
	for k, v := range want.env {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	for _, k := range want.noEnv {
		if _, ok := env[k]; ok {
			t.Errorf("unexpected env %s", k)
		}
	}
	var envFrom string
	for _, ef := range c.EnvFrom {
		if ef.SecretRef != nil {
			envFrom = ef.SecretRef.Name
		}
	}
	if envFrom != want.envFrom {
		t.Errorf("envFrom Secret %q, want %q", envFrom, want.envFrom)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for path, name := range mounts {
		if _, ok := volumes[name]; !ok && name != "data" {
			t.Errorf("mount %s uses volume %s, which the pod lacks", path, name)
		}
	}
	if want.noVolumeFor != "" {
		if _, ok := volumes[want.noVolumeFor]; ok {
			t.Errorf("unexpected volume %s", want.noVolumeFor)
		}
	}
	if want.envFrom != "" {
		if v, ok := volumes["seal-creds"]; !ok || v.Secret == nil || v.Secret.SecretName != want.envFrom {
			t.Errorf("seal-creds volume %+v, want Secret %s", v.Secret, want.envFrom)
		}
	}
}
