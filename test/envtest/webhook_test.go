package envtest_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/test/testbin"
)

const webhookNamespace = "webhook"

// startWebhook runs a second API server whose ValidatingWebhookConfiguration
// is config/webhook's, pointed by envtest at a manager that serves the
// operator's webhook (SetupWebhooks, as cmd/openbao-operator registers it).
// The suite's own API server has no webhook, so that its tests may store
// what the webhook refuses (a backup of a missing cluster, to watch the
// controller fail it).
func startWebhook(t *testing.T) client.Client {
	t.Helper()
	c, _ := startWebhookServer(t)
	return c
}

// startWebhookServer is startWebhook that also returns the API server's
// admin config, from which a test impersonates users.
func startWebhookServer(t *testing.T) (client.Client, *rest.Config) {
	t.Helper()
	return startWebhookServerWith(t, controllers.Platform{})
}

// startWebhookServerWith is startWebhookServer under the platform's
// policies, as --allowed-image-repositories and --allowed-* set them.
func startWebhookServerWith(t *testing.T, platform controllers.Platform) (client.Client, *rest.Config) {
	t.Helper()
	return startWebhookEnv(t, platform, nil)
}

// startWebhookEnv is startWebhookServerWith with more registered on the
// manager (the drain guard) before it starts.
func startWebhookEnv(t *testing.T, platform controllers.Platform, register func(ctrl.Manager)) (client.Client, *rest.Config) {
	t.Helper()
	binDir, err := testbin.Dir()
	if err != nil {
		t.Fatal(err)
	}
	root, _ := testbin.RepoRoot()
	env := &envtest.Environment{
		BinaryAssetsDirectory: binDir,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(root, "config", "webhook", "manifests.yaml")},
		},
	}
	restCfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest with the webhook: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	wh := env.WebhookInstallOptions
	opts := controllers.ManagerOptions(controllers.ManagerSettings{
		Scheme: scheme, MetricsAddr: "0", ProbeAddr: "0", WebhookPort: wh.LocalServingPort, WebhookCertDir: wh.LocalServingCertDir,
	})
	mgr, err := ctrl.NewManager(restCfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	controllers.SetupWebhooks(mgr, platform)
	if register != nil {
		register(mgr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = mgr.Start(ctx) }()
	waitForTLS(t, net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort)))
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: webhookNamespace}}); err != nil {
		t.Fatal(err)
	}
	return c, restCfg
}

