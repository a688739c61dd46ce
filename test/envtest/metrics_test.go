package envtest_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/test/testbin"
)

// scraperNamespace holds the ServiceAccounts the tests scrape as.
const scraperNamespace = "metrics-scrapers"

var (
	scraperOnce  sync.Once
	scraperToken string
	scraperErr   error
)

// scraperBearer is a token of a ServiceAccount bound to the ClusterRole
// config/rbac gives scrapers, as Prometheus would hold it.
func scraperBearer(t *testing.T) string {
	t.Helper()
	scraperOnce.Do(func() { scraperToken, scraperErr = newScraper(t, "prometheus", true) })
	if scraperErr != nil {
		t.Fatal(scraperErr)
	}
	return scraperToken
}

// newScraper creates a ServiceAccount, bound to the metrics-reader
// ClusterRole of config/rbac when allowed, and returns a token of it.
func newScraper(t *testing.T, name string, allowed bool) (string, error) {
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scraperNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: scraperNamespace, Name: name}}
	if err := k8s.Create(ctx, sa); err != nil {
		return "", err
	}
	if allowed {
		role := &rbacv1.ClusterRole{}
		root, _ := testbin.RepoRoot()
		raw, err := os.ReadFile(filepath.Join(root, "config", "rbac", "metrics_reader_role.yaml"))
		if err != nil {
			return "", err
		}
		if err := yaml.Unmarshal(raw, role); err != nil {
			return "", err
		}
		if err := k8s.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scrape-" + name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: scraperNamespace, Name: name}}}
		if err := k8s.Create(ctx, binding); err != nil {
			return "", err
		}
	}
	req := &authenticationv1.TokenRequest{}
	if err := k8s.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", fmt.Errorf("request a token of %s: %w", name, err)
	}
	return req.Status.Token, nil
}

// get reads the metrics endpoint with a bearer token ("" for none). The
// endpoint's certificate is self-signed: the test checks who may scrape,
// not the certificate.
func get(token string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, metricsURL, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	insecure := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // self-signed test endpoint
	return (&http.Client{Transport: insecure, Timeout: 10 * time.Second}).Do(req)
}

// scrape reads the manager's metrics endpoint as an allowed scraper and
// returns the samples of family whose namespace and name labels are the
// cluster's, keyed by their remaining labels ("" when there are none).
func scrape(t *testing.T, family, namespace, name string) map[string]float64 {
	t.Helper()
	resp, err := get(scraperBearer(t))
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

// TestMetricsEndpointServesOnlyAllowedScrapers: no token is refused as
// unauthenticated, a token without the metrics-reader role as forbidden.
func TestMetricsEndpointServesOnlyAllowedScrapers(t *testing.T) {
	stranger, err := newScraper(t, "stranger", false)
	if err != nil {
		t.Fatal(err)
	}
	for who, tc := range map[string]struct {
		token string
		want  int
	}{
		"no token":               {"", http.StatusUnauthorized},
		"a token without rights": {stranger, http.StatusForbidden},
		"the metrics reader":     {scraperBearer(t), http.StatusOK},
	} {
		resp, err := get(tc.token)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %s, want %d", who, resp.Status, tc.want)
		}
	}
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
			"phase=Upgrading,": 0, "phase=Restoring,": 0, "phase=Degraded,": 0, "phase=Paused,": 0,
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
