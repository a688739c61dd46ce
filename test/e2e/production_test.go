package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/podstate"
	"github.com/openbao/operator/test/fixtures"
	"github.com/openbao/operator/test/localnode"
	"github.com/openbao/operator/test/miniotest"
	"github.com/openbao/operator/test/testbin"
)

// prodName is the cluster config/samples/production.yaml names.
const prodName = "openbao-prod"

// zoneLabel is the node label the sample spreads its servers over.
const zoneLabel = "topology.kubernetes.io/zone"

// TestProductionSampleFormsWithLocalStandIns applies
// config/samples/production.yaml as a user would, with local stand-ins
// for what a cloud provides: an OpenBao dev server with the transit
// engine as the unsealer (its own TLS, a token limited to its key),
// MinIO as the bucket, a zone label on the node, the Prometheus
// Operator's two CRDs (installed with the operator, test/localnode), and
// PGP keys made here. Only the namespace, the
// image, the unsealer's address and the store are changed. The cluster
// must turn Ready; its root token is revoked and the recovery keys
// stored; two of the three keys' holders make a new root token, with
// which the test sees three voters and the audit device; a backup is
// stored and its drill passes; the ServiceMonitor and PrometheusRule
// exist; and no secret reaches a log, an event or a status (the audit
// device's lines included).
func TestProductionSampleFormsWithLocalStandIns(t *testing.T) {
	installOperator(t)
	t.Parallel()
	cl := backupClient(t)
	ctx := context.Background()
	start := time.Now()
	labelZone(ctx, t, cl)
	m := startBridgeMinIO(t)
	ns := createNamespace(ctx, t, cl, "e2e-production")
	unsealer := startUnsealer(ctx, t, cl, ns)
	holders := createRecoveryPGPKeys(ctx, t, cl, ns)
	createSecret(ctx, t, cl, ns, "openbao-prod-backup-store", map[string]string{
		backup.AccessKeyIDKey: m.AccessKey, backup.SecretAccessKeyKey: m.SecretKey})
	if err := cl.Create(ctx, productionSample(t, ns, unsealer, m)); err != nil {
		t.Fatalf("apply config/samples/production.yaml: %v", err)
	}
	waitReady(ctx, t, cl, ns, prodName, 10*time.Minute)
	logf("production sample Ready %s after the test started", time.Since(start).Round(100*time.Millisecond))

	c := &v1alpha1.OpenBaoCluster{}
	waitFor(ctx, t, 2*time.Minute, "the root token revoked", func() (bool, string) {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: prodName}, c); err != nil {
			return false, err.Error()
		}
		var conds []string
		for _, cond := range c.Status.Conditions {
			if cond.Status != metav1.ConditionTrue || cond.Type == v1alpha1.ConditionDegraded {
				conds = append(conds, cond.Type+"="+string(cond.Status)+" "+cond.Reason+": "+cond.Message)
			}
		}
		return c.Status.RootToken != nil && c.Status.RootToken.RevokedAt != nil,
			fmt.Sprintf("%+v; conditions not true: %s", c.Status.RootToken, strings.Join(conds, "; "))
	})
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.RootTokenSecretName()}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Secret %s is still there after the revocation (%v)", c.RootTokenSecretName(), err)
	}
	if s := c.Status.RootToken; s.RecoveryShares != 3 || s.RecoveryThreshold != 2 {
		t.Fatalf("status.rootToken %+v, want 3 recovery shares of threshold 2", s)
	}
	bao, secrets := breakGlass(ctx, t, cl, ns, c, holders)
	checkVotersAndAudit(ctx, t, cl, ns, bao)
	checkProductionObjects(ctx, t, cl, ns)

	// The sample's schedule is nightly: an on-demand backup stands for it.
	// A drill follows the backup at once; its outcome is checked, so a
	// parallel test's kills are held off (see the restore test's drills).
	resumeKills := holdOperatorKills(t)
	b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: ns}, Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: prodName}}
	if err := cl.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b = waitBackup(ctx, t, cl, ns, b.Name, v1alpha1.BackupSucceeded)
	if !strings.HasPrefix(b.Status.Key, "prod/"+ns+"/"+prodName+"/") || len(downloadObject(t, m, b.Status.Key)) != int(b.Status.Size) {
		t.Errorf("backup %s: key %s, %d bytes: not the object in the store under the sample's prefix", b.Name, b.Status.Key, b.Status.Size)
	}
	// A drill follows each new backup at once: it has started, or ended.
	waitFor(ctx, t, time.Minute, "the drill of "+b.Name+" started", func() (bool, string) {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: prodName}, c); err != nil {
			return false, err.Error()
		}
		st := c.Status.Backup
		return st != nil && ((st.Verifying != nil && st.Verifying.Backup == b.Name) || (st.LastVerified != nil && st.LastVerified.Backup == b.Name)),
			fmt.Sprintf("%+v", st)
	})
	drill := waitDrillOf(ctx, t, cl, ns, prodName, b.Name)
	resumeKills()
	if drill.Result != v1alpha1.DrillPassed || drill.Reason != backup.ReasonDrillCanaryMatched {
		t.Fatalf("the drill of %s: %+v", b.Name, drill)
	}
	logf("backup %s stored and drilled (%s) %s after the test started", b.Status.Key, drill.Reason, time.Since(start).Round(100*time.Millisecond))
	bao.call(t, http.MethodPost, "auth/token/revoke-self", nil)
	assertNoLeaks(ctx, t, cl, ns, secrets)
	logf("production sample test took %s", time.Since(start).Round(100*time.Millisecond))
}

