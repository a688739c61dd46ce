package olm_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/test/localnode"
	"github.com/openbao/operator/test/olm"
)

// node is the local node of this run: one that is already up is reused and
// left running; otherwise the run starts its own and tears it down, and
// fails if the host facts differ afterwards (localnode.Tier).
var node localnode.Config

var tier = &localnode.Tier{
	Name: "olm",
	Prepare: func(c localnode.Config) (func(), error) {
		node = c
		return nil, olm.CheckTools(c)
	},
}

func logf(format string, args ...any) { tier.Logf(format, args...) }

func TestMain(m *testing.M) { os.Exit(tier.Main(m)) }

// Namespaces of the test: the cluster of the all-namespaces install, and
// the operator and team namespaces of the install for one namespace.
const (
	clusterNamespace = "openbao-olm"
	scopedOperator   = "openbao-olm-operator"
	scopedTeam       = "openbao-olm-team"
)

// TestOLM installs a real OLM on the node, then the operator through it as
// a user would (olm/install.yaml: all namespaces) and forms the sample
// cluster; upgrades the operator to the next bundle of an updated catalog
// under the running cluster; uninstalls it, leaving the cluster running; and
// installs it again for one namespace, where it holds rights there alone.
// Each step needs the one before.
func TestOLM(t *testing.T) {
	tier.Require(t)
	ctx := context.Background()
	imgs, tm, err := olm.BuildImages(node, logf)
	if err != nil {
		t.Fatal(err)
	}
	logf("images: olm %s, opm %s (built in %s, imported in %s)", imgs.OLM, imgs.OPM, r(tm.Images), r(tm.Import))
	if err := olm.Install(ctx, node, imgs, &tm, logf); err != nil {
		diagnose(t)
		t.Fatal(err)
	}
	oi, err := olm.BuildOperatorImages(node, logf)
	if err != nil {
		t.Fatal(err)
	}
	logf("images: operator %s (next %s), wrapper %s, openbao %s, catalog %s, upgrade catalog %s", oi.Operator, oi.OperatorNext, oi.Wrapper, oi.OpenBao, oi.Catalog, oi.UpgradeCatalog)
	cl, err := node.Client()
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		run  func(*testing.T)
	}{
		{"all-namespaces", func(t *testing.T) { installAllNamespaces(ctx, t, cl, oi) }},
		{"upgrade", func(t *testing.T) { upgrade(ctx, t, cl, oi) }},
		{"uninstall", func(t *testing.T) { uninstall(ctx, t, cl) }},
		{"one-namespace", func(t *testing.T) { installForOneNamespace(ctx, t, cl, oi) }},
	}
	for _, step := range steps {
		if !t.Run(step.name, step.run) {
			diagnose(t)
			t.FailNow()
		}
	}
}

