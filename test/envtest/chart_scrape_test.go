package envtest_test

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/test/testbin"
)

// chartScrapeNamespace is the install chart's release namespace here.
const chartScrapeNamespace = "chart-scrape"

// TestTheChartsServiceMonitorScrapesTheSecureMetrics installs what the
// install chart renders for serviceMonitor.enabled=true and scrapes the
// manager's metrics endpoint (served as the operator serves it: HTTPS,
// TokenReview and SubjectAccessReview against this API server) the way the
// Prometheus Operator configures Prometheus from that ServiceMonitor: the
// endpoint's scheme, and its authorization's type with the credentials
// read from the Secret and key it names. Kubernetes' own token controller
// (kube-controller-manager) fills the Secret in. The same token is refused
// (403) until the chart's ClusterRoleBinding is applied, so the scrape
// works through that binding and nothing else.
func TestTheChartsServiceMonitorScrapesTheSecureMetrics(t *testing.T) {
	ctx := context.Background()
	objs := renderInstallChart(t, map[string]any{"serviceMonitor": map[string]any{"enabled": true}})
	endpoint := serviceMonitorEndpoint(t, objs)
	createNamespace(t, chartScrapeNamespace)
	stop := startKubeControllers(t, cfg, "--controllers=serviceaccount-token-controller",
		"--service-account-private-key-file="+filepath.Join(apiServerCertDir, "sa-signer.key"))
	defer stop()

	// Follow the names from the endpoint, as the objects name each other:
	// the Secret, its ServiceAccount, the binding of that account, its role.
	secret := find(t, objs, "Secret", func(o *unstructured.Unstructured) bool { return o.GetName() == endpoint.Credentials.Name })
	account := find(t, objs, "ServiceAccount", func(o *unstructured.Unstructured) bool {
		return o.GetName() == secret.GetAnnotations()[corev1.ServiceAccountNameKey]
	})
	binding := find(t, objs, "ClusterRoleBinding", func(o *unstructured.Unstructured) bool {
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			s, _ := s.(map[string]any)
			if s["kind"] == "ServiceAccount" && s["name"] == account.GetName() && s["namespace"] == chartScrapeNamespace {
				return true
			}
		}
		return false
	})
	roleName, _, _ := unstructured.NestedString(binding.Object, "roleRef", "name")
	role := find(t, objs, "ClusterRole", func(o *unstructured.Unstructured) bool { return o.GetName() == roleName })
	for _, obj := range []*unstructured.Unstructured{account, secret, role} {
		// config/rbac's metrics reader, which another test may have made, is
		// the chart's (helm-charts checks the two installs are one).
		if err := k8s.Create(ctx, obj); err != nil && !(obj == role && apierrors.IsAlreadyExists(err)) {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	token := ""
	waitUntil(t, 60*time.Second, "the token controller fills in Secret "+endpoint.Credentials.Name, func() bool {
		var s corev1.Secret
		err := k8s.Get(ctx, client.ObjectKey{Namespace: chartScrapeNamespace, Name: endpoint.Credentials.Name}, &s)
		token = string(s.Data[endpoint.Credentials.Key])
		return err == nil && token != ""
	})
	if got := scrapeAs(t, endpoint, token); got != http.StatusForbidden {
		t.Fatalf("before the ClusterRoleBinding the scraper's token gets %d, want 403", got)
	}
	if err := k8s.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, binding) }()
	// RBAC is read from the API server's informer: the grant is seen soon
	// after the create, not at it.
	waitUntil(t, 30*time.Second, "the scrape through the chart's ServiceMonitor answers 200", func() bool {
		return scrapeAs(t, endpoint, token) == http.StatusOK
	})
}

// scrapeEndpoint is what Prometheus takes from a ServiceMonitor endpoint.
type scrapeEndpoint struct {
	Scheme        string
	Type          string
	Credentials   struct{ Name, Key string }
	SkipTLSVerify bool
}

func serviceMonitorEndpoint(t *testing.T, objs []*unstructured.Unstructured) scrapeEndpoint {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() != "ServiceMonitor" {
			continue
		}
		endpoints, _, _ := unstructured.NestedSlice(obj.Object, "spec", "endpoints")
		if len(endpoints) != 1 {
			t.Fatalf("the ServiceMonitor has endpoints %v", endpoints)
		}
		raw, _ := yaml.Marshal(endpoints[0])
		var e struct {
			Scheme        string
			Authorization struct {
				Type        string
				Credentials struct{ Name, Key string }
			}
			TLSConfig struct{ InsecureSkipVerify bool } `json:"tlsConfig"`
		}
		if err := yaml.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		return scrapeEndpoint{Scheme: e.Scheme, Type: e.Authorization.Type, Credentials: e.Authorization.Credentials,
			SkipTLSVerify: e.TLSConfig.InsecureSkipVerify}
	}
	t.Fatal("the chart renders no ServiceMonitor")
	return scrapeEndpoint{}
}

// scrapeAs GETs the manager's metrics as the endpoint says and returns the
// status code.
func scrapeAs(t *testing.T, e scrapeEndpoint, token string) int {
	t.Helper()
	if e.Scheme != "https" || !e.SkipTLSVerify || e.Type != "Bearer" {
		t.Fatalf("the endpoint scrapes %s (skip verify %t) with %q credentials: the manager's self-signed HTTPS needs https, insecureSkipVerify and a Bearer token",
			e.Scheme, e.SkipTLSVerify, e.Type)
	}
	resp, err := get(token) // https with verification skipped, Authorization: Bearer token
	if err != nil {
		t.Fatalf("scrape %s: %v", metricsURL, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// renderInstallChart renders helm-charts/openbao-operator as `helm
// install` would into chartScrapeNamespace, one object per document.
func renderInstallChart(t *testing.T, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c, err := loader.LoadDir(filepath.Join(root, "helm-charts", "openbao-operator"))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(c, values,
		chartutil.ReleaseOptions{Name: "openbao-operator", Namespace: chartScrapeNamespace, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Engine{Strict: true}.Render(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for name, content := range files {
		if filepath.Ext(name) != ".yaml" {
			continue
		}
		for _, doc := range bytes.Split([]byte(content), []byte("\n---")) {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(obj.Object) > 0 {
				objs = append(objs, obj)
			}
		}
	}
	return objs
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind string, match func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() == kind && match(obj) {
			return obj
		}
	}
	t.Fatalf("the chart renders no such %s", kind)
	return nil
}
