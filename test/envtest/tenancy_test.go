package envtest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/nscache"
	"github.com/openbao/operator/internal/tenancy"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/test/testbin"
)

const (
	operatorNamespace = "openbao-operator-system"
	provisionerUser   = "system:serviceaccount:" + operatorNamespace + ":" + tenancy.ProvisionerServiceAccount
	controllerUser    = "system:serviceaccount:" + operatorNamespace + ":" + tenancy.ControllerServiceAccount
)

// serviceAccountGroups are the groups the API server gives a ServiceAccount.
func serviceAccountGroups(namespace string) []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
}

// asServiceAccount is a client that acts as user with exactly the rights
// RBAC gives a ServiceAccount of the operator: no system:masters.
func asServiceAccount(t testing.TB, user string) (*rest.Config, client.Client) {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: serviceAccountGroups(operatorNamespace)}
	cl, err := client.New(c, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, cl
}

// installTenancy creates what config/tenancy installs for the two
// identities: the generated ClusterRoles, their bindings, the controller's
// Role in its own namespace, and the policy on the provisioner's
// RoleBindings. Cluster-wide objects stay for the suite's life: they bind
// only the operator's ServiceAccounts, which no other test acts as.
func installTenancy(t *testing.T) {
	t.Helper()
	ensureNamespace(t, operatorNamespace)
	root, _ := testbin.RepoRoot()
	for _, file := range []string{"roles/tenant_role.yaml", "roles/controller_role.yaml", "roles/provisioner_role.yaml", "role_bindings.yaml", "tenant-bindings-policy.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, "config", "tenancy", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range decodeAll(t, data) {
			if err := k8s.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("create %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
			}
		}
	}
}

