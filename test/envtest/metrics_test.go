package envtest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/openbao/operator/api/v1alpha1"
)

// scrape reads the manager's metrics endpoint and returns the samples of
// family whose namespace and name labels are the cluster's, keyed by their
// remaining labels ("" when there are none).
func scrape(t *testing.T, family, namespace, name string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatalf("scrape %s: %v", metricsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", metricsURL, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the scrape: %v", err)
	}
	out := map[string]float64{}
	for _, m := range families[family].GetMetric() {
		rest, ok := otherLabels(m, namespace, name)
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			out[rest] = m.Counter.GetValue()
		case m.Gauge != nil:
			out[rest] = m.Gauge.GetValue()
		}
	}
	return out
}

// otherLabels renders the labels besides namespace and name, and says
// whether those two are the cluster's.
func otherLabels(m *dto.Metric, namespace, name string) (string, bool) {
	var ns, n, rest string
	for _, l := range m.GetLabel() {
		switch l.GetName() {
		case "namespace":
			ns = l.GetValue()
		case "name":
			n = l.GetValue()
		default:
			rest += fmt.Sprintf("%s=%s,", l.GetName(), l.GetValue())
		}
	}
	return rest, ns == namespace && n == name
}

// TestClusterMetricsAreServedWhileTheClusterLivesAndOnlyThen lets the
// suite's manager reconcile a cluster, scrapes the endpoint for each
// series with its labels, then deletes the cluster and checks that none
// of its series is left.
func TestClusterMetricsAreServedWhileTheClusterLivesAndOnlyThen(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, "metadata: {name: metrics}\nspec: {version: 2.4.0, replicas: 3, deletionPolicy: DeleteAll}\n")
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a phase in the status", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err
		}
		if c.Status.Phase == "" {
			return errors.New("no phase yet")
		}
		return nil
	})
	for family, want := range map[string]map[string]float64{
		"openbao_cluster_ready_replicas":   {"": 0},
		"openbao_cluster_desired_replicas": {"": 3},
		"openbao_cluster_sealed_replicas":  {"": 0},
		"openbao_cluster_phase": {
			"phase=Pending,": 0, "phase=Initializing,": 0, "phase=Running,": 0,
			"phase=Upgrading,": 0, "phase=Degraded,": 0, "phase=Paused,": 0,
			"phase=" + string(c.Status.Phase) + ",": 1,
		},
	} {
		if got := scrape(t, family, managedNamespace, "metrics"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: got %v, want %v", family, got, want)
		}
	}
	if err := k8s.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the cluster gone", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), c); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	eventually(t, 10*time.Second, "no series of the deleted cluster", func() error {
		for _, family := range []string{"openbao_cluster_ready_replicas", "openbao_cluster_desired_replicas",
			"openbao_cluster_sealed_replicas", "openbao_cluster_phase"} {
			if got := scrape(t, family, managedNamespace, "metrics"); len(got) != 0 {
				return fmt.Errorf("%s still served: %v", family, got)
			}
		}
		return nil
	})
}

// TestReconcileErrorsAreCountedPerClusterAndForgotten fails the status
// write of a cluster's passes and scrapes the error counter, then deletes
// the cluster and checks that the counter's series went with it.
func TestReconcileErrorsAreCountedPerClusterAndForgotten(t *testing.T) {
	ctx := context.Background()
	ns := "metrics-errors"
	createNamespace(t, ns)
	c := newCluster(t, ns, "metadata: {name: bao}\nspec: {version: 2.4.0, deletionPolicy: DeleteAll}\n")
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	failing := interceptor.NewClient(direct, interceptor.Funcs{
		SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
			return errors.New("the status write is refused by the test")
		},
	})
	r, err := newReconciler(failing, k8s, &events.FakeRecorder{})
	if err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	for range 2 {
		if _, err := r.Reconcile(ctx, req); err == nil {
			t.Fatal("a pass whose status write failed returned no error")
		}
	}
	if got := scrape(t, "openbao_reconcile_errors_total", ns, "bao"); got[""] != 2 || len(got) != 1 {
		t.Fatalf("openbao_reconcile_errors_total: got %v, want 2 for the cluster", got)
	}
	clean, err := newReconciler(k8s, k8s, &events.FakeRecorder{})
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := clean.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if err := k8s.Get(ctx, req.NamespacedName, &v1alpha1.OpenBaoCluster{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the cluster is still there: %v", err)
	}
	if got := scrape(t, "openbao_reconcile_errors_total", ns, "bao"); len(got) != 0 {
		t.Fatalf("the deleted cluster's error counter is still served: %v", got)
	}
}
