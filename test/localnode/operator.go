package localnode

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names of the operator's installation (config/default).
const (
	OperatorNamespace  = "openbao-operator-system"
	OperatorDeployment = "openbao-operator-controller-manager"
	ManagerContainer   = "manager"
)

// OperatorTimings are the phases of InstallOperator.
type OperatorTimings struct {
	Build, Import, Ready time.Duration
}

// InstallOperator builds the operator image (and the OpenBao image the
// operator's clusters run), imports them, renders config/default with
// kustomize, points the manager at the fresh image and applies it all, then
// waits for the manager Deployment to be available.
func InstallOperator(ctx context.Context, c Config, logf Logf) (OperatorTimings, error) {
	var t OperatorTimings
	if _, up, err := Status(c); err != nil {
		return t, err
	} else if !up {
		return t, fmt.Errorf("no local node is up in %s (run `localnode up` or `make demo`)", c.StateDir)
	}
	phase := time.Now()
	built, err := BuildImages(c, ImageOperator, ImageOpenBao)
	if err != nil {
		return t, err
	}
	t.Build = time.Since(phase)
	phase = time.Now()
	if err := ImportImages(c, built, logf); err != nil {
		return t, err
	}
	t.Import = time.Since(phase)
	logf("images %s and %s built in %s, imported in %s", built[ImageOperator].Ref, built[ImageOpenBao].Ref,
		t.Build.Round(time.Millisecond), t.Import.Round(time.Millisecond))
	objs, err := RenderKustomize(c, filepath.Join(c.RepoRoot, "config", "default"))
	if err != nil {
		return t, err
	}
	if err := setContainerImage(objs, OperatorDeployment, ManagerContainer, built[ImageOperator].Ref); err != nil {
		return t, err
	}
	cl, err := c.Client()
	if err != nil {
		return t, err
	}
	phase = time.Now()
	if err := Apply(ctx, cl, objs); err != nil {
		return t, err
	}
	key := client.ObjectKey{Namespace: OperatorNamespace, Name: OperatorDeployment}
	if err := WaitDeploymentReady(ctx, cl, key, 3*time.Minute); err != nil {
		return t, err
	}
	if err := waitWebhookServing(ctx, cl, time.Minute); err != nil {
		return t, err
	}
	t.Ready = time.Since(phase)
	logf("operator Ready and its webhook serving %s after apply", t.Ready.Round(time.Millisecond))
	return t, nil
}

// waitWebhookServing waits until the API server reaches the operator's
// admission webhook (failure policy Fail): a Ready pod is in the webhook
// Service's endpoints only once kube-proxy has programmed them, and until
// then every OpenBaoCluster write is refused. A dry-run create asks.
func waitWebhookServing(ctx context.Context, cl client.Client, timeout time.Duration) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "openbao.org/v1alpha1", "kind": "OpenBaoCluster",
		"metadata": map[string]any{"name": "webhook-probe", "namespace": OperatorNamespace},
		"spec":     map[string]any{"version": "2.4.0"},
	}}
	deadline := time.Now().Add(timeout)
	for {
		err := cl.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the operator's admission webhook does not answer after %s: %w", timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// RenderKustomize runs ./bin/kustomize build on a directory.
func RenderKustomize(c Config, dir string) ([]*unstructured.Unstructured, error) {
	out, err := exec.Command(c.bin("kustomize"), "build", dir).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return nil, fmt.Errorf("kustomize build %s: %w\n%s", dir, err, ee.Stderr)
		}
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return DecodeManifests(out)
}

// setContainerImage points one container of one Deployment at an image.
func setContainerImage(objs []*unstructured.Unstructured, deployment, container, image string) error {
	for _, u := range objs {
		if u.GetKind() != "Deployment" || u.GetName() != deployment {
			continue
		}
		containers, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		if err != nil {
			return fmt.Errorf("read containers of %s: %w", deployment, err)
		}
		for i, raw := range containers {
			ctr, ok := raw.(map[string]any)
			if ok && ctr["name"] == container {
				ctr["image"] = image
				containers[i] = ctr
				return unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
			}
		}
		return fmt.Errorf("deployment %s has no container %s", deployment, container)
	}
	return fmt.Errorf("no deployment %s in the rendered manifests", deployment)
}