func waitForTLS(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // readiness only
		if err == nil {
			_ = conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook server %s is not up: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// object decodes a manifest of kind into an unstructured object, so that
// every value reaches the API server as written (nulls included).
func object(t *testing.T, kind, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		t.Fatalf("test manifest: %v", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind(kind)
	u.SetNamespace(webhookNamespace)
	return u
}

const backupSpec = `backup: {jwtAuthRole: backup, target: {endpoint: "https://s3.example.com", bucket: backups}}`

// refusedCreations are objects the CRD accepts and the webhook refuses:
// each names the field and a phrase of what it takes.
var refusedCreations = []struct {
	name, kind, manifest, field, phrase string
}{
	{"a lease TTL OpenBao cannot parse", "OpenBaoCluster", `spec: {version: 2.4.0, config: {default_lease_ttl: "1 hour"}}`,
		"spec.config.default_lease_ttl", "768h"},
	{"a boolean max lease TTL", "OpenBaoCluster", `spec: {version: 2.4.0, config: {max_lease_ttl: true}}`,
		"spec.config.max_lease_ttl", "a whole number of seconds"},
	{"a max lease TTL below OpenBao's default lease TTL", "OpenBaoCluster", `spec: {version: 2.4.0, config: {max_lease_ttl: 30d}}`,
		"spec.config.max_lease_ttl", "cannot have DefaultLeaseTTL larger than MaxLeaseTTL"},
	{"a request duration in words", "OpenBaoCluster", `spec: {version: 2.4.0, config: {default_max_request_duration: "ten minutes"}}`,
		"spec.config.default_max_request_duration", "30d"},
	{"a null in a config block", "OpenBaoCluster", `spec: {version: 2.4.0, config: {audit: {type: file, options: null}}}`,
		"spec.config.audit", "want a string, number, boolean"},
	{"a list of lists in config", "OpenBaoCluster", `spec: {version: 2.4.0, config: {cors_allowed_origins: [[a]]}}`,
		"spec.config.cors_allowed_origins", "lists of lists"},
	{"a config list of blocks and scalars", "OpenBaoCluster", `spec: {version: 2.4.0, config: {audit: [a, {type: file}]}}`,
		"spec.config.audit", "either objects or scalars"},
	{"an empty nested config key", "OpenBaoCluster", `spec: {version: 2.4.0, config: {audit: {"": 1}}}`,
		"spec.config.audit", "empty"},
	{"config nested deeper than 16 levels", "OpenBaoCluster", `spec: {version: 2.4.0, config: {x: ` + strings.Repeat("{a: ", 17) + "1" + strings.Repeat("}", 17) + `}}`,
		"spec.config.x", "16 levels"},
	{"a self-init body that is a string", "OpenBaoCluster", `spec: {version: 2.4.0, selfInit: {enabled: true, requests: [{name: a, operation: update, path: sys/audit/x, data: "type=file"}]}}`,
		"spec.selfInit.requests[0].data", "JSON object"},
	{"a self-init body holding null", "OpenBaoCluster", `spec: {version: 2.4.0, selfInit: {enabled: true, requests: [{name: a, operation: update, path: sys/audit/x, data: {type: null}}]}}`,
		"spec.selfInit.requests[0]", "null"},
	{"a self-init body with a list of lists", "OpenBaoCluster", `spec: {version: 2.4.0, selfInit: {enabled: true, requests: [{name: ok, operation: update, path: sys/x}, {name: b, operation: update, path: sys/y, data: {x: [[1]]}}]}}`,
		"spec.selfInit.requests[1]", "lists of lists"},
	{"a schedule on the 31st of February", "OpenBaoCluster", `spec: {version: 2.4.0, ` + backupSpec[:len(backupSpec)-1] + `, schedule: "0 0 31 2 *"}}`,
		"spec.backup.schedule", "never fires"},
	{"a schedule on the 31st of short months", "OpenBaoCluster", `spec: {version: 2.4.0, ` + backupSpec[:len(backupSpec)-1] + `, schedule: "0 0 31 4,6,9,11 *"}}`,
		"spec.backup.schedule", "@daily"},
	{"a backup of a cluster that does not exist", "OpenBaoBackup", `spec: {clusterName: nowhere}`,
		"spec.clusterName", "no OpenBaoCluster of this name in namespace webhook"},
	{"a backup of a cluster without spec.backup", "OpenBaoBackup", `spec: {clusterName: plain}`,
		"spec.clusterName", "spec.backup of OpenBaoCluster plain is not set"},
	{"a restore into a cluster that does not exist", "OpenBaoRestore", `spec: {clusterName: nowhere, source: {latest: true}}`,
		"spec.clusterName", "want the name of an existing OpenBaoCluster"},
	{"a restore into a cluster without spec.backup", "OpenBaoRestore", `spec: {clusterName: plain, source: {key: a/b.snap}}`,
		"spec.clusterName", "has no spec.backup"},
	{"a bootstrap restore of a cluster without fromBackup", "OpenBaoRestore", `spec: {clusterName: backed, source: {bootstrap: true}}`,
		"spec.source.bootstrap", "want source.key or source.latest"},
	{"a snapshot of a source in another namespace without a token", "OpenBaoCluster", `spec: {version: 2.4.0, bootstrap: {fromBackup: {target: {endpoint: "https://s3.example.com", bucket: backups}, latest: true, sourceNamespace: prod, unsealKeySecretRef: {name: k}}}}`,
		"spec.bootstrap.fromBackup.tokenSecretRef", "cluster refused-"},
	{"a source's identity kept from another namespace", "OpenBaoCluster", `spec: {version: 2.4.0, bootstrap: {fromBackup: {target: {endpoint: "https://s3.example.com", bucket: backups}, latest: true, sourceCluster: old, sourceNamespace: prod, unsealKeySecretRef: {name: k}, keepSourceIdentity: true}}}`,
		"spec.bootstrap.fromBackup.keepSourceIdentity", "ServiceAccounts of namespace prod"},
}

// refusedUpdates change a stored cluster in a way that depends on the old
// object: its running version (status.currentVersion; "mid-rollout X"
// leaves it empty, as while servers run two versions, with
// status.highestVersion X) or its stored values.
var refusedUpdates = []struct {
	name, stored, running, changed, field, phrase string
}{
	{"a downgrade mid-rollout, below the release a server ran", `spec: {version: 2.4.1}`, "mid-rollout 2.4.1", `spec: {version: 2.4.0}`,
		"spec.version", "Set spec.version back to 2.4.1"},
	{"a downgrade from the running version", `spec: {version: 2.5.0}`, "2.5.0", `spec: {version: 2.4.0}`,
		"spec.version", "Set spec.version back to 2.5.0"},
	{"a release without the cluster's KMS seal", `spec: {version: 2.4.0, unseal: {type: awskms, options: {region: eu-west-1}}}`, "2.4.0",
		`spec: {version: 2.7.0, unseal: {type: awskms, options: {region: eu-west-1}}}`, "spec.version", "Stay on 2.6 or earlier"},
	{"a release older than the static seal", `spec: {version: 2.4.0}`, "2.4.0", `spec: {version: 2.3.9, upgrade: {allowDowngrade: true}}`,
		"spec.version", "use 2.4.0 or later"},
	{"a lease TTL changed into words", `spec: {version: 2.4.0, config: {max_lease_ttl: 768h}}`, "", `spec: {version: 2.4.0, config: {max_lease_ttl: "a month"}}`,
		"spec.config.max_lease_ttl", "768h"},
}

// TestTheWebhookRefusesWhatTheControllerWouldNamingTheField registers the
// webhook in a real API server and sends what only it can refuse; none of
// the refused objects or changes may be stored.
func TestTheWebhookRefusesWhatTheControllerWouldNamingTheField(t *testing.T) {
	ctx := context.Background()
	c := startWebhook(t)
	for _, m := range []string{`metadata: {name: plain}
spec: {version: 2.4.0}`, `metadata: {name: backed}
spec: {version: 2.4.0, ` + backupSpec + `}`} {
		if err := c.Create(ctx, object(t, "OpenBaoCluster", m)); err != nil {
			t.Fatalf("a valid cluster was refused: %v", err)
		}
	}
	refused := 0
	for i, tc := range refusedCreations {
		t.Run(tc.name, func(t *testing.T) {
			obj := object(t, tc.kind, tc.manifest)
			obj.SetName(fmt.Sprintf("refused-%d", i))
			expectRefused(t, c.Create(ctx, obj), tc.field, tc.phrase)
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopy()); !apierrors.IsNotFound(err) {
				t.Errorf("refused %s %s: get: %v, want NotFound", tc.kind, obj.GetName(), err)
			}
			refused++
		})
	}
	for i, tc := range refusedUpdates {
		t.Run(tc.name, func(t *testing.T) {
			stored := object(t, "OpenBaoCluster", tc.stored)
			stored.SetName(fmt.Sprintf("update-%d", i))
			if err := c.Create(ctx, stored); err != nil {
				t.Fatal(err)
			}
			if tc.running != "" {
				setRunningVersion(t, c, stored.GetName(), tc.running)
			}
			changed := object(t, "OpenBaoCluster", tc.changed)
			changed.SetName(stored.GetName())
			current := &unstructured.Unstructured{}
			current.SetGroupVersionKind(stored.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(stored), current); err != nil {
				t.Fatal(err)
			}
			changed.SetResourceVersion(current.GetResourceVersion())
			expectRefused(t, c.Update(ctx, changed), tc.field, tc.phrase)
			after := &unstructured.Unstructured{}
			after.SetGroupVersionKind(stored.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(stored), after); err != nil {
				t.Fatal(err)
			}
			if after.GetResourceVersion() != current.GetResourceVersion() {
				t.Errorf("the refused update was stored: resourceVersion %s -> %s", current.GetResourceVersion(), after.GetResourceVersion())
			}
			refused++
		})
	}
	t.Run("a cluster named like another cluster's child", func(t *testing.T) {
		obj := object(t, "OpenBaoCluster", "metadata: {name: plain-internal}\nspec: {version: 2.4.0}")
		expectRefused(t, c.Create(ctx, obj), "metadata.name", "ends in -internal, which the operator gives a child of cluster plain")
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopy()); !apierrors.IsNotFound(err) {
			t.Errorf("refused cluster %s: get: %v, want NotFound", obj.GetName(), err)
		}
	})
	if refused < 20 {
		t.Errorf("%d objects refused, want at least 20", refused)
	}
	t.Run("valid objects are still accepted", func(t *testing.T) { acceptValid(t, c) })
}

func expectRefused(t *testing.T, err error, field, phrase string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want an Invalid error from the webhook", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "admission webhook") || !strings.Contains(msg, field+":") || !strings.Contains(msg, phrase) {
		t.Fatalf("the webhook's error does not name %q with %q:\n%s", field, phrase, msg)
	}
}

