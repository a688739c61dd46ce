package localnode

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/internal/images"
)

// Names of the operator's installation (the install chart, as config/default).
const (
	OperatorNamespace  = "openbao-operator-system"
	OperatorDeployment = "openbao-operator-controller-manager"
	ManagerContainer   = "manager"
	// managerSteady is how long the manager must run without a restart
	// before the install counts as done.
	managerSteady = 5 * time.Second
)

// OperatorTimings are the phases of InstallOperator.
type OperatorTimings struct {
	Build, Import time.Duration
	Helm          time.Duration // helm install or upgrade (CRDs established, objects created)
	Ready         time.Duration // from the start of helm to the manager Ready and its webhook answering
}

// InstallOperator builds the operator image (and the bao-wrapper and
// OpenBao images the operator's clusters run), imports them, installs the
// install chart (helm-charts/openbao-operator) as a helm release with the
// manager and the wrapper on the fresh images, then waits for the manager Deployment to be available and its
// webhook to answer.
func InstallOperator(ctx context.Context, c Config, logf Logf) (OperatorTimings, error) {
	var t OperatorTimings
	if _, up, err := Status(c); err != nil {
		return t, err
	} else if !up {
		return t, fmt.Errorf("no local node is up in %s (run `localnode up` or `make demo`)", c.StateDir)
	}
	phase := time.Now()
	built, err := BuildImages(c, ImageOperator, ImageWrapper, ImageOpenBao)
	if err != nil {
		return t, err
	}
	t.Build = time.Since(phase)
	phase = time.Now()
	if err := ImportImages(c, built, logf); err != nil {
		return t, err
	}
	t.Import = time.Since(phase)
	logf("images %s, %s and %s built in %s, imported in %s", built[ImageOperator].Ref, built[ImageWrapper].Ref, built[ImageOpenBao].Ref,
		t.Build.Round(time.Millisecond), t.Import.Round(time.Millisecond))
	cl, err := c.Client()
	if err != nil {
		return t, err
	}
	phase = time.Now()
	if err := installChart(ctx, c, cl, built[ImageOperator].Ref, built[ImageWrapper].Ref, logf); err != nil {
		return t, err
	}
	t.Helm = time.Since(phase)
	if err := WaitOperatorReady(ctx, cl); err != nil {
		return t, err
	}
	t.Ready = time.Since(phase)
	logf("operator installed by helm in %s, Ready and its webhook serving %s after helm started",
		t.Helm.Round(time.Millisecond), t.Ready.Round(time.Millisecond))
	return t, nil
}

// WaitOperatorReady waits until the manager Deployment is available, its
// webhook answers and its pods stay up: a manager that exits soon after
// start passes the first two waits in the moment it is up, the third asks
// that it stays up. Any wait's failure names the pods' states.
func WaitOperatorReady(ctx context.Context, cl client.Client) error {
	key := client.ObjectKey{Namespace: OperatorNamespace, Name: OperatorDeployment}
	err := WaitDeploymentReady(ctx, cl, key, 3*time.Minute)
	if err == nil {
		err = WaitWebhookServing(ctx, cl, OperatorNamespace, time.Minute)
	}
	if err == nil {
		err = waitPodsSteady(ctx, cl, OperatorNamespace, ManagerSelector, managerSteady, time.Minute)
	}
	if err != nil {
		return fmt.Errorf("%w; manager pods: %s", err, podProblems(ctx, cl, OperatorNamespace, ManagerSelector))
	}
	return nil
}

// WaitWebhookServing waits until the API server reaches the operator's
// admission webhook (failure policy Fail) for OpenBaoClusters in
// namespace: a Ready pod is in the webhook Service's endpoints only once
// kube-proxy has programmed them, and until then every OpenBaoCluster write
// is refused. A dry-run create asks; the webhook's own denial (an install
// whose image policy does not allow the probe's image) is an answer too.
func WaitWebhookServing(ctx context.Context, cl client.Client, namespace string, timeout time.Duration) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "openbao.org/v1alpha1", "kind": "OpenBaoCluster",
		"metadata": map[string]any{"name": "webhook-probe", "namespace": namespace},
		"spec":     map[string]any{"version": "2.4.0", "image": images.OpenBaoRepository},
	}}
	deadline := time.Now().Add(timeout)
	for {
		err := cl.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err == nil || webhookDenied(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the operator's admission webhook does not answer after %s: %w", timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// webhookDenied says whether err is a validating webhook's denial, as the
// API server words it, rather than a failure to reach the webhook
// ("failed calling webhook").
func webhookDenied(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "admission webhook \"") && strings.Contains(msg, "\" denied the request")
}
