package localnode

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The install chart and the release the harness installs it as, as the
// `helm install` of docs/install.md does.
const (
	OperatorChartDir = "helm-charts/openbao-operator"
	OperatorRelease  = "openbao-operator"
	// operatorNamespaceFile is the restricted-Pod-Security namespace; the
	// chart does not create its own namespace (helm's --create-namespace
	// would leave it without those labels).
	operatorNamespaceFile = "config/manager/namespace.yaml"
	// clusterCRD tells a node that already has the CRDs: helm installs
	// crds/ only when they are missing and never upgrades them.
	clusterCRD = "openbaoclusters.openbao.org"
)

// ImageValues are the chart values that run the manager from image and
// OpenBao pods' bao-wrapper from wrapperImage, both repository:tag
// references.
func ImageValues(image, wrapperImage string) (map[string]any, error) {
	repo, tag, err := splitTag(image)
	if err != nil {
		return nil, err
	}
	wrapperRepo, wrapperTag, err := splitTag(wrapperImage)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"image":   map[string]any{"repository": repo, "tag": tag},
		"wrapper": map[string]any{"image": map[string]any{"repository": wrapperRepo, "tag": wrapperTag}},
	}, nil
}

func splitTag(image string) (repository, tag string, err error) {
	slash := strings.LastIndex(image, "/")
	colon := strings.LastIndex(image, ":")
	if colon <= slash || colon == len(image)-1 {
		return "", "", fmt.Errorf("image %q has no tag", image)
	}
	return image[:colon], image[colon+1:], nil
}

// installChart makes the operator release on the node run image (and its
// OpenBao pods wrapperImage): a helm
// install the first time, an upgrade on a node that has the release
// already (a rerun, or `make demo` left it up). It adopts objects an
// earlier kustomize install left (TakeOwnership), replaces a release that a
// killed run left pending, and server-side applies crds/ itself when the
// CRDs exist, since helm would leave them as they are.
func installChart(ctx context.Context, c Config, cl client.Client, image, wrapperImage string, logf Logf) error {
	dir := filepath.Join(c.RepoRoot, OperatorChartDir)
	chrt, err := loader.LoadDir(dir)
	if err != nil {
		return fmt.Errorf("load chart %s: %w", dir, err)
	}
	vals, err := ImageValues(image, wrapperImage)
	if err != nil {
		return err
	}
	// The platform's image policy: the node runs only the images built
	// here and imported into containerd, all named localhost/<name>.
	maps.Copy(vals, NodeValues(LocalRegistry))
	// Monitoring as a Prometheus Operator user turns it on: the e2e tier's
	// Prometheus reads these objects (monitoring.go).
	if err := ensureMonitoringCRDs(ctx, cl); err != nil {
		return err
	}
	vals["serviceMonitor"] = monitoringValues()
	return InstallChart(ctx, c, cl, chrt, OperatorChartDir, vals, logf)
}

// NodeValues are the chart values every install on the node needs: the
// least-privilege install, every test namespace handed to the operator by
// an OpenBaoTenant (Provision), and the platform's image policy allowing
// registry alone.
func NodeValues(registry string) map[string]any {
	return map[string]any{
		"tenancy":     map[string]any{"enabled": true},
		"imagePolicy": map[string]any{"allowedRepositories": []any{registry}},
	}
}

// InstallChart makes the operator release on the node the install chart
// chrt (read from source, for the log) with vals: the operator namespace
// applied, the CRDs refreshed, then a helm install or upgrade
// (installOrUpgrade).
func InstallChart(ctx context.Context, c Config, cl client.Client, chrt *chart.Chart, source string, vals map[string]any, logf Logf) error {
	ns, err := os.ReadFile(filepath.Join(c.RepoRoot, operatorNamespaceFile))
	if err != nil {
		return fmt.Errorf("read the operator namespace: %w", err)
	}
	objs, err := DecodeManifests(ns)
	if err != nil {
		return err
	}
	if err := Apply(ctx, cl, objs); err != nil {
		return err
	}
	if err := refreshCRDs(ctx, cl, chrt); err != nil {
		return err
	}
	cfg, err := helmConfig(c)
	if err != nil {
		return err
	}
	return installOrUpgrade(ctx, cfg, chrt, source, vals, logf)
}

// helmConfig is helm's action configuration for the operator's namespace on
// the node, with release Secrets as `helm` keeps them and its discovery
// cache in the state directory, not in $HOME.
func helmConfig(c Config) (*action.Configuration, error) {
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig, ns, cache := c.Kubeconfig(), OperatorNamespace, c.path("helm-cache")
	flags.KubeConfig, flags.Namespace, flags.CacheDir = &kubeconfig, &ns, &cache
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, OperatorNamespace, "secret", func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("configure helm for %s: %w", c.Kubeconfig(), err)
	}
	return cfg, nil
}

func installOrUpgrade(ctx context.Context, cfg *action.Configuration, chrt *chart.Chart, source string, vals map[string]any, logf Logf) error {
	last, err := cfg.Releases.Last(OperatorRelease)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
	case err != nil:
		return fmt.Errorf("read release %s: %w", OperatorRelease, err)
	case last.Info.Status.IsPending():
		// An install or upgrade cut short: helm refuses to upgrade it.
		logf("release %s was left %s; uninstalling it first", OperatorRelease, last.Info.Status)
		if _, err := action.NewUninstall(cfg).Run(OperatorRelease); err != nil {
			return fmt.Errorf("uninstall pending release %s: %w", OperatorRelease, err)
		}
	default:
		up := action.NewUpgrade(cfg)
		up.Namespace, up.MaxHistory, up.TakeOwnership = OperatorNamespace, 3, true
		if _, err := up.RunWithContext(ctx, OperatorRelease, chrt, vals); err != nil {
			return fmt.Errorf("helm upgrade %s: %w", OperatorRelease, err)
		}
		logf("helm upgrade %s (revision %d) from %s", OperatorRelease, last.Version+1, source)
		return nil
	}
	in := action.NewInstall(cfg)
	in.Namespace, in.ReleaseName, in.TakeOwnership = OperatorNamespace, OperatorRelease, true
	if _, err := in.RunWithContext(ctx, chrt, vals); err != nil {
		return fmt.Errorf("helm install %s: %w", OperatorRelease, err)
	}
	logf("helm install %s from %s", OperatorRelease, source)
	return nil
}

// refreshCRDs server-side applies the chart's crds/ when the CRDs exist
// already (the way helm's documentation upgrades CRDs); on a fresh node it
// leaves them to helm install.
func refreshCRDs(ctx context.Context, cl client.Client, chrt *chart.Chart) error {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := cl.Get(ctx, client.ObjectKey{Name: clusterCRD}, crd); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("get CRD %s: %w", clusterCRD, err)
	}
	for _, f := range chrt.CRDObjects() {
		objs, err := DecodeManifests(f.File.Data)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Filename, err)
		}
		if err := Apply(ctx, cl, objs); err != nil {
			return err
		}
	}
	return nil
}
