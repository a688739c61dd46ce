package localnode

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

//go:embed monitoring-crds.yaml
var monitoringCRDs []byte

// MonitoringScrapeInterval is the install's ServiceMonitor interval on the
// node: short, so that the e2e tier's Prometheus sees a fault within
// seconds (the chart's default is 30s).
const MonitoringScrapeInterval = "5s"

// monitoringValues turn on the install chart's ServiceMonitor and
// PrometheusRule (OpenBaoOperatorDown), as a kube-prometheus-stack user
// would; everything else of the chart's monitoring stays at its defaults.
func monitoringValues() map[string]any {
	return map[string]any{"enabled": true, "interval": MonitoringScrapeInterval}
}

// ensureMonitoringCRDs creates the stand-in ServiceMonitor and
// PrometheusRule CRDs where none exist (monitoring-crds.yaml) and waits
// until they are established, so that helm and the operator can write
// those kinds. An existing CRD, the Prometheus Operator's own, is kept.
func ensureMonitoringCRDs(ctx context.Context, cl client.Client) error {
	objs, err := DecodeManifests(monitoringCRDs)
	if err != nil {
		return err
	}
	for _, crd := range objs {
		if err := cl.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.GetName(), err)
		}
		name := crd.GetName()
		err := Poll(ctx, 30*time.Second, "CRD "+name+" established", func(ctx context.Context) (bool, string, error) {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(crd.GroupVersionKind())
			if err := cl.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
				return false, err.Error(), nil
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if c, _ := c.(map[string]any); c["type"] == "Established" && c["status"] == "True" {
					return true, "", nil
				}
			}
			return false, "not established", nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
