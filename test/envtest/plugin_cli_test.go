package envtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/plugin"
)

// kubeconfigOf writes a kubeconfig of the API server's admin, as a user's
// ~/.kube/config: the plugin reads it through its --kubeconfig flag.
func kubeconfigOf(t *testing.T, c *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runPlugin runs `kubectl openbao ARGS --kubeconfig KUBECONFIG` in
// process, as the binary does, and returns what it printed.
func runPlugin(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := plugin.NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, "v-test")
	root.SetArgs(append(args, "--kubeconfig", kubeconfig))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// asUser is the plugin's own impersonation flags (kubectl's --as), for a
// user who logged in and holds only what the test bound to it.
func asUser(user string) []string {
	return []string{"--as", user, "--as-group", "system:authenticated"}
}

// TestPluginStatusListsTheClustersOfEveryNamespaceAsJSON: `status -A -o
// json` lists the clusters of two namespaces; -n keeps to one.
func TestPluginStatusListsTheClustersOfEveryNamespaceAsJSON(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"plugin-all-a", "plugin-all-b"} {
		createNamespace(t, ns)
		if err := k8s.Create(ctx, newCluster(t, ns, "metadata: {name: bao}\nspec: {version: 2.4.0}\n")); err != nil {
			t.Fatal(err)
		}
	}
	kc := kubeconfigOf(t, cfg)
	listed := func(args ...string) []string {
		out, err := runPlugin(t, kc, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var list plugin.ClusterList
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("%v: %v in:\n%s", args, err, out)
		}
		var names []string
		for _, c := range list.Items {
			if strings.HasPrefix(c.Namespace, "plugin-all-") {
				names = append(names, c.Namespace+"/"+c.Name)
			}
		}
		return names
	}
	if got := listed("status", "-A", "-o", "json"); strings.Join(got, " ") != "plugin-all-a/bao plugin-all-b/bao" {
		t.Errorf("status -A -o json listed %v", got)
	}
	if got := listed("status", "-n", "plugin-all-b", "-o", "json"); strings.Join(got, " ") != "plugin-all-b/bao" {
		t.Errorf("status -n plugin-all-b -o json listed %v", got)
	}
}

// TestPluginStatusNeedsOnlyTheViewRole: a user bound to Kubernetes' view
// role alone in the namespace, who may read no Secret, gets the status of
// a cluster, every server's line and the certificates' expiry (from
// status.tls) included, and no Secret value is printed.
func TestPluginStatusNeedsOnlyTheViewRole(t *testing.T) {
	const ns, user = "plugin-view", "viewer@plugin-view"
	f := newPluginFixture(t, ns)
	ensureUserRolesAggregated(t)
	bindUser(t, ns, user, "view")
	waitUntil(t, 30*time.Second, user+"'s binding in force", func() bool {
		return userAllowed(t, user, ns, "get", v1alpha1.GroupVersion.Group, "openbaoclusters", "")
	})
	if userAllowed(t, user, ns, "get", "", "secrets", f.cluster.TLSServerSecretName()) {
		t.Fatal("the view role reads Secrets here: the test proves nothing")
	}
	kc := kubeconfigOf(t, cfg)
	out, err := runPlugin(t, kc, append(asUser(user), "status", "bao", "-n", ns, "-o", "json")...)
	if err != nil {
		t.Fatalf("status as a view-only user: %v", err)
	}
	var got plugin.StatusView
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in:\n%s", err, out)
	}
	roles := []string{}
	for _, s := range got.Servers {
		roles = append(roles, s.Name+" "+s.Role+" "+s.Raft)
	}
	if strings.Join(roles, ", ") != "bao-0 active leader, bao-1 standby voter, bao-2 standby voter" || got.Phase != "Running" {
		t.Errorf("status as a view-only user: phase %q, servers %v", got.Phase, roles)
	}
	if at := got.Certificates["server"].NotAfter; at == nil || !at.Equal(f.serverExpiry) {
		t.Errorf("server certificate as a view-only user: %+v, want it to expire at %s", got.Certificates["server"], f.serverExpiry)
	}
	table, err := runPlugin(t, kc, append(asUser(user), "status", "-n", ns)...)
	if err != nil || !strings.Contains(table, "plugin-view  bao") {
		t.Errorf("status of the namespace as a view-only user: %v:\n%s", err, table)
	}
	for _, v := range f.secretValues {
		if strings.Contains(out+table, string(v)) {
			t.Fatal("status printed a Secret value")
		}
	}
}