// productionSample is config/samples/production.yaml with what only this
// node can provide, each set here in plain sight: the namespace, the image
// imported on the node, the unsealer's address, and MinIO for the bucket
// (its endpoint, bucket and region).
func productionSample(t *testing.T, ns, unsealer string, m *miniotest.Server) *unstructured.Unstructured {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "samples", "production.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatal(err)
	}
	built, err := localnode.BuildImages(node, localnode.ImageOpenBao)
	if err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(built[localnode.ImageOpenBao].Ref, ":")
	obj.SetNamespace(ns)
	for _, f := range []struct {
		value string
		path  []string
	}{
		{repo, []string{"spec", "image"}},
		{tag, []string{"spec", "version"}},
		{unsealer, []string{"spec", "unseal", "options", "address"}},
		{m.Endpoint, []string{"spec", "backup", "target", "endpoint"}},
		{m.Bucket, []string{"spec", "backup", "target", "bucket"}},
		{"us-east-1", []string{"spec", "backup", "target", "region"}}, // MinIO's
	} {
		if _, found, _ := unstructured.NestedFieldNoCopy(obj.Object, f.path...); !found && f.path[1] != "image" {
			t.Fatalf("the sample has no %s to replace", strings.Join(f.path, "."))
		}
		if err := unstructured.SetNestedField(obj.Object, f.value, f.path...); err != nil {
			t.Fatal(err)
		}
	}
	return obj
}

// waitReady waits as kubectl wait --for=condition=Ready does, for the
// condition of the current generation.
func waitReady(ctx context.Context, t *testing.T, cl client.Client, ns, name string, timeout time.Duration) {
	t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	waitEvery(ctx, t, time.Second, timeout, name+" Ready", func() (bool, string) {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady)
		if cond == nil {
			return false, "no Ready condition; phase " + string(c.Status.Phase)
		}
		return cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == c.Generation,
			fmt.Sprintf("Ready %s %s: %s (phase %s)", cond.Status, cond.Reason, cond.Message, c.Status.Phase)
	})
}

