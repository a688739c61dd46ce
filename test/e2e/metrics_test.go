package e2e_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// metricsReaderRole is the ClusterRole config/rbac gives scrapers.
const metricsReaderRole = "openbao-operator-metrics-reader"

// TestOperatorMetricsAreServedOnlyToAllowedScrapers scrapes the installed
// manager over HTTPS: without a token it answers 401, with the token of a
// ServiceAccount that may not GET /metrics 403, and with one bound to the
// metrics-reader ClusterRole the operator's series.
func TestOperatorMetricsAreServedOnlyToAllowedScrapers(t *testing.T) {
	cl := installOperator(t)
	t.Parallel()
	ctx := context.Background()
	for name, tc := range map[string]struct {
		token string
		want  int
	}{
		"no token":               {"", http.StatusUnauthorized},
		"a token without rights": {scraperToken(ctx, t, cl, "stranger", false), http.StatusForbidden},
		"a metrics reader":       {scraperToken(ctx, t, cl, "prometheus", true), http.StatusOK},
	} {
		code, body := scrapeManager(ctx, t, cl, tc.token)
		if code != tc.want {
			t.Errorf("%s: %d, want %d", name, code, tc.want)
		}
		if served := strings.Contains(body, "controller_runtime_reconcile_total"); served != (code == http.StatusOK) {
			t.Errorf("%s: answered %d, series served %t", name, code, served)
		}
	}
}

// scraperToken is a token of a fresh ServiceAccount, bound to the
// metrics-reader ClusterRole when allowed.
func scraperToken(ctx context.Context, t *testing.T, cl client.Client, name string, allowed bool) string {
	t.Helper()
	ns := createNamespace(ctx, t, cl, "e2e-scraper")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := cl.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if allowed {
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-scrape-" + ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}
		if err := cl.Create(ctx, binding); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.Delete(context.Background(), binding) })
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	if err := cl.SubResource("token").Create(ctx, sa, req); err != nil {
		t.Fatalf("request a token of %s: %v", name, err)
	}
	return req.Status.Token
}

// scrapeManager GETs the manager's /metrics from its pod with a bearer
// token ("" for none). The certificate is the manager's self-signed one:
// the tier checks who may scrape, not the certificate.
func scrapeManager(ctx context.Context, t testing.TB, cl client.Client, token string) (int, string) {
	t.Helper()
	var code int
	var body string
	// A parallel test may kill the manager between finding it and asking
	// it: ask its successor.
	waitFor(ctx, t, 2*time.Minute, "an answer from the manager's metrics endpoint", func() (bool, string) {
		pod := managerPod(ctx, t, cl)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(pod.Status.PodIP, "8443")+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		insecure := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // self-signed
		resp, err := (&http.Client{Transport: insecure, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return false, "scrape " + pod.Name + ": " + err.Error()
		}
		defer resp.Body.Close()
		text, err := io.ReadAll(resp.Body)
		if err != nil {
			return false, "read the answer of " + pod.Name + ": " + err.Error()
		}
		code, body = resp.StatusCode, string(text)
		return true, ""
	})
	return code, body
}