// installAllNamespaces applies olm/install.yaml as it is, but for the local
// catalog image, and forms the sample 3-server cluster through it.
func installAllNamespaces(ctx context.Context, t *testing.T, cl client.Client, oi olm.OperatorImages) {
	objs, err := olm.InstallManifests(node, oi.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	if err := localnode.Apply(ctx, cl, objs); err != nil {
		t.Fatal(err)
	}
	if err := olm.WaitSubscription(ctx, cl, localnode.OperatorNamespace, "openbao-operator", olm.CurrentCSV, 6*time.Minute, logf); err != nil {
		t.Fatal(err)
	}
	logf("CSV %s Succeeded %s after applying olm/install.yaml", olm.CurrentCSV, r(time.Since(applied)))
	waitOperator(ctx, t, cl, localnode.OperatorNamespace)
	logf("operator Deployment Ready %s after apply", r(time.Since(applied)))
	createNamespace(ctx, t, cl, clusterNamespace)
	formCluster(ctx, t, cl, clusterNamespace, 3, oi.OpenBao)
}

// upgrade points the CatalogSource at the next catalog, as a release does,
// and waits until OLM has replaced the CSV. The cluster keeps its pods, and
// the new operator manages it: a Service deleted under it comes back.
func upgrade(ctx context.Context, t *testing.T, cl client.Client, oi olm.OperatorImages) {
	before := podUIDs(ctx, t, cl, clusterNamespace)
	cs := &unstructured.Unstructured{}
	cs.SetGroupVersionKind(olm.CatalogSourceGVK)
	if err := cl.Get(ctx, client.ObjectKey{Namespace: olm.Namespace, Name: "openbao-operator"}, cs); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(cs.Object, oi.UpgradeCatalog, "spec", "image")
	start := time.Now()
	if err := cl.Update(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if err := olm.WaitSubscription(ctx, cl, localnode.OperatorNamespace, "openbao-operator", olm.NextCSV, 6*time.Minute, logf); err != nil {
		t.Fatal(err)
	}
	logf("CSV %s replaced %s %s after the catalog changed", olm.NextCSV, olm.CurrentCSV, r(time.Since(start)))
	if err := waitGone(ctx, cl, csvObject(localnode.OperatorNamespace, olm.CurrentCSV)); err != nil {
		t.Fatal(err)
	}
	waitOperator(ctx, t, cl, localnode.OperatorNamespace)
	waitManagerImage(ctx, t, cl, oi.OperatorNext)
	svc := clusterService(ctx, t, cl, clusterNamespace)
	if err := cl.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	err := localnode.Poll(ctx, 2*time.Minute, "the upgraded operator recreates Service "+svc.Name, func(ctx context.Context) (bool, string, error) {
		var now corev1.Service
		if err := cl.Get(ctx, client.ObjectKeyFromObject(svc), &now); err != nil {
			return false, err.Error(), nil
		}
		return now.UID != svc.UID, "the old Service is still there", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	logf("the upgraded operator recreated Service %s/%s", clusterNamespace, svc.Name)
	if after := podUIDs(ctx, t, cl, clusterNamespace); !maps.Equal(before, after) {
		t.Errorf("the operator's upgrade replaced OpenBao pods: before %v, after %v", before, after)
	}
}

// uninstall runs docs/install.md's uninstall block as written. The operator
// goes, and so does every copy OLM made of its CSV; its CRDs, the cluster
// and its pods stay.
func uninstall(ctx context.Context, t *testing.T, cl client.Client) {
	before := podUIDs(ctx, t, cl, clusterNamespace)
	copies, err := olm.CSVCopies(ctx, cl, localnode.OperatorNamespace, olm.NextCSV)
	if err != nil {
		t.Fatal(err)
	}
	logf("CSV %s is in %d namespaces (its own and OLM's copies)", olm.NextCSV, len(copies))
	block, err := installDocBlock("To uninstall,")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+node.Kubeconfig(), "PATH="+node.BinDir+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	logf("$ docs/install.md uninstall block\n%s", out)
	if err != nil {
		t.Fatalf("docs/install.md's uninstall block: %v", err)
	}
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: localnode.OperatorNamespace, Name: localnode.OperatorDeployment}}
	if err := waitGone(ctx, cl, deployment); err != nil {
		t.Fatal(err)
	}
	logf("operator uninstalled (Deployment gone) %s after the block started", r(time.Since(start)))
	if err := olm.WaitCSVGone(ctx, cl, localnode.OperatorNamespace, olm.NextCSV, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	logf("CSV %s and OLM's copies of it gone %s after the block started", olm.NextCSV, r(time.Since(start)))
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := cl.Get(ctx, client.ObjectKey{Name: "openbaoclusters.openbao.org"}, crd); err != nil {
		t.Errorf("the OpenBaoCluster CRD went with the operator: %v", err)
	}
	if after := podUIDs(ctx, t, cl, clusterNamespace); !maps.Equal(before, after) {
		t.Errorf("uninstalling the operator touched OpenBao pods: before %v, after %v", before, after)
	}
}

// installDocBlock is the first shell block of docs/install.md after the paragraph
// that starts with lead.
func installDocBlock(lead string) (string, error) {
	data, err := os.ReadFile(filepath.Join(node.RepoRoot, "docs", "install.md"))
	if err != nil {
		return "", err
	}
	_, after, found := strings.Cut(string(data), "\n"+lead)
	if !found {
		return "", fmt.Errorf("docs/install.md has no paragraph starting %q", lead)
	}
	_, after, found = strings.Cut(after, "```sh\n")
	block, _, closed := strings.Cut(after, "```")
	if !found || !closed {
		return "", fmt.Errorf("docs/install.md has no shell block after %q", lead)
	}
	return block, nil
}

// installForOneNamespace installs the operator again, in a namespace of its
// own with an OperatorGroup that targets one team namespace (the comment in
// olm/install.yaml): it holds rights on workloads and Secrets there and
// nowhere else, and forms a cluster there.
func installForOneNamespace(ctx context.Context, t *testing.T, cl client.Client, oi olm.OperatorImages) {
	objs, err := olm.InstallManifests(node, oi.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	var install []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "OperatorGroup", "Subscription":
			o.SetNamespace(scopedOperator)
			if o.GetKind() == "OperatorGroup" {
				_ = unstructured.SetNestedStringSlice(o.Object, []string{scopedTeam}, "spec", "targetNamespaces")
			}
			install = append(install, o)
		}
	}
	for _, name := range []string{scopedOperator, scopedTeam} {
		createNamespace(ctx, t, cl, name)
	}
	start := time.Now()
	if err := localnode.Apply(ctx, cl, install); err != nil {
		t.Fatal(err)
	}
	if err := olm.WaitSubscription(ctx, cl, scopedOperator, "openbao-operator", olm.NextCSV, 6*time.Minute, logf); err != nil {
		t.Fatal(err)
	}
	waitOperator(ctx, t, cl, scopedOperator)
	logf("operator installed for namespace %s: CSV Succeeded and Deployment Ready %s after apply", scopedTeam, r(time.Since(start)))
	checkRights(ctx, t, cl, "system:serviceaccount:"+scopedOperator+":"+localnode.OperatorDeployment)
	formCluster(ctx, t, cl, scopedTeam, 1, oi.OpenBao)
	if in, err := olm.CSVCopies(ctx, cl, localnode.OperatorNamespace, olm.NextCSV); err != nil || len(in) > 0 {
		t.Errorf("the uninstalled CSV %s is back, in %v (%v)", olm.NextCSV, in, err)
	}
}

// checkRights asks the API server what the controller's ServiceAccount may
// do: workloads and Secrets in the target namespace, not in the cluster of
// the first install, not cluster-wide.
func checkRights(ctx context.Context, t *testing.T, cl client.Client, user string) {
	for _, c := range []struct {
		verb, group, resource, namespace string
		want                             bool
	}{
		{"get", "", "secrets", scopedTeam, true},
		{"create", "apps", "statefulsets", scopedTeam, true},
		{"get", "", "secrets", clusterNamespace, false},
		{"create", "apps", "statefulsets", clusterNamespace, false},
		{"list", "", "secrets", "", false},
		{"list", "openbao.org", "openbaoclusters", "", true},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: c.verb, Group: c.group, Resource: c.resource, Namespace: c.namespace},
		}}
		if err := cl.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		where := c.namespace
		if where == "" {
			where = "(cluster-wide)"
		}
		logf("can %s %s %s in %s: %v", user, c.verb, c.resource, where, sar.Status.Allowed)
		if sar.Status.Allowed != c.want {
			t.Errorf("%s may %s %s in %s: %v, want %v", user, c.verb, c.resource, where, sar.Status.Allowed, c.want)
		}
	}
}