// breakGlass is what the sample's break-glass path promises: two of the
// three holders decrypt their recovery key shares with their private
// keys, and generate-root on the active server makes a new root token.
// It returns that token's API and the secrets a log must not hold.
func breakGlass(ctx context.Context, t *testing.T, cl client.Client, ns string, c *v1alpha1.OpenBaoCluster,
	holders openpgp.EntityList) (*baoAPI, map[string]string) {
	t.Helper()
	stored := &corev1.Secret{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.RecoveryKeysSecretName()}, stored); err != nil {
		t.Fatal(err)
	}
	bao := activeServer(ctx, t, cl, ns)
	var attempt struct {
		Nonce string `json:"nonce"`
		OTP   string `json:"otp"`
	}
	decode(t, bao.call(t, http.MethodPut, "sys/generate-root/attempt", map[string]any{}), &attempt)
	secrets := map[string]string{}
	var encoded string
	for i := 1; i <= 2; i++ {
		share := openShareOf(t, holders, stored.Data[bootstrap.RecoveryShareKey(i)])
		secrets[fmt.Sprintf("decrypted recovery share %d", i)] = share
		var update struct {
			Complete     bool   `json:"complete"`
			EncodedToken string `json:"encoded_token"`
		}
		decode(t, bao.call(t, http.MethodPut, "sys/generate-root/update", map[string]any{"key": share, "nonce": attempt.Nonce}), &update)
		if update.Complete != (i == 2) {
			t.Fatalf("generate-root complete %v after %d of threshold 2 shares", update.Complete, i)
		}
		encoded = update.EncodedToken
	}
	enc, err := base64.RawStdEncoding.DecodeString(encoded)
	if err != nil || len(enc) != len(attempt.OTP) {
		t.Fatalf("encoded token of %d bytes, OTP of %d: %v", len(enc), len(attempt.OTP), err)
	}
	for i := range enc {
		enc[i] ^= attempt.OTP[i]
	}
	bao.root = string(enc)
	secrets["the generated root token"] = bao.root
	return bao, secrets
}

// checkVotersAndAudit reads, with the generated root token, the Raft
// configuration (three voters) and the audit devices (the sample's, on).
func checkVotersAndAudit(ctx context.Context, t *testing.T, cl client.Client, ns string, bao *baoAPI) {
	t.Helper()
	caPEM := secretData(ctx, t, cl, ns, prodName+"-tls-ca", "ca.crt")
	pods := clusterServerPods(ctx, t, cl, ns, prodName, 3)
	waitFor(ctx, t, time.Minute, "3 voters", func() (bool, string) {
		voters, err := raftVoters(pods[0], ns, caPEM, bao.root)
		return err == nil && len(voters) == 3, fmt.Sprintf("voters %v (%v)", voters, err)
	})
	var audits map[string]struct {
		Type    string            `json:"type"`
		Options map[string]string `json:"options"`
	}
	decode(t, bao.call(t, http.MethodGet, "sys/audit", nil)["data"], &audits)
	if a, ok := audits["stdout/"]; !ok || a.Type != "file" || a.Options["file_path"] != "/dev/stdout" {
		t.Errorf("audit devices %+v, want the sample's file device stdout/ to /dev/stdout", audits)
		return
	}
	// The device writes: the audit lines of the calls above are in the
	// active server's log.
	active := &corev1.Pod{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: activePodName(ctx, t, cl, ns)}, active); err != nil {
		t.Fatal(err)
	}
	if log := podLogs(ctx, t, clientset(t), active); !strings.Contains(log, `"path":"sys/audit"`) {
		t.Errorf("no audit line for sys/audit in the log of %s", active.Name)
	}
}