func setRunningVersion(t *testing.T, c client.Client, name, version string) {
	t.Helper()
	cl := &v1alpha1.OpenBaoCluster{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: webhookNamespace, Name: name}, cl); err != nil {
		t.Fatal(err)
	}
	cl.Status.CurrentVersion, cl.Status.Initialized = version, true
	if highest, ok := strings.CutPrefix(version, "mid-rollout "); ok {
		cl.Status.CurrentVersion, cl.Status.HighestVersion = "", highest
	}
	if err := c.Status().Update(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
}

// acceptValid sends what the webhook must let through: a cluster using
// every checked field well, an upgrade, a backup and a restore of a
// cluster with spec.backup, and a label change on a stored cluster.
func acceptValid(t *testing.T, c client.Client) {
	ctx := context.Background()
	good := object(t, "OpenBaoCluster", `metadata: {name: good}
spec:
  version: 2.4.0
  config: {default_lease_ttl: 768h, max_lease_ttl: 32d, ui: true, audit: [{type: file, path: stdout}]}
  selfInit: {enabled: true, requests: [{name: audit, operation: update, path: sys/audit/stdout, data: {type: file, options: {file_path: /dev/stdout}}}]}
  `+backupSpec+`
`)
	if err := c.Create(ctx, good); err != nil {
		t.Fatalf("valid cluster refused: %v", err)
	}
	for _, tc := range []struct{ kind, manifest string }{
		{"OpenBaoBackup", `metadata: {name: now}
spec: {clusterName: backed}`},
		{"OpenBaoRestore", `metadata: {name: latest}
spec: {clusterName: backed, source: {latest: true}}`},
	} {
		if err := c.Create(ctx, object(t, tc.kind, tc.manifest)); err != nil {
			t.Errorf("valid %s refused: %v", tc.kind, err)
		}
	}
	setRunningVersion(t, c, "backed", "2.4.0")
	cl := &v1alpha1.OpenBaoCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: webhookNamespace, Name: "backed"}, cl); err != nil {
		t.Fatal(err)
	}
	cl.Spec.Version = "2.5.0"
	cl.Labels = map[string]string{"team": "a"}
	if err := c.Update(ctx, cl); err != nil {
		t.Errorf("an upgrade was refused: %v", err)
	}
}
