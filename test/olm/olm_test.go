package olm_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openbao/operator/test/localnode"
	"github.com/openbao/operator/test/olm"
)

// node is the local node of this run: one that is already up is reused and
// left running; otherwise the run starts its own and tears it down, and
// fails if the host facts differ afterwards (as the e2e tier does).
var node localnode.Config

func logf(format string, args ...any) { fmt.Printf("olm: "+format+"\n", args...) }

func TestMain(m *testing.M) {
	crlog.SetLogger(logr.Discard())
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		logf("skipping: the local node needs root")
		return 0
	}
	var err error
	if node, err = localnode.DefaultConfig(); err != nil {
		logf("%v", err)
		return 1
	}
	if err := olm.CheckTools(node); err != nil {
		logf("%v", err)
		return 1
	}
	unlock, err := localnode.Lock(node, logf)
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer unlock()
	if _, up, err := localnode.Status(node); err != nil {
		logf("%v", err)
		return 1
	} else if up {
		logf("reusing the node that is already up in %s; it is left running", node.StateDir)
		return m.Run()
	}
	before, err := localnode.SnapshotFacts(node)
	if err != nil {
		logf("%v", err)
		return 1
	}
	start := time.Now()
	t, err := localnode.Up(context.Background(), node, "olm", logf)
	code := 1
	if err != nil {
		logf("node did not come up: %v", err)
	} else {
		logf("node up in %s", t.Total.Round(time.Millisecond))
		code = m.Run()
	}
	if code != 0 {
		keepLogs()
	}
	logf("tests done %s after start", time.Since(start).Round(time.Millisecond))
	down := time.Now()
	if err := localnode.Down(context.Background(), node, logf); err != nil {
		logf("teardown failed: %v", err)
		return 1
	}
	logf("teardown took %s", time.Since(down).Round(time.Millisecond))
	after, err := localnode.SnapshotFacts(node)
	if err != nil {
		logf("%v", err)
		return 1
	}
	if diffs := localnode.DiffFacts(before, after); len(diffs) > 0 {
		for _, d := range diffs {
			logf("host fact changed: %s", d)
		}
		return 1
	}
	return code
}

// keepLogs copies the component logs out of the state directory, which
// teardown removes.
func keepLogs() {
	dst, err := os.MkdirTemp("", "localnode-logs-")
	if err != nil {
		return
	}
	if out, err := exec.Command("cp", "-r", filepath.Join(node.StateDir, "logs"), dst).CombinedOutput(); err != nil {
		logf("could not keep logs: %v %s", err, out)
		return
	}
	logf("component logs kept in %s", dst)
}

// TestOLM installs a real OLM on the node, then (proof) a trivial bundle
// from an opm-served file-based catalog, then (openbao-operator) the
// operator itself from bundle/ and olm/catalog through olm/install.yaml.
func TestOLM(t *testing.T) {
	ctx := context.Background()
	s, _, err := localnode.Status(node)
	if err != nil || s == nil {
		t.Fatalf("node state: %v", err)
	}
	start := time.Now()
	imgs, tm, err := olm.BuildImages(node, s.Images[localnode.ImagePause], logf)
	if err != nil {
		t.Fatal(err)
	}
	logf("images: olm %s, opm %s, bundle %s, catalog %s", imgs.OLM, imgs.OPM, imgs.Bundle, imgs.Catalog)
	if err := olm.Install(ctx, node, imgs, &tm, logf); err != nil {
		diagnose(t)
		t.Fatal(err)
	}
	t.Run("proof", func(t *testing.T) {
		if os.Getenv("OLM_SKIP_PROOF") != "" {
			t.Skip("OLM_SKIP_PROOF set")
		}
		if err := olm.ServeCatalog(ctx, node, imgs, &tm); err != nil {
			diagnose(t)
			t.Fatal(err)
		}
		logf("CatalogSource %s/%s READY %s after apply", olm.Namespace, olm.CatalogSourceName, tm.Catalog.Round(time.Millisecond))
		if err := olm.Subscribe(ctx, node, "olm-proof", &tm); err != nil {
			diagnose(t)
			t.Fatal(err)
		}
		logf("Subscription installed olm-proof.v0.0.1 (CSV Succeeded, Deployment Ready) %s after apply", tm.Subscription.Round(time.Millisecond))
		logf("OLM proof took %s on the node: images %s, import %s, CRDs %s, operators %s, packageserver %s, catalog %s, subscription %s",
			time.Since(start).Round(time.Millisecond), r(tm.Images), r(tm.Import), r(tm.CRDs), r(tm.Operators),
			r(tm.PackageServer), r(tm.Catalog), r(tm.Subscription))
	})
	t.Run("openbao-operator", func(t *testing.T) {
		oi, err := olm.BuildOperatorImages(node, logf)
		if err != nil {
			t.Fatal(err)
		}
		logf("images: operator %s, openbao %s, bundle %s, catalog %s", oi.Operator, oi.OpenBao, oi.Bundle, oi.Catalog)
		objs, err := olm.InstallManifests(node, oi.Catalog)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := node.Client()
		if err != nil {
			t.Fatal(err)
		}
		applied := time.Now()
		if err := localnode.Apply(ctx, cl, objs); err != nil {
			t.Fatal(err)
		}
		logf("applied olm/install.yaml (catalog image %s)", oi.Catalog)
		last, done := "", false
		deadline := time.Now().Add(6 * time.Minute)
		for time.Now().Before(deadline) {
			p := olm.Progress(ctx, cl, olm.Namespace, "openbao-operator", localnode.OperatorNamespace, "openbao-operator")
			if p != last {
				logf("+%s\n  %s", time.Since(applied).Round(time.Second), p)
				last = p
			}
			if strings.Contains(p, "phase=Succeeded reason=") {
				done = true
				break
			}
			time.Sleep(time.Second)
		}
		if !done {
			diagnose(t)
			t.Fatalf("the operator's CSV did not reach Succeeded in 6m; last:\n  %s", last)
		}
		logf("operator CSV Succeeded %s after apply", time.Since(applied).Round(time.Second))
		key := client.ObjectKey{Namespace: localnode.OperatorNamespace, Name: localnode.OperatorDeployment}
		if err := localnode.WaitDeploymentReady(ctx, cl, key, 2*time.Minute); err != nil {
			diagnose(t)
			t.Fatal(err)
		}
		logf("operator Deployment %s Ready %s after apply", key, time.Since(applied).Round(time.Second))
		formCluster(ctx, t, cl, oi.OpenBao)
	})
}

