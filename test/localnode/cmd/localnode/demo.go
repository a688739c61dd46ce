package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/test/localnode"
)

const (
	demoNamespace = "openbao-demo"
	demoSample    = "config/samples/openbao_v1alpha1_openbaocluster.yaml"
)

// demo brings the node up, installs the operator, applies the 3-replica
// sample into openbao-demo and waits until it is Running; it leaves
// everything running and prints how to use it.
func demo(ctx context.Context, c localnode.Config) error {
	start := time.Now()
	if err := up(ctx, c, "demo"); err != nil {
		return err
	}
	t, err := localnode.InstallOperator(ctx, c, logf)
	if err != nil {
		return fmt.Errorf("install operator (node left running; `make demo-down` removes it): %w", err)
	}
	logf("operator images built in %s, imported in %s, helm install %s, Ready %s after helm started", r(t.Build), r(t.Import), r(t.Helm), r(t.Ready))
	applied := time.Now()
	name, err := applySample(ctx, c)
	if err != nil {
		return fmt.Errorf("apply the sample (node left running): %w", err)
	}
	if err := waitRunning(ctx, c, name, 5*time.Minute); err != nil {
		return fmt.Errorf("OpenBaoCluster %s/%s (node left running): %w", demoNamespace, name, err)
	}
	logf("OpenBaoCluster %s/%s Running %s after apply; demo ready in %s", demoNamespace, name, r(time.Since(applied)), r(time.Since(start)))
	printUsage(c, name)
	return nil
}

// applySample applies config/samples' 3-replica cluster into openbao-demo.
// The sample names the public OpenBao image; the local node reaches no
// registry, so the demo points it at the locally built image, whose tag is
// the OpenBao version with a content hash.
func applySample(ctx context.Context, c localnode.Config) (string, error) {
	cl, err := c.Client()
	if err != nil {
		return "", err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := cl.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return "", err
	}
	if err := localnode.Provision(ctx, cl, demoNamespace); err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(c.RepoRoot, demoSample))
	if err != nil {
		return "", err
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		return "", fmt.Errorf("%s: %w", demoSample, err)
	}
	built, err := localnode.BuildImages(c, localnode.ImageOpenBao)
	if err != nil {
		return "", err
	}
	repo, tag, _ := strings.Cut(built[localnode.ImageOpenBao].Ref, ":")
	obj.SetNamespace(demoNamespace)
	_ = unstructured.SetNestedField(obj.Object, repo, "spec", "image")
	_ = unstructured.SetNestedField(obj.Object, tag, "spec", "version")
	logf("applying %s into %s with image %s:%s", demoSample, demoNamespace, repo, tag)
	err = cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("localnode-demo"), client.ForceOwnership)
	return obj.GetName(), err
}

func waitRunning(ctx context.Context, c localnode.Config, name string, timeout time.Duration) error {
	cl, err := c.Client()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion("openbao.org/v1alpha1")
		obj.SetKind("OpenBaoCluster")
		if err := cl.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: name}, obj); err == nil {
			phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
			if phase == "Running" {
				return nil
			}
			if phase != last {
				logf("phase %s", phase)
				last = phase
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("not Running after %s (last phase %q); see ./bin/kubectl -n %s describe openbaocluster %s",
		timeout, last, demoNamespace, name)
}

func printUsage(c localnode.Config, name string) {
	fmt.Printf(`
The local node runs the operator and a 3-server OpenBao cluster; it stays up
until `+"`make demo-down`"+`.

  export KUBECONFIG=%[1]s
  ./bin/kubectl get openbaoclusters -A
  ./bin/kubectl -n %[2]s get pods -L openbao-active

The active server, from this host, through the client Service's ClusterIP
(kube-proxy's rules apply to the host too), with the cluster's CA:

  ./bin/kubectl -n %[2]s get secret %[3]s-tls-ca -o jsonpath='{.data.ca\.crt}' | base64 -d > /tmp/%[3]s-ca.crt
  IP=$(./bin/kubectl -n %[2]s get service %[3]s -o jsonpath='{.spec.clusterIP}')
  curl --cacert /tmp/%[3]s-ca.crt --resolve %[3]s.%[2]s.svc:8200:$IP https://%[3]s.%[2]s.svc:8200/v1/sys/health

The root token is in Secret %[2]s/%[3]s-root-token, key token:

  ./bin/kubectl -n %[2]s get secret %[3]s-root-token -o jsonpath='{.data.token}' | base64 -d

Tear down: make demo-down
`, c.Kubeconfig(), demoNamespace, name)
}