// checkProductionObjects: the spec's production fields reached what runs.
// The ServiceMonitor and PrometheusRule exist with the sample's labels;
// every server pod has the zone spread and the resources; the
// NetworkPolicy admits the sample's API clients.
func checkProductionObjects(ctx context.Context, t *testing.T, cl client.Client, ns string) {
	t.Helper()
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion("monitoring.coreos.com/v1")
		obj.SetKind(kind)
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: prodName}, obj); err != nil {
			t.Fatalf("%s %s: %v", kind, prodName, err)
		}
		if obj.GetLabels()["release"] != "kube-prometheus-stack" {
			t.Errorf("%s %s has labels %v, want the sample's release label", kind, prodName, obj.GetLabels())
		}
	}
	for _, p := range clusterServerPods(ctx, t, cl, ns, prodName, 3) {
		zone := false
		for _, c := range p.Spec.TopologySpreadConstraints {
			zone = zone || (c.TopologyKey == zoneLabel && c.WhenUnsatisfiable == corev1.DoNotSchedule)
		}
		var bao *corev1.Container
		for i := range p.Spec.Containers {
			if p.Spec.Containers[i].Name == "openbao" {
				bao = &p.Spec.Containers[i]
			}
		}
		if bao == nil {
			t.Fatalf("pod %s has no container openbao", p.Name)
		}
		if r := bao.Resources; !zone || r.Requests.Cpu().String() != "250m" || r.Limits.Memory().String() != "1Gi" {
			t.Errorf("pod %s: zone spread %v, requests %v, limits %v; want the sample's", p.Name, zone, r.Requests, r.Limits)
		}
	}
	np := &unstructured.Unstructured{}
	np.SetAPIVersion("networking.k8s.io/v1")
	np.SetKind("NetworkPolicy")
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: prodName}, np); err != nil {
		t.Fatal(err)
	}
	if text := fmt.Sprint(np.Object["spec"]); !strings.Contains(text, "openbao-client:true") {
		t.Errorf("the NetworkPolicy does not admit the sample's apiClients: %s", text)
	}
}

// activePodName is the server OpenBao labelled active.
func activePodName(ctx context.Context, t *testing.T, cl client.Client, ns string) string {
	t.Helper()
	name := ""
	waitFor(ctx, t, time.Minute, "a server labelled active", func() (bool, string) {
		for _, p := range clusterServerPods(ctx, t, cl, ns, prodName, 3) {
			if p.Labels[podstate.LabelActive] == "true" {
				name = p.Name
			}
		}
		return name != "", "none"
	})
	return name
}

// activeServer reaches the active server, for now without a token.
func activeServer(ctx context.Context, t *testing.T, cl client.Client, ns string) *baoAPI {
	t.Helper()
	p := &corev1.Pod{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: activePodName(ctx, t, cl, ns)}, p); err != nil {
		t.Fatal(err)
	}
	caPEM := secretData(ctx, t, cl, ns, prodName+"-tls-ca", "ca.crt")
	return &baoAPI{client: tlsClient(caPEM, dnsName(*p, ns), nil), addr: "https://" + net.JoinHostPort(p.Status.PodIP, "8200")}
}

