package envtest_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/plugin"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/internal/secrets"
)

// pluginFixture is a 3-server cluster as the API server holds it after
// the operator formed it: status with Raft, labelled pods, TLS Secrets,
// and Secrets whose values must never leave through the plugin.
type pluginFixture struct {
	cluster      *v1alpha1.OpenBaoCluster
	serverExpiry time.Time
	secretValues [][]byte
}

func newPluginFixture(t *testing.T, ns string) pluginFixture {
	t.Helper()
	ctx := context.Background()
	createNamespace(t, ns)
	c := newCluster(t, ns, "metadata: {name: bao}\nspec: {version: 2.4.0, replicas: 3}\n")
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	f := pluginFixture{cluster: c, serverExpiry: now.Add(90 * 24 * time.Hour).Truncate(time.Second)}
	caExpiry := now.Add(365 * 24 * time.Hour).Truncate(time.Second)
	// As the operator writes status.tls from the certificates below.
	serverNotAfter, caNotAfter := metav1.NewTime(f.serverExpiry), metav1.NewTime(caExpiry)
	c.Status = v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseRunning, CurrentVersion: "2.4.0", ReadyReplicas: 3,
		ActiveLeader: "bao-0", Initialized: true, TLS: &v1alpha1.TLSStatus{ServerNotAfter: &serverNotAfter, CANotAfter: &caNotAfter},
		Raft: &v1alpha1.RaftStatus{ObservedAt: metav1.NewTime(now), Leader: "bao-0", Healthy: true, FailureTolerance: 1,
			Servers: []v1alpha1.RaftServer{{ID: "bao-0", Voter: true, Healthy: true}, {ID: "bao-1", Voter: true, Healthy: true},
				{ID: "bao-2", Voter: true, Healthy: true, Lag: 3}}}}
	if err := k8s.Status().Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.PodName(i), Labels: c.PodSelectorLabels()},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "openbao", Image: "openbao:2.4.0"}}}}
		pod.Labels[podstate.LabelActive] = map[bool]string{true: "true", false: "false"}[i == 0]
		pod.Labels[podstate.LabelSealed] = "false"
		if err := k8s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	serverCert, serverKey := certificate(t, f.serverExpiry)
	caCert, caKey := certificate(t, caExpiry)
	token, unsealKey := randomValue(t), randomValue(t)
	f.secretValues = [][]byte{serverKey, caKey, token, unsealKey}
	for _, s := range []secrets.Spec{
		{Name: c.TLSServerSecretName(), Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": serverCert, "tls.key": serverKey}},
		{Name: c.TLSCASecretName(), Data: map[string][]byte{"ca.crt": caCert, "ca.key": caKey}},
		{Name: c.RootTokenSecretName(), Lifetime: secrets.WithData, Data: map[string][]byte{"token": token}},
		{Name: c.UnsealKeySecretName(), Lifetime: secrets.WithData, Data: map[string][]byte{"key": unsealKey}},
	} {
		if err := k8s.Create(ctx, secrets.New(c, s)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func certificate(t *testing.T, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bao"},
		NotBefore: notAfter.Add(-time.Hour * 24), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

func randomValue(t *testing.T) []byte {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return []byte(hex.EncodeToString(b))
}

func TestPluginStatusShowsTheLeaderVotersAndCertificateExpiry(t *testing.T) {
	f := newPluginFixture(t, "plugin-status")
	cmds := &plugin.Commands{Client: k8s, Namespace: "plugin-status", Now: time.Now}
	var out bytes.Buffer
	if err := cmds.Status(context.Background(), "bao", plugin.OutputTable, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "expires "+f.serverExpiry.UTC().Format(time.RFC3339)) {
		t.Errorf("no server certificate expiry in:\n%s", got)
	}
	roles := map[string]string{}
	for _, line := range strings.Split(got, "\n") {
		if f := strings.Fields(line); len(f) == 8 && strings.HasPrefix(f[0], "bao-") {
			roles[f[0]] = f[1] + " " + f[4]
		}
	}
	want := map[string]string{"bao-0": "active leader", "bao-1": "standby voter", "bao-2": "standby voter"}
	if fmt.Sprint(roles) != fmt.Sprint(want) {
		t.Errorf("server roles: got %v, want %v in:\n%s", roles, want, got)
	}
	for _, v := range f.secretValues {
		if strings.Contains(got, string(v)) {
			t.Fatalf("status printed a Secret value")
		}
	}
}

// TestPluginReportHoldsNoSecretValue writes a report of a cluster and
// searches every file of it for each Secret value, as is and base64. Its
// client refuses to read a whole Secret: the report must not even fetch
// a value it would then drop.
func TestPluginReportHoldsNoSecretValue(t *testing.T) {
	f := newPluginFixture(t, "plugin-report")
	for name, message := range map[string]string{"bao": "about the cluster", "baox": "about another cluster"} {
		e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "plugin-report", GenerateName: "e-"},
			InvolvedObject: corev1.ObjectReference{Kind: v1alpha1.Kind, Namespace: "plugin-report", Name: name},
			Reason:         "Test", Message: message, Type: corev1.EventTypeNormal}
		if err := k8s.Create(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	cmds := &plugin.Commands{Client: noSecretValues{k8s}, Namespace: "plugin-report", Now: time.Now}
	var archive bytes.Buffer
	if err := cmds.Report(context.Background(), "bao", plugin.ReportOptions{}, &archive); err != nil {
		t.Fatal(err)
	}
	files := untar(t, &archive)
	for _, want := range []string{"openbaocluster.yaml", "status.txt", "pods.yaml", "secrets.txt", "events.yaml"} {
		if _, ok := files["openbao-report-plugin-report-bao/"+want]; !ok {
			t.Errorf("report lacks %s; has %v", want, keys(files))
		}
	}
	events := files["openbao-report-plugin-report-bao/events.yaml"]
	if !strings.Contains(events, "about the cluster") || strings.Contains(events, "about another cluster") {
		t.Errorf("events.yaml should hold the cluster's Event and not another cluster's:\n%s", events)
	}
	listing := files["openbao-report-plugin-report-bao/secrets.txt"]
	if !strings.Contains(listing, f.cluster.RootTokenSecretName()) {
		t.Errorf("secrets.txt does not list the root-token Secret by name:\n%s", listing)
	}
	for name, content := range files {
		for _, v := range f.secretValues {
			if strings.Contains(content, string(v)) || strings.Contains(content, base64.StdEncoding.EncodeToString(v)) {
				t.Fatalf("%s holds a Secret value", name)
			}
		}
	}
}

// noSecretValues is a client that refuses to get or list whole Secrets;
// their metadata (PartialObjectMetadata) it reads.
type noSecretValues struct{ client.Client }

func (c noSecretValues) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, whole := obj.(*corev1.Secret); whole {
		return fmt.Errorf("the report read the Secret %s with its values", key)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c noSecretValues) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, whole := list.(*corev1.SecretList); whole {
		return fmt.Errorf("the report listed Secrets with their values")
	}
	return c.Client.List(ctx, list, opts...)
}

func untar(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = string(b)
	}
}

func keys(m map[string]string) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestPluginCommandsChangeOnlyWhatTheyName: pause and resume flip
// spec.paused, step-down writes spec.stepDownRequest, backup creates an
// OpenBaoBackup naming the cluster; the rest of the spec is untouched.
func TestPluginCommandsChangeOnlyWhatTheyName(t *testing.T) {
	ctx := context.Background()
	f := newPluginFixture(t, "plugin-commands")
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	cmds := &plugin.Commands{Client: k8s, Namespace: "plugin-commands", Now: func() time.Time { return now }}
	get := func() *v1alpha1.OpenBaoCluster {
		c := &v1alpha1.OpenBaoCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(f.cluster), c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := cmds.SetPaused(ctx, "bao", true); err != nil || !get().Spec.Paused {
		t.Fatalf("pause: %v, paused=%v", err, get().Spec.Paused)
	}
	if err := cmds.SetPaused(ctx, "bao", false); err != nil || get().Spec.Paused {
		t.Fatalf("resume: %v, paused=%v", err, get().Spec.Paused)
	}
	request, err := cmds.RequestStepDown(ctx, "bao")
	if err != nil || get().Spec.StepDownRequest != request || request != "2026-05-01T10:00:00Z" {
		t.Fatalf("step-down: %v, request %q, spec %q", err, request, get().Spec.StepDownRequest)
	}
	if c := get(); c.Spec.Replicas != 3 || c.Spec.Version != "2.4.0" {
		t.Errorf("the commands changed other spec fields: %+v", c.Spec)
	}
	name, err := cmds.Backup(ctx, "bao")
	if err != nil {
		t.Fatal(err)
	}
	b := &v1alpha1.OpenBaoBackup{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "plugin-commands", Name: name}, b); err != nil || b.Spec.ClusterName != "bao" {
		t.Fatalf("backup %s: %v, %+v", name, err, b.Spec)
	}
	if _, err := cmds.Backup(ctx, "missing"); err == nil {
		t.Error("a backup of a cluster that does not exist was created")
	}
}
