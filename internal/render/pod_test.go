package render_test

import (
	"maps"
	"path"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
)

// podFacts are what a fixture's pod template must and must not have.
type podFacts struct {
	mounts      []string // mount paths of the openbao container
	noMounts    []string
	secretEnv   map[string]string // variable → the Secret its value comes from
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
			mounts: []string{"/etc/bao/seal-creds"}, noMounts: []string{"/etc/bao/unseal"},
			secretEnv: map[string]string{"AWS_ACCESS_KEY_ID": "aws-kms-creds", "AWS_SECRET_ACCESS_KEY": "aws-kms-creds", "AWS_SESSION_TOKEN": "aws-kms-creds"},
			noEnv:     []string{"GOOGLE_APPLICATION_CREDENTIALS"},
		}},
		"Azure Key Vault with credentials mounts and loads the Secret": {fixture: "seal_azurekeyvault", want: podFacts{
			mounts: []string{"/etc/bao/seal-creds"}, noMounts: []string{"/etc/bao/unseal"},
			secretEnv: map[string]string{"AZURE_TENANT_ID": "azure-kv-creds", "AZURE_CLIENT_ID": "azure-kv-creds", "AZURE_CLIENT_SECRET": "azure-kv-creds"},
		}},
		"transit with a token mounts and loads the Secret": {fixture: "seal_transit", want: podFacts{
			mounts: []string{"/etc/bao/seal-creds"}, noMounts: []string{"/etc/bao/unseal"},
			secretEnv: map[string]string{"BAO_TOKEN": "transit-unseal-token"},
		}},
		"GCP KMS points GOOGLE_APPLICATION_CREDENTIALS at the mounted Secret": {fixture: "seal_gcpckms", want: podFacts{
			mounts: []string{"/etc/bao/seal-creds"}, noEnv: []string{"AWS_ACCESS_KEY_ID", "BAO_TOKEN"},
			env: map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": "/etc/bao/seal-creds/credentials.json"},
		}},
		"ACME mounts the operator's TLS for the internal listener, which the server's own CLI uses": {fixture: "tls_acme", want: podFacts{
			mounts: []string{"/etc/bao/unseal", "/etc/bao/tls"},
			env:    map[string]string{"BAO_CACERT": "/etc/bao/tls/ca.crt", "BAO_ADDR": "https://127.0.0.1:8202"},
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
	if len(c.EnvFrom) > 0 {
		t.Errorf("envFrom %+v: a Secret's keys must not all become variables", c.EnvFrom)
	}
	fromSecret := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			fromSecret[e.Name] = e.ValueFrom.SecretKeyRef.Name
		}
	}
	if want.secretEnv == nil {
		want.secretEnv = map[string]string{}
	}
	if !maps.Equal(fromSecret, want.secretEnv) {
		t.Errorf("variables from Secrets %v, want %v", fromSecret, want.secretEnv)
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
	for _, secret := range want.secretEnv {
		if v, ok := volumes["seal-creds"]; !ok || v.Secret == nil || v.Secret.SecretName != secret {
			t.Errorf("seal-creds volume %+v, want Secret %s", v.Secret, secret)
		}
	}
}

// TestGCPKMSWithoutASecretUsesWorkloadIdentity: without
// unseal.credentialsSecretRef nothing points the client at a key file that
// is not mounted, so the pod's workload identity applies.
func TestGCPKMSWithoutASecretUsesWorkloadIdentity(t *testing.T) {
	c := fixture(t, "seal_gcpckms")
	c.Spec.Unseal.CredentialsSecretRef = nil
	spec := statefulSet(t, renderWith(t, newRenderer(t), c, testOperator)).Spec.Template.Spec
	checkPodFacts(t, &spec, podFacts{noMounts: []string{"/etc/bao/seal-creds"}, noEnv: []string{"GOOGLE_APPLICATION_CREDENTIALS"}})
}

// TestACMEServersAreReachedOnTheInternalListener: no ACME CA issues the
// .svc names, so with ACME the probes, the address a server advertises
// (where standbys redirect and backup Jobs follow sys/leader) and the
// Services the operator dials carry the internal listener; clients keep
// port 8200. The ACME client may bind its challenge port.
func TestACMEServersAreReachedOnTheInternalListener(t *testing.T) {
	objs := renderWith(t, newRenderer(t), fixture(t, "tls_acme"), testOperator)
	c := statefulSet(t, objs).Spec.Template.Spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["api"] != 8200 || ports["internal"] != 8202 {
		t.Errorf("container ports %v, want api 8200 and internal 8202", ports)
	}
	if got := c.LivenessProbe.HTTPGet.Port.String(); got != "internal" {
		t.Errorf("liveness probe on port %s, want internal: the ACME listener answers no handshake without a name it may order", got)
	}
	// The readiness check (bao-wrapper ready) asks the server at BAO_ADDR.
	for _, e := range c.Env {
		if e.Name == "BAO_ADDR" && e.Value != "https://127.0.0.1:8202" {
			t.Errorf("BAO_ADDR = %q, want the internal listener: the readiness check verifies it with the cluster CA", e.Value)
		}
	}
	sysctls := statefulSet(t, objs).Spec.Template.Spec.SecurityContext.Sysctls
	if len(sysctls) != 1 || sysctls[0].Name != "net.ipv4.ip_unprivileged_port_start" || sysctls[0].Value != "0" {
		t.Errorf("sysctls %v: the non-root server cannot open the ACME challenge listener on :443 without them", sysctls)
	}
	for _, e := range c.Env {
		if e.Name == "BAO_API_ADDR" && e.Value != "https://$(BAO_K8S_POD_NAME).openbao-acme-internal.openbao-test.svc:8202" {
			t.Errorf("BAO_API_ADDR = %q, want the pod's name on the internal listener", e.Value)
		}
	}
	for _, u := range find(objs, "Service") {
		var svc corev1.Service
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &svc); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range svc.Spec.Ports {
			found = found || (p.Name == "internal" && p.Port == 8202)
		}
		if !found {
			t.Errorf("Service %s has no internal port 8202: %+v", svc.Name, svc.Spec.Ports)
		}
	}
}

// TestAGCPKeyFileHasOneKeyNameInEverySecret: a Google service account's
// JSON key is the key credentials.json of a Secret, whether the gcpckms
// seal (the chart points GOOGLE_APPLICATION_CREDENTIALS at it) or the GCS
// backup target (the executor reads it) uses it, so one Secret serves both.
func TestAGCPKeyFileHasOneKeyNameInEverySecret(t *testing.T) {
	spec := statefulSet(t, renderWith(t, newRenderer(t), fixture(t, "seal_gcpckms"), testOperator)).Spec.Template.Spec
	seal := ""
	for _, e := range spec.Containers[0].Env {
		if e.Name == "GOOGLE_APPLICATION_CREDENTIALS" {
			seal = path.Base(e.Value)
		}
	}
	if seal != v1alpha1.GCPCredentialsKey || backup.GCSCredentialsKey != v1alpha1.GCPCredentialsKey {
		t.Errorf("the seal reads key %q, the GCS target %q; want both %q", seal, backup.GCSCredentialsKey, v1alpha1.GCPCredentialsKey)
	}
}