func createNamespace(ctx context.Context, t *testing.T, cl client.Client, name string) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := cl.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
}

func waitOperator(ctx context.Context, t *testing.T, cl client.Client, namespace string) {
	key := client.ObjectKey{Namespace: namespace, Name: localnode.OperatorDeployment}
	if err := localnode.WaitDeploymentReady(ctx, cl, key, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// waitManagerImage waits until every manager pod runs image, none of
// another image left.
func waitManagerImage(ctx context.Context, t *testing.T, cl client.Client, image string) {
	t.Helper()
	err := localnode.Poll(ctx, 2*time.Minute, "every manager pod on "+image, func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(localnode.OperatorNamespace), localnode.ManagerSelector); err != nil {
			return false, err.Error(), nil
		}
		var on []string
		for _, p := range pods.Items {
			for _, c := range p.Spec.Containers {
				if c.Name == localnode.ManagerContainer {
					on = append(on, p.Name+" "+c.Image)
				}
			}
		}
		return len(on) > 0 && !slices.ContainsFunc(on, func(s string) bool { return !strings.HasSuffix(s, " "+image) }), fmt.Sprint(on), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func csvObject(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(olm.CSVGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func waitGone(ctx context.Context, cl client.Client, obj client.Object) error {
	return localnode.Poll(ctx, 2*time.Minute, obj.GetName()+" gone", func(ctx context.Context) (bool, string, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
}

// podUIDs names the OpenBao pods of a namespace by UID; it fails the test
// unless every one is ready.
func podUIDs(ctx context.Context, t *testing.T, cl client.Client, namespace string) map[string]types.UID {
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		})
		if !ready {
			t.Errorf("pod %s/%s is not ready", namespace, p.Name)
		}
		out[p.Name] = p.UID
	}
	if len(out) == 0 {
		t.Errorf("no pods in %s", namespace)
	}
	return out
}

// clusterService is a ClusterIP Service the operator made for the cluster
// (not the headless one the servers find their peers through).
func clusterService(ctx context.Context, t *testing.T, cl client.Client, namespace string) *corev1.Service {
	var svcs corev1.ServiceList
	if err := cl.List(ctx, &svcs, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	for i, s := range svcs.Items {
		owner := metav1.GetControllerOf(&s)
		if owner != nil && owner.Kind == "OpenBaoCluster" && s.Spec.ClusterIP != corev1.ClusterIPNone {
			return &svcs.Items[i]
		}
	}
	t.Fatalf("no ClusterIP Service of the OpenBaoCluster in %s", namespace)
	return nil
}

// formCluster applies config/samples' cluster with the given replicas on
// the local OpenBao image and waits until it is Running with that many
// healthy voters.
func formCluster(ctx context.Context, t *testing.T, cl client.Client, namespace string, replicas int64, openbaoRef string) {
	data, err := os.ReadFile(filepath.Join(node.RepoRoot, "config", "samples", "openbao_v1alpha1_openbaocluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := localnode.DecodeManifests(data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("sample: %v", err)
	}
	obj := objs[0]
	repo, tag, _ := strings.Cut(openbaoRef, ":")
	obj.SetNamespace(namespace)
	_ = unstructured.SetNestedField(obj.Object, repo, "spec", "image")
	_ = unstructured.SetNestedField(obj.Object, tag, "spec", "version")
	_ = unstructured.SetNestedField(obj.Object, replicas, "spec", "replicas")
	// As in the e2e harness: the CSV's Deployment is Ready before
	// kube-proxy routes the webhook Service to it.
	if err := localnode.WaitWebhookServing(ctx, cl, namespace, time.Minute); err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	if err := cl.Create(ctx, obj); err != nil {
		t.Fatalf("create OpenBaoCluster: %v", err)
	}
	logf("applied the sample OpenBaoCluster %s/%s, %d replicas (image %s)", namespace, obj.GetName(), replicas, openbaoRef)
	last := ""
	err = localnode.Poll(ctx, 4*time.Minute, fmt.Sprintf("OpenBaoCluster %s/%s Running with %d healthy voters", namespace, obj.GetName(), replicas),
		func(ctx context.Context) (bool, string, error) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(obj.GroupVersionKind())
			if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
				return false, err.Error(), nil
			}
			state := clusterState(u)
			if state != last {
				logf("+%s OpenBaoCluster %s/%s %s", r(time.Since(applied)), namespace, obj.GetName(), state)
				last = state
			}
			return state == fmt.Sprintf("Running, %d healthy voters, raft healthy true", replicas), state, nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// clusterState sums up an OpenBaoCluster's status: its phase and, once
// Running, its healthy voters (Running counts the first voter; the joiners
// become voters when autopilot promotes them).
func clusterState(u *unstructured.Unstructured) string {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	if phase != "Running" {
		return fmt.Sprintf("phase %q", phase)
	}
	healthy, _, _ := unstructured.NestedBool(u.Object, "status", "raft", "healthy")
	servers, _, _ := unstructured.NestedSlice(u.Object, "status", "raft", "servers")
	voters := 0
	for _, raw := range servers {
		if m, _ := raw.(map[string]any); m["voter"] == true && m["healthy"] == true {
			voters++
		}
	}
	return fmt.Sprintf("Running, %d healthy voters, raft healthy %v", voters, healthy)
}

// diagnose records what OLM did, from kubectl, before teardown removes it:
// in full into the node's log directory, which a failed run keeps, and the
// object listing in the test's output.
func diagnose(t *testing.T) {
	kubectl := filepath.Join(node.BinDir, "kubectl")
	var all bytes.Buffer
	for i, args := range [][]string{
		{"get", "pods,jobs,deployments", "-A", "-o", "wide"},
		{"get", "catalogsources,subscriptions,installplans,csv", "-A"},
		{"get", "apiservices", "v1.packages.operators.coreos.com"},
		{"get", "validatingwebhookconfigurations,mutatingwebhookconfigurations"},
		{"-n", olm.Namespace, "get", "catalogsource", "-o", "yaml"},
		{"get", "subscription,installplan", "-A", "-o", "yaml"},
		{"get", "csv", "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} uid={.metadata.uid} copiedFrom={.metadata.labels.olm\\.copiedFrom} {.status.phase} {.status.reason} {.status.message}{\"\\n\"}{range .status.conditions[*]}  {.lastTransitionTime} {.phase} {.reason} {.message}{\"\\n\"}{end}{end}"},
		{"get", "openbaocluster", "-A", "-o", "yaml"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		{"-n", olm.Namespace, "logs", "deploy/catalog-operator"},
		{"-n", olm.Namespace, "logs", "deploy/olm-operator"},
		{"-n", localnode.OperatorNamespace, "logs", "deploy/" + localnode.OperatorDeployment},
		{"-n", scopedOperator, "logs", "deploy/" + localnode.OperatorDeployment},
	} {
		cmd := exec.Command(kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+node.Kubeconfig())
		out, _ := cmd.CombinedOutput()
		fmt.Fprintf(&all, "$ kubectl %s\n%s\n", strings.Join(args, " "), out)
		if i < 2 {
			t.Logf("$ kubectl %s\n%s", strings.Join(args, " "), out)
		}
	}
	path := node.LogPath("olm-diagnosis")
	if err := os.WriteFile(path, all.Bytes(), 0o644); err != nil {
		t.Logf("could not write the diagnosis: %v", err)
		return
	}
	t.Logf("OLM's objects and logs: olm-diagnosis.log among the kept component logs")
}

func r(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