// TestPluginResumeUpgradeWritesOnlyTheResumeRequest: an editor resumes a
// halted rollout; spec.upgrade.resumeRequest is the one field that
// changes. Without a halted rollout nothing is written.
func TestPluginResumeUpgradeWritesOnlyTheResumeRequest(t *testing.T) {
	ctx := context.Background()
	const ns, user = "plugin-resume", "editor@plugin-resume"
	createNamespace(t, ns)
	c := newCluster(t, ns, `metadata: {name: bao}
spec: {version: 2.4.0, replicas: 3, upgrade: {maxRaftLag: 50, podReadyTimeout: 7m, resumeRequest: first}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	ensureUserRolesAggregated(t)
	bindUser(t, ns, user, "edit")
	waitUntil(t, 30*time.Second, user+"'s binding in force", func() bool {
		return userAllowed(t, user, ns, "patch", v1alpha1.GroupVersion.Group, "openbaoclusters", "")
	})
	kc := kubeconfigOf(t, cfg)
	get := func() *v1alpha1.OpenBaoCluster {
		got := &v1alpha1.OpenBaoCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	before := get()
	if _, err := runPlugin(t, kc, append(asUser(user), "resume-upgrade", "bao", "-n", ns)...); !errors.Is(err, plugin.ErrNoHaltedRollout) {
		t.Fatalf("resume-upgrade without a halted rollout: %v", err)
	}
	if get().ResourceVersion != before.ResourceVersion {
		t.Fatal("resume-upgrade wrote the cluster although no rollout was halted")
	}
	before.Status.Upgrade = &v1alpha1.UpgradeStatus{TargetVersion: "2.4.1", TargetRevision: "r2", StartedAt: metav1.Now(),
		CurrentPartition: 2, Halted: "PodReadyTimeout", ResumeRequest: "first"}
	if err := k8s.Status().Update(ctx, before); err != nil {
		t.Fatal(err)
	}
	before = get()
	out, err := runPlugin(t, kc, append(asUser(user), "resume-upgrade", "bao", "-n", ns)...)
	if err != nil || !strings.Contains(out, "halted on PodReadyTimeout resumes") {
		t.Fatalf("resume-upgrade: %v:\n%s", err, out)
	}
	after := get()
	request := after.Spec.Upgrade.ResumeRequest
	if request == "" || request == "first" {
		t.Fatalf("spec.upgrade.resumeRequest is %q, want a new value", request)
	}
	after.Spec.Upgrade.ResumeRequest = "first"
	if !reflect.DeepEqual(before.Spec, after.Spec) || !reflect.DeepEqual(before.Status, after.Status) ||
		!reflect.DeepEqual(before.Labels, after.Labels) || !reflect.DeepEqual(before.Annotations, after.Annotations) {
		t.Errorf("resume-upgrade changed more than spec.upgrade.resumeRequest:\nbefore %+v\nafter  %+v", before.Spec, after.Spec)
	}
}

// TestPluginCheckSaysWhetherTheWebhookAnswers: on an API server without
// the operator's webhook, check fails that line (the CRDs are served) and
// exits non-zero; on one that calls the webhook, every line is OK. The
// probe is never stored.
func TestPluginCheckSaysWhetherTheWebhookAnswers(t *testing.T) {
	createNamespace(t, "plugin-check")
	out, err := runPlugin(t, kubeconfigOf(t, cfg), "check", "-n", "plugin-check")
	if !errors.Is(err, plugin.ErrChecksFailed) {
		t.Errorf("check without a webhook: %v, want %v", err, plugin.ErrChecksFailed)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 2 {
			lines[f[0]+" "+f[1]] = f[2]
		}
	}
	for check, want := range map[string]string{
		"CRD openbaoclusters.openbao.org": "OK", "CRD openbaobackups.openbao.org": "OK",
		"CRD openbaorestores.openbao.org": "OK", "CRD openbaotenants.openbao.org": "OK",
		"webhook " + plugin.ClusterWebhookName: "FAIL",
	} {
		if lines[check] != want {
			t.Errorf("check %s: %q, want %s in:\n%s", check, lines[check], want, out)
		}
	}
	if !strings.Contains(out, "no validating webhook for OpenBaoClusters is registered") {
		t.Errorf("the FAIL does not say the webhook is missing:\n%s", out)
	}
	wk, whCfg := startWebhookServer(t)
	out, err = runPlugin(t, kubeconfigOf(t, whCfg), "check", "-n", webhookNamespace, "-o", "json")
	var report plugin.CheckReport
	if err != nil || json.Unmarshal([]byte(out), &report) != nil || len(report.Results) != 5 || report.Failed() {
		t.Errorf("check with the webhook: %v:\n%s", err, out)
	}
	probe := &v1alpha1.OpenBaoCluster{}
	for _, c := range []client.Client{k8s, wk} {
		for _, ns := range []string{"plugin-check", webhookNamespace} {
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "kubectl-openbao-check-internal"}, probe); !apierrors.IsNotFound(err) {
				t.Errorf("the dry-run probe in %s: %v, want NotFound", ns, err)
			}
		}
	}
}

// TestPluginVersionReadsTheOperatorsDeployment: the operator's release
// comes from its Deployment for whoever may read it, and is "unknown",
// with the reason, for whoever may not.
func TestPluginVersionReadsTheOperatorsDeployment(t *testing.T) {
	const ns, user = "plugin-version-op", "viewer@plugin-version"
	createNamespace(t, ns)
	labels := map[string]string{"app.kubernetes.io/name": "openbao-operator", "control-plane": "controller-manager"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "openbao-operator-controller-manager",
			Labels: map[string]string{"app.kubernetes.io/name": "openbao-operator", "control-plane": "controller-manager", "app.kubernetes.io/version": "0.7.0"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "ghcr.io/openbao/operator:0.6.9"}}}}},
	}
	if err := k8s.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	kc := kubeconfigOf(t, cfg)
	version := func(args ...string) plugin.VersionView {
		out, err := runPlugin(t, kc, append(args, "version", "--operator-namespace", ns, "-o", "yaml")...)
		var v plugin.VersionView
		if err != nil || yaml.Unmarshal([]byte(out), &v) != nil {
			t.Fatalf("version %v: %v:\n%s", args, err, out)
		}
		return v
	}
	if v := version(); v.Plugin != "v-test" || v.Operator != "0.7.0" || v.Deployment != ns+"/"+d.Name {
		t.Errorf("version as the admin: %+v", v)
	}
	if v := version(asUser(user)...); v.Plugin != "v-test" || v.Operator != "unknown" || !strings.Contains(v.Unknown, "forbidden") {
		t.Errorf("version as a user who may not read Deployments: %+v", v)
	}
}