func decode(t *testing.T, from, into any) {
	t.Helper()
	data, err := yaml.Marshal(from)
	if err == nil {
		err = yaml.Unmarshal(data, into)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// createRecoveryPGPKeys makes the three holders' key pairs and the
// ConfigMap of their public keys the sample names.
func createRecoveryPGPKeys(ctx context.Context, t *testing.T, cl client.Client, ns string) openpgp.EntityList {
	t.Helper()
	var holders openpgp.EntityList
	data := map[string]string{}
	for _, name := range []string{"alice", "bob", "carol"} {
		e, armored, err := fixtures.PGPKey(name)
		if err != nil {
			t.Fatal(err)
		}
		holders, data[name+".asc"] = append(holders, e), armored
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "openbao-recovery-pgp-keys", Namespace: ns}, Data: data}
	if err := cl.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	return holders
}

// openShareOf decrypts a stored share with whichever holder's private key
// it was encrypted to, as gpg --decrypt does: the share in hex.
func openShareOf(t *testing.T, holders openpgp.EntityList, msg []byte) string {
	t.Helper()
	if len(msg) == 0 {
		t.Fatal("no encrypted share stored")
	}
	md, err := openpgp.ReadMessage(bytes.NewReader(msg), holders, nil, nil)
	if err != nil {
		t.Fatalf("decrypt the share: %v", err)
	}
	share, err := io.ReadAll(md.UnverifiedBody)
	if err != nil {
		t.Fatal(err)
	}
	return string(share)
}

func createSecret(ctx context.Context, t *testing.T, cl client.Client, ns, name string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}
	if err := cl.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// startUnsealer runs the stand-in for the sample's unsealer: OpenBao's dev
// server (in memory, unsealed, a root token chosen here) from the image on
// the node, serving TLS from a CA of the test's as Service unsealer. With
// its root token the test mounts transit, makes the key the sample names
// and a periodic token allowed only to encrypt and decrypt with it, and
// stores that token and the CA in the Secret the sample names. It returns
// the unsealer's address.
func startUnsealer(ctx context.Context, t *testing.T, cl client.Client, ns string) string {
	t.Helper()
	host := "unsealer." + ns + ".svc"
	ca := newExternalCA(t)
	certPEM, keyPEM := ca.issue(t, []string{host})
	createSecret(ctx, t, cl, ns, "unsealer-tls", map[string]string{"tls.crt": string(certPEM), "tls.key": string(keyPEM),
		"listener.hcl": `listener "tcp" {
  address       = "0.0.0.0:8200"
  tls_cert_file = "/unsealer/tls.crt"
  tls_key_file  = "/unsealer/tls.key"
}
`})
	built, err := localnode.BuildImages(node, localnode.ImageOpenBao)
	if err != nil {
		t.Fatal(err)
	}
	root := "unsealer-root-" + randomSuffix(t)
	pod := restrictedPod(ns, "unsealer", built[localnode.ImageOpenBao].Ref, "/bin/bao", "server", "-dev",
		"-dev-listen-address=127.0.0.1:8210", "-dev-root-token-id="+root, "-config=/unsealer/listener.hcl")
	pod.Labels = map[string]string{"app": "unsealer"}
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "HOME", Value: "/tmp"}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tls", MountPath: "/unsealer"}, {Name: "tmp", MountPath: "/tmp"}}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "unsealer-tls"}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "unsealer", Namespace: ns}, Spec: corev1.ServiceSpec{
		Selector: pod.Labels, Ports: []corev1.ServicePort{{Port: 8200, TargetPort: intstr.FromInt32(8200)}}}}
	for _, obj := range []client.Object{pod, svc} {
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	var bao *baoAPI
	waitFor(ctx, t, 2*time.Minute, "the unsealer serving", func() (bool, string) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil || pod.Status.PodIP == "" {
			return false, fmt.Sprint(pod.Status.Phase, err)
		}
		bao = &baoAPI{client: tlsClient(ca.caPEM, host, nil), addr: "https://" + net.JoinHostPort(pod.Status.PodIP, "8200"), root: root}
		body, code := bao.read(t, "sys/health")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
	bao.call(t, http.MethodPost, "sys/mounts/transit", map[string]any{"type": "transit"})
	bao.call(t, http.MethodPost, "transit/keys/openbao-prod", map[string]any{})
	bao.call(t, http.MethodPut, "sys/policies/acl/openbao-prod-unseal", map[string]any{"policy": `
path "transit/encrypt/openbao-prod" { capabilities = ["update"] }
path "transit/decrypt/openbao-prod" { capabilities = ["update"] }`})
	out := bao.call(t, http.MethodPost, "auth/token/create", map[string]any{"policies": []string{"openbao-prod-unseal"}, "period": "24h"})
	auth, _ := out["auth"].(map[string]any)
	token, _ := auth["client_token"].(string)
	if token == "" {
		t.Fatal("the unsealer made no token")
	}
	createSecret(ctx, t, cl, ns, "openbao-prod-transit", map[string]string{"BAO_TOKEN": token, "ca.crt": string(ca.caPEM)})
	return "https://" + host + ":8200"
}

func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", b)
}

// labelZone gives the node a zone if it has none, as a cloud's nodes
// have, so that the sample's zone spread (DoNotSchedule) can place the
// servers; the label goes when the test ends.
func labelZone(ctx context.Context, t *testing.T, cl client.Client) {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := cl.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if _, ok := n.Labels[zoneLabel]; ok {
			continue
		}
		patch := func(value any) error {
			data := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, zoneLabel, value)
			return cl.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}, client.RawPatch(types.MergePatchType, data))
		}
		if err := patch(`"e2e-zone-a"`); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := patch("null"); err != nil {
				t.Errorf("remove the zone label of node %s: %v", n.Name, err)
			}
		})
	}
}