// clusterNamespace holds the OpenBaoCluster the OLM-installed operator
// forms. OLM installs the operator in its cluster-wide mode (install mode
// AllNamespaces, no tenancy), so no OpenBaoTenant is needed.
const clusterNamespace = "openbao-olm"

// formCluster applies config/samples' 3-server cluster on the local OpenBao
// image and waits until its phase is Running.
func formCluster(ctx context.Context, t *testing.T, cl client.Client, openbaoRef string) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := cl.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
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
	obj.SetNamespace(clusterNamespace)
	_ = unstructured.SetNestedField(obj.Object, repo, "spec", "image")
	_ = unstructured.SetNestedField(obj.Object, tag, "spec", "version")
	applied := time.Now()
	if err := cl.Create(ctx, obj); err != nil {
		diagnose(t)
		t.Fatalf("create OpenBaoCluster: %v", err)
	}
	logf("applied the sample OpenBaoCluster %s/%s (image %s)", clusterNamespace, obj.GetName(), openbaoRef)
	last := ""
	for deadline := time.Now().Add(4 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(obj.GroupVersionKind())
		if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
			continue
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		if phase != last && phase != "Running" {
			logf("+%s OpenBaoCluster phase %q", time.Since(applied).Round(time.Second), phase)
			last = phase
		}
		if phase != "Running" {
			continue
		}
		// Running counts the first voter; the joiners become voters when
		// autopilot promotes them.
		healthy, _, _ := unstructured.NestedBool(u.Object, "status", "raft", "healthy")
		servers, _, _ := unstructured.NestedSlice(u.Object, "status", "raft", "servers")
		voters := 0
		for _, raw := range servers {
			if m, _ := raw.(map[string]any); m["voter"] == true && m["healthy"] == true {
				voters++
			}
		}
		if v := fmt.Sprintf("Running, %d healthy voters, raft healthy %v", voters, healthy); v != last {
			logf("+%s OpenBaoCluster %s", time.Since(applied).Round(time.Second), v)
			last = v
		}
		if healthy && voters == 3 {
			logf("OpenBaoCluster %s/%s Running with 3 healthy voters %s after apply", clusterNamespace, obj.GetName(), time.Since(applied).Round(time.Second))
			diagnose(t)
			return
		}
	}
	diagnose(t)
	t.Fatalf("OpenBaoCluster not Running with 3 healthy voters after 4m (last: %s)", last)
}

// diagnose prints what OLM did, from kubectl, before teardown removes it.
func diagnose(t *testing.T) {
	kubectl := filepath.Join(node.BinDir, "kubectl")
	for _, args := range [][]string{
		{"get", "pods,jobs,deployments", "-A", "-o", "wide"},
		{"get", "catalogsources,subscriptions,installplans,csv", "-A"},
		{"get", "apiservices", "v1.packages.operators.coreos.com"},
		{"get", "validatingwebhookconfigurations,mutatingwebhookconfigurations"},
		{"-n", olm.Namespace, "get", "catalogsource", "-o", "yaml"},
		{"-n", localnode.OperatorNamespace, "get", "subscription,installplan", "-o", "yaml"},
		{"-n", localnode.OperatorNamespace, "get", "csv", "-o", "jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.reason} {.status.message}{\"\\n\"}{range .status.conditions[*]}  {.phase} {.reason} {.message}{\"\\n\"}{end}{end}"},
		{"-n", clusterNamespace, "get", "openbaocluster", "-o", "yaml"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		{"-n", olm.Namespace, "logs", "deploy/catalog-operator", "--tail=60"},
		{"-n", olm.Namespace, "logs", "deploy/olm-operator", "--tail=60"},
		{"-n", localnode.OperatorNamespace, "logs", "deploy/" + localnode.OperatorDeployment, "--tail=40"},
	} {
		cmd := exec.Command(kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+node.Kubeconfig())
		out, _ := cmd.CombinedOutput()
		t.Logf("$ kubectl %s\n%s", strings.Join(args, " "), out)
	}
}

func r(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