// decodeAll decodes the objects of a multi-document file.
func decodeAll(t *testing.T, data []byte) []client.Object {
	t.Helper()
	var out []client.Object
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			return out
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

func ensureNamespace(t testing.TB, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// startProvisioner runs the OpenBaoTenant reconciler in a manager of its
// own, as the provisioner's ServiceAccount: whatever it does, its rights
// allow.
func startProvisioner(t *testing.T) {
	t.Helper()
	pcfg, _ := asServiceAccount(t, provisionerUser)
	mgr, err := ctrl.NewManager(pcfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&rbacv1.RoleBinding{}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &controllers.OpenBaoTenantReconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("provisioner"), OperatorNamespace: operatorNamespace,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, mgr, "provisioner")
}

// runUntilCleanup runs a manager of the test until the test ends.
func runUntilCleanup(t *testing.T, mgr ctrl.Manager, name string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("%s stopped: %v", name, err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// tenantStatus reads a tenant's status of one namespace.
func tenantStatus(ctx context.Context, name, namespace string) (v1alpha1.TenantNamespaceStatus, error) {
	t := &v1alpha1.OpenBaoTenant{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, t); err != nil {
		return v1alpha1.TenantNamespaceStatus{}, err
	}
	for _, s := range t.Status.Namespaces {
		if s.Name == namespace {
			return s, nil
		}
	}
	return v1alpha1.TenantNamespaceStatus{}, fmt.Errorf("namespace %s not in the status (%+v)", namespace, t.Status.Namespaces)
}

func wantTenantStatus(t *testing.T, tenant, namespace, reason string) {
	t.Helper()
	eventually(t, 30*time.Second, tenant+" reports "+namespace+" "+reason, func() error {
		s, err := tenantStatus(context.Background(), tenant, namespace)
		if err != nil {
			return err
		}
		if s.Reason != reason || s.Provisioned != (reason == v1alpha1.ReasonProvisioned) {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
}

func tenantBinding(ctx context.Context, namespace string) (*rbacv1.RoleBinding, error) {
	b := &rbacv1.RoleBinding{}
	err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: tenancy.TenantRoleName}, b)
	return b, err
}

// TestTenancy runs the least-privilege install's two identities as
// themselves, each with the rights config/tenancy gives it and no more.
func TestTenancy(t *testing.T) {
	installTenancy(t)
	startProvisioner(t)
	t.Run("the provisioner binds the tenant role and nothing else", testProvisionerBindsTheTenantRoleAndNothingElse)
	t.Run("the controller follows tenants without a restart", testControllerFollowsTenants)
}

// testProvisionerBindsTheTenantRoleAndNothingElse: a tenant provisions its namespaces (one missing until it is
// created, the operator's own refused), the two identities' rights are
// checked by SubjectAccessReview in provisioned and other namespaces and
// at cluster scope, the provisioner cannot write any other RoleBinding nor
// anyone else the tenant's, and dropping a namespace or the tenant takes
// the rights away.
func testProvisionerBindsTheTenantRoleAndNothingElse(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"tenancy-a", "tenancy-b", "tenancy-out"} {
		ensureNamespace(t, ns)
	}
	tenant := &v1alpha1.OpenBaoTenant{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec:       v1alpha1.OpenBaoTenantSpec{Namespaces: []string{"tenancy-a", "tenancy-b", "tenancy-later", operatorNamespace}},
	}
	if err := k8s.Create(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	wantTenantStatus(t, "team-a", "tenancy-a", v1alpha1.ReasonProvisioned)
	wantTenantStatus(t, "team-a", "tenancy-b", v1alpha1.ReasonProvisioned)
	wantTenantStatus(t, "team-a", "tenancy-later", v1alpha1.ReasonNamespaceNotFound)
	wantTenantStatus(t, "team-a", operatorNamespace, v1alpha1.ReasonNamespaceRefused)
	ensureNamespace(t, "tenancy-later")
	eventually(t, controllers.TenantRetry+20*time.Second, "a namespace created after its tenant provisioned", func() error {
		_, err := tenantBinding(ctx, "tenancy-later")
		return err
	})

	checkAccessTable(t)
	checkProvisionerCannotWidenBindings(t)

	// A namespace dropped from the spec: Deprovisioning first, then the
	// binding goes, and the controller's rights with it.
	if err := k8s.Get(ctx, client.ObjectKey{Name: "team-a"}, tenant); err != nil {
		t.Fatal(err)
	}
	tenant.Spec.Namespaces = []string{"tenancy-a", "tenancy-later"}
	if err := k8s.Update(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	wantTenantStatus(t, "team-a", "tenancy-b", v1alpha1.ReasonDeprovisioning)
	eventually(t, 30*time.Second, "the dropped namespace's binding removed", func() error {
		if _, err := tenantBinding(ctx, "tenancy-b"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("binding still there (%v)", err)
		}
		if _, err := tenantStatus(ctx, "team-a", "tenancy-b"); err == nil {
			return fmt.Errorf("still in the status")
		}
		return nil
	})
	if accessAllowed(t, controllerUser, "tenancy-b", "get", "", "secrets", "") {
		t.Error("the controller may still read Secrets in a namespace dropped from its tenant")
	}

	// The tenant deleted: every binding it made goes, then the tenant.
	if err := k8s.Delete(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the deleted tenant's bindings removed and the tenant gone", func() error {
		for _, ns := range []string{"tenancy-a", "tenancy-later"} {
			if _, err := tenantBinding(ctx, ns); !apierrors.IsNotFound(err) {
				return fmt.Errorf("binding in %s still there (%v)", ns, err)
			}
		}
		if err := k8s.Get(ctx, client.ObjectKey{Name: "team-a"}, &v1alpha1.OpenBaoTenant{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("tenant still there (%v)", err)
		}
		return nil
	})
}

// accessRow is one SubjectAccessReview and the answer it must get.
type accessRow struct {
	who, verb, group, resource, name string
	allowed                          map[string]bool // by namespace; "" is cluster scope
}

// checkAccessTable asks the API server, for each identity, verbs ×
// resources × (provisioned namespace, namespace of no tenant, cluster
// scope), prints the answers as a table and fails on any unexpected one.
func checkAccessTable(t *testing.T) {
	t.Helper()
	namespaces := []string{"tenancy-a", "tenancy-out", ""}
	yes := func(ns ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range ns {
			m[n] = true
		}
		return m
	}
	rows := []accessRow{
		{who: "controller", verb: "get", resource: "secrets", allowed: yes("tenancy-a")},
		{who: "controller", verb: "list", resource: "secrets", allowed: yes("tenancy-a")},
		{who: "controller", verb: "create", resource: "secrets", allowed: yes("tenancy-a")},
		{who: "controller", verb: "delete", resource: "pods", allowed: yes("tenancy-a")},
		{who: "controller", verb: "create", group: "apps", resource: "statefulsets", allowed: yes("tenancy-a")},
		{who: "controller", verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings", allowed: yes("tenancy-a")},
		{who: "controller", verb: "create", group: "batch", resource: "jobs", allowed: yes("tenancy-a")},
		{who: "controller", verb: "delete", resource: "persistentvolumeclaims", allowed: yes("tenancy-a")},
		{who: "controller", verb: "create", resource: "serviceaccounts/token", allowed: yes("tenancy-a")},
		{who: "controller", verb: "watch", group: "openbao.org", resource: "openbaoclusters", allowed: yes(namespaces...)},
		{who: "controller", verb: "update", group: "openbao.org", resource: "openbaoclusters/status", allowed: yes(namespaces...)},
		{who: "controller", verb: "watch", group: "openbao.org", resource: "openbaotenants", allowed: yes(namespaces...)},
		{who: "controller", verb: "update", group: "openbao.org", resource: "openbaotenants", allowed: yes()},
		{who: "controller", verb: "list", resource: "namespaces", allowed: yes()},
		{who: "controller", verb: "bind", group: "rbac.authorization.k8s.io", resource: "clusterroles", name: "cluster-admin", allowed: yes()},
		{who: "provisioner", verb: "get", resource: "secrets", allowed: yes()},
		{who: "provisioner", verb: "list", resource: "pods", allowed: yes()},
		{who: "provisioner", verb: "create", group: "apps", resource: "statefulsets", allowed: yes()},
		{who: "provisioner", verb: "list", resource: "namespaces", allowed: yes()},
		{who: "provisioner", verb: "get", resource: "namespaces", allowed: yes()},
		{who: "provisioner", verb: "list", group: "rbac.authorization.k8s.io", resource: "rolebindings", allowed: yes()},
		{who: "provisioner", verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings", allowed: yes(namespaces...)},
		{who: "provisioner", verb: "delete", group: "rbac.authorization.k8s.io", resource: "rolebindings", name: tenancy.TenantRoleName, allowed: yes(namespaces...)},
		{who: "provisioner", verb: "delete", group: "rbac.authorization.k8s.io", resource: "rolebindings", name: "someone-elses", allowed: yes()},
		{who: "provisioner", verb: "create", group: "rbac.authorization.k8s.io", resource: "roles", allowed: yes()},
		{who: "provisioner", verb: "bind", group: "rbac.authorization.k8s.io", resource: "clusterroles", name: tenancy.TenantRoleName, allowed: yes(namespaces...)},
		{who: "provisioner", verb: "bind", group: "rbac.authorization.k8s.io", resource: "clusterroles", name: "cluster-admin", allowed: yes()},
		{who: "provisioner", verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles", allowed: yes()},
		{who: "provisioner", verb: "update", group: "openbao.org", resource: "openbaotenants/status", allowed: yes(namespaces...)},
		{who: "provisioner", verb: "watch", group: "openbao.org", resource: "openbaoclusters", allowed: yes(namespaces...)},
		{who: "provisioner", verb: "update", group: "openbao.org", resource: "openbaoclusters", allowed: yes()},
	}
	users := map[string]string{"controller": controllerUser, "provisioner": provisionerUser}
	var table strings.Builder
	fmt.Fprintf(&table, "%-12s %-8s %-62s %-11s %-11s %-11s\n", "identity", "verb", "resource", "tenancy-a", "tenancy-out", "cluster")
	for _, row := range rows {
		resource := strings.TrimPrefix(row.group+"/"+row.resource, "/")
		if row.name != "" {
			resource += " " + row.name
		}
		fmt.Fprintf(&table, "%-12s %-8s %-62s", row.who, row.verb, resource)
		for _, ns := range namespaces {
			got := accessAllowed(t, users[row.who], ns, row.verb, row.group, row.resource, row.name)
			mark := map[bool]string{true: "allowed", false: "denied"}[got]
			if got != row.allowed[ns] {
				mark += " (!)"
				t.Errorf("%s %s %s in %q: allowed=%v, want %v", row.who, row.verb, resource, ns, got, row.allowed[ns])
			}
			fmt.Fprintf(&table, " %-11s", mark)
		}
		table.WriteString("\n")
	}
	t.Logf("SubjectAccessReview of the two identities:\n%s", table.String())
}

// accessAllowed asks the API server whether user may verb the resource.
func accessAllowed(t testing.TB, user, namespace, verb, group, resource, name string) bool {
	t.Helper()
	res, sub, _ := strings.Cut(resource, "/")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: serviceAccountGroups(operatorNamespace),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Group: group, Resource: res, Subresource: sub, Name: name,
		},
	}}
	if err := k8s.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// checkProvisionerCannotWidenBindings: what RBAC lets the provisioner
// create, the policy narrows to the tenant binding; RBAC's escalation
// check refuses a binding of a role it does not hold; and nobody else
// changes the tenant binding, short of the break-glass group.
func checkProvisionerCannotWidenBindings(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	_, provisioner := asServiceAccount(t, provisionerUser)
	binding := func(name, role string, subject rbacv1.Subject, namespace ...string) *rbacv1.RoleBinding {
		ns := "tenancy-out"
		if len(namespace) > 0 {
			ns = namespace[0]
		}
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{subject},
		}
	}
	controllerSA := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: tenancy.ControllerServiceAccount, Namespace: operatorNamespace}
	itself := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: tenancy.ProvisionerServiceAccount, Namespace: operatorNamespace}
	refusals := map[string]struct {
		obj  *rbacv1.RoleBinding
		want string
	}{
		"the tenant role under another name": {binding("sneaky", tenancy.TenantRoleName, controllerSA), "may only write the RoleBinding openbao-operator-tenant"},
		"the tenant role to itself":          {binding(tenancy.TenantRoleName, tenancy.TenantRoleName, itself), "may only write the RoleBinding openbao-operator-tenant"},
		"cluster-admin to the controller":    {binding(tenancy.TenantRoleName, "cluster-admin", controllerSA), "attempting to grant RBAC permissions not currently held"},
	}
	// The API server loads a new policy asynchronously.
	waitUntil(t, 30*time.Second, "the tenant-bindings policy in force", func() bool {
		err := provisioner.Create(ctx, binding("probe", tenancy.TenantRoleName, controllerSA))
		if err == nil {
			_ = k8s.Delete(ctx, binding("probe", tenancy.TenantRoleName, controllerSA))
		}
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err)
	})
	for name, tc := range refusals {
		err := provisioner.Create(ctx, tc.obj)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("provisioner creates %s: got %v, want a refusal containing %q", name, err, tc.want)
			_ = k8s.Delete(ctx, tc.obj)
		}
	}
	// The namespace controller empties a namespace being deleted with
	// delete-collection requests, which carry no name.
	ensureNamespace(t, "tenancy-emptied")
	if err := k8s.Create(ctx, binding("someone-elses", "view", rbacv1.Subject{Kind: rbacv1.UserKind, Name: "carol"}, "tenancy-emptied")); err != nil {
		t.Fatal(err)
	}
	if err := as(t, "system:serviceaccount:kube-system:namespace-controller").DeleteAllOf(ctx, &rbacv1.RoleBinding{},
		client.InNamespace("tenancy-emptied")); err != nil {
		t.Errorf("the namespace controller empties a namespace of its RoleBindings: %v", err)
	}
	existing, err := tenantBinding(ctx, "tenancy-a")
	if err != nil {
		t.Fatal(err)
	}
	existing.Subjects = append(existing.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "mallory"})
	if err := as(t, "alice").Update(ctx, existing.DeepCopy()); err == nil || !strings.Contains(err.Error(), "is the provisioner's") {
		t.Errorf("an admin widens the tenant binding by hand: got %v, want refused", err)
	}
	// Only the controllers the policy names pass as Kubernetes: any other
	// ServiceAccount of kube-system is refused like anyone.
	for _, sa := range []string{"default", "daemon-set-controller"} {
		who := "system:serviceaccount:kube-system:" + sa
		if err := as(t, who).Update(ctx, existing.DeepCopy()); err == nil || !strings.Contains(err.Error(), "is the provisioner's") {
			t.Errorf("%s widens the tenant binding: got %v, want refused", who, err)
		}
		if err := as(t, who).Delete(ctx, existing.DeepCopy()); err == nil || !strings.Contains(err.Error(), "is the provisioner's") {
			t.Errorf("%s deletes the tenant binding: got %v, want refused", who, err)
		}
	}
	if err := as(t, "bob", breakGlassGroup).Delete(ctx, existing.DeepCopy()); err != nil {
		t.Errorf("break-glass deletes the tenant binding: %v", err)
	}
	// The provisioner puts it back at its next pass (a resync, or the
	// tenant's next change); the test's next step changes the tenant.
}

// tenancyTestLabel marks the clusters of the tenancy test: its controller
// caches only those, so it does not report on the other tests' clusters.
const tenancyTestLabel = "openbao.org/tenancy-test"

// startTenancyController runs the OpenBaoCluster reconciler as the
// controller's ServiceAccount, with the tenancy install's cache and scope.
func startTenancyController(t *testing.T) *controllers.TenantScope {
	t.Helper()
	ccfg, _ := asServiceAccount(t, controllerUser)
	newCache, scope := controllers.NewTenancy()
	opts := controllers.ManagerOptions(controllers.ManagerSettings{Scheme: scheme, MetricsAddr: "0", NewCache: newCache})
	opts.Cache.ByObject[&v1alpha1.OpenBaoCluster{}] = cache.ByObject{Label: labels.SelectorFromSet(labels.Set{tenancyTestLabel: "true"})}
	// The suite's manager runs a controller of the same name.
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(ccfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	scope.Reader = mgr.GetClient()
	if err := scope.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	r, err := controllers.NewReconciler(mgr, controllers.Options{
		Operator: values.Operator{Namespace: operatorNamespace}, ResyncPeriod: 10 * time.Minute, Scope: scope,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(mgr, 2); err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, mgr, "controller")
	return scope
}

// testControllerFollowsTenants: a cluster in a namespace no tenant holds is
// told so on its status; once a tenant provisions the namespace the same
// controller, as itself, renders the cluster there (a Role among its
// children, which RBAC lets it create only while it holds those rights
// there); and when the tenant goes, the cluster is told again.
func testControllerFollowsTenants(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, "tenancy-ctl")
	scope := startTenancyController(t)
	c := newCluster(t, "tenancy-ctl", `
metadata: {name: tenanted, labels: {openbao.org/tenancy-test: "true"}}
spec: {version: 2.4.0, replicas: 3}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	wantNotProvisioned := func(what string) {
		t.Helper()
		eventually(t, 30*time.Second, what, func() error {
			got, err := condition(ctx, c, v1alpha1.ConditionDegraded)
			if err != nil {
				return err
			}
			if got.Status != metav1.ConditionTrue || got.Reason != v1alpha1.ReasonNamespaceNotProvisioned ||
				!strings.Contains(got.Message, "tenancy-ctl") {
				return fmt.Errorf("Degraded %s %s: %s", got.Status, got.Reason, got.Message)
			}
			return nil
		})
	}
	wantNotProvisioned("a cluster outside every tenant reported")
	if n, err := childrenAnyCluster(ctx, "tenancy-ctl"); err != nil || n != 0 {
		t.Fatalf("children in a namespace no tenant provisioned: %d (%v)", n, err)
	}

	tenant := &v1alpha1.OpenBaoTenant{ObjectMeta: metav1.ObjectMeta{Name: "team-ctl"},
		Spec: v1alpha1.OpenBaoTenantSpec{Namespaces: []string{"tenancy-ctl"}}}
	if err := k8s.Create(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the cluster rendered once its namespace is provisioned", func() error {
		got, err := childrenOf(ctx, "tenancy-ctl", c.Name)
		if err != nil {
			return err
		}
		for _, name := range []string{"StatefulSet/tenanted", "Role/tenanted-service-registration"} {
			if _, ok := got[name]; !ok {
				return fmt.Errorf("%s missing; have %d children", name, len(got))
			}
		}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "tenancy-ctl", Name: c.UnsealKeySecretName()}, &corev1.Secret{}); err != nil {
			return err
		}
		got2, err := condition(ctx, c, v1alpha1.ConditionDegraded)
		if err != nil {
			return err
		}
		if got2.Reason == v1alpha1.ReasonNamespaceNotProvisioned {
			return fmt.Errorf("still reported outside every tenant")
		}
		return nil
	})

	if err := k8s.Delete(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	wantNotProvisioned("the cluster reported again once its tenant is gone")

	// A namespace with no cluster in it is followed too: served while its
	// tenant provisions it, dropped before its binding goes.
	ensureNamespace(t, "tenancy-empty")
	empty := &v1alpha1.OpenBaoTenant{ObjectMeta: metav1.ObjectMeta{Name: "team-empty"},
		Spec: v1alpha1.OpenBaoTenantSpec{Namespaces: []string{"tenancy-empty"}}}
	if err := k8s.Create(ctx, empty); err != nil {
		t.Fatal(err)
	}
	served := func() bool { return slices.Contains(scope.Cache.(*nscache.Cache).Namespaces(), "tenancy-empty") }
	waitUntil(t, 30*time.Second, "a provisioned namespace without clusters served", served)
	if err := k8s.Delete(ctx, empty); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the namespace no longer served once its tenant goes", func() bool { return !served() })
}

// TestTheWorkloadIdentitiesMayDoOnlyTheirOwnWork: the SubjectAccessReview
// table of the identities the operator renders for a cluster with
// backups: the OpenBao servers' (service registration may label its own
// cluster's pods only), and the upgrade, backup (executor), restore and
// drill ServiceAccounts, which log in to OpenBao and hold no Kubernetes
// right at all: no Secret (not even their cluster's), no pod, no token of
// another account.
func TestTheWorkloadIdentitiesMayDoOnlyTheirOwnWork(t *testing.T) {
	ctx := context.Background()
	ns := managedNamespace // the suite's manager renders the children here
	ensureNamespace(t, "workload-other")
	mine := newCluster(t, ns, "metadata: {name: wl}\nspec:\n  version: 2.4.0\n  backup:\n"+indent(scheduledSpec, "    "))
	other := newCluster(t, ns, "metadata: {name: wl2}\nspec: {version: 2.4.0}")
	for _, c := range []*v1alpha1.OpenBaoCluster{mine, other} {
		if err := k8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"RoleBinding/wl-service-registration", "ServiceAccount/wl", "ServiceAccount/wl-upgrade-serviceaccount",
		"ServiceAccount/wl-backup-serviceaccount", "ServiceAccount/wl-restore-serviceaccount", "ServiceAccount/wl-drill-serviceaccount"}
	eventually(t, wait, "the cluster's identities rendered", func() error {
		got, err := childrenOf(ctx, ns, mine.Name)
		if err != nil {
			return err
		}
		for _, name := range want {
			if _, ok := got[name]; !ok {
				return fmt.Errorf("%s missing", name)
			}
		}
		return nil
	})
	users := map[string]string{}
	for who, sa := range map[string]string{
		"servers": mine.ServiceAccountName(), "upgrade": mine.UpgradeServiceAccountName(), "backup": mine.BackupServiceAccountName(),
		"restore": mine.RestoreServiceAccountName(), "drill": mine.DrillServiceAccountName(),
	} {
		users[who] = "system:serviceaccount:" + ns + ":" + sa
	}
	own, none := allowedIn(ns), allowedIn()
	rows := []accessRow{
		{who: "servers", verb: "list", resource: "pods", allowed: own},
		{who: "servers", verb: "patch", resource: "pods", name: mine.PodName(0), allowed: own},
		{who: "servers", verb: "update", resource: "pods", name: mine.PodName(2), allowed: own},
		{who: "servers", verb: "patch", resource: "pods", name: other.PodName(0), allowed: none},
		{who: "servers", verb: "patch", resource: "pods", allowed: none},
		{who: "servers", verb: "create", resource: "pods", allowed: none},
		{who: "servers", verb: "delete", resource: "pods", name: mine.PodName(0), allowed: none},
		{who: "servers", verb: "get", resource: "secrets", name: mine.UnsealKeySecretName(), allowed: none},
		{who: "servers", verb: "list", resource: "secrets", allowed: none},
		{who: "servers", verb: "create", resource: "serviceaccounts/token", allowed: none},
	}
	for _, who := range []string{"upgrade", "backup", "restore", "drill"} {
		rows = append(rows,
			accessRow{who: who, verb: "get", resource: "secrets", name: mine.RootTokenSecretName(), allowed: none},
			accessRow{who: who, verb: "get", resource: "secrets", name: mine.TLSCASecretName(), allowed: none},
			accessRow{who: who, verb: "list", resource: "secrets", allowed: none},
			accessRow{who: who, verb: "list", resource: "pods", allowed: none},
			accessRow{who: who, verb: "create", resource: "pods", allowed: none},
			accessRow{who: who, verb: "patch", resource: "pods", name: other.PodName(0), allowed: none},
			accessRow{who: who, verb: "create", resource: "serviceaccounts/token", name: mine.RestoreServiceAccountName(), allowed: none},
			accessRow{who: who, verb: "create", group: "batch", resource: "jobs", allowed: none},
			accessRow{who: who, verb: "get", group: "openbao.org", resource: "openbaoclusters", allowed: none},
		)
	}
	checkServiceAccountAccessTable(t, "SubjectAccessReview of a cluster's workload identities", users,
		[]string{ns, "workload-other", ""}, rows)
}

// checkServiceAccountAccessTable is checkUserAccessTable for
// ServiceAccounts: each asks with the groups the API server gives it.
func checkServiceAccountAccessTable(t *testing.T, title string, users map[string]string, namespaces []string, rows []accessRow) {
	t.Helper()
	var table strings.Builder
	fmt.Fprintf(&table, "%-8s %-7s %-46s", "identity", "verb", "resource")
	for _, ns := range namespaces {
		fmt.Fprintf(&table, " %-19s", map[bool]string{true: "cluster", false: ns}[ns == ""])
	}
	table.WriteString("\n")
	for _, row := range rows {
		resource := strings.TrimPrefix(row.group+"/"+row.resource, "/")
		if row.name != "" {
			resource += " " + row.name
		}
		fmt.Fprintf(&table, "%-8s %-7s %-46s", row.who, row.verb, resource)
		user := users[row.who]
		saNamespace := strings.Split(user, ":")[2]
		for _, ns := range namespaces {
			res, sub, _ := strings.Cut(row.resource, "/")
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: serviceAccountGroups(saNamespace),
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: ns, Verb: row.verb, Group: row.group, Resource: res, Subresource: sub, Name: row.name,
				},
			}}
			if err := k8s.Create(context.Background(), sar); err != nil {
				t.Fatal(err)
			}
			got := sar.Status.Allowed
			mark := map[bool]string{true: "allowed", false: "denied"}[got]
			if got != row.allowed[ns] {
				mark += " (!)"
				t.Errorf("%s %s %s in %q: allowed=%v, want %v", row.who, row.verb, resource, ns, got, row.allowed[ns])
			}
			fmt.Fprintf(&table, " %-19s", mark)
		}
		table.WriteString("\n")
	}
	t.Logf("%s:\n%s", title, table.String())
}
