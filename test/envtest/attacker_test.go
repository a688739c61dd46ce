package envtest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/test/testbin"
)

// The roles config/rbac ships for people (issue 34): the editor of the
// operator's namespaced kinds, aggregated to admin and edit, and the viewer,
// aggregated to view.
const (
	editorRole = "openbao-operator-openbao-editor"
	viewerRole = "openbao-operator-openbao-viewer"
)

// Attacker is issue 34's attacker tenant: a user who holds, in one
// namespace, Kubernetes' view ClusterRole plus the operator's editor role,
// through RoleBindings in that namespace, and nothing else. It may create
// OpenBao resources there, and may not read Secrets nor write
// NetworkPolicies, Services or ServiceAccounts: whatever the operator does
// for it beyond that is the operator's rights, not its own.
type Attacker struct {
	User      string       // attacker@<Namespace>
	Namespace string       // the one namespace it holds rights in
	Config    *rest.Config // impersonates User, in the group system:authenticated only
	Client    client.Client
}

// authenticatedGroups are the groups the API server gives any user who
// logged in; RBAC's bootstrap binds that group only to discovery and
// self-review roles, and no binding of this suite names it.
var authenticatedGroups = []string{"system:authenticated"}

// NewAttacker creates namespace if needed, installs config/rbac's editor
// and viewer roles (aggregated into the built-in ones, see
// ensureUserRolesAggregated), binds attacker@<namespace> to view and to the
// editor role in namespace only, waits until RBAC answers so, and returns a
// client acting as that user.
func NewAttacker(t *testing.T, namespace string) *Attacker {
	t.Helper()
	return NewAttackerOn(t, cfg, k8s, namespace)
}

// NewAttackerOn is NewAttacker on another API server (one that calls the
// operator's webhook, startWebhookServerWith), given its admin's config
// and client.
func NewAttackerOn(t *testing.T, adminCfg *rest.Config, admin client.Client, namespace string) *Attacker {
	t.Helper()
	ensureUserRolesAggregatedOn(t, adminCfg, admin)
	if err := admin.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	user := "attacker@" + namespace
	bindUserOn(t, admin, namespace, user, "view")
	bindUserOn(t, admin, namespace, user, editorRole)
	waitUntil(t, 30*time.Second, user+"'s bindings in force", func() bool {
		return userAllowedOn(t, admin, user, namespace, "create", v1alpha1.GroupVersion.Group, "openbaoclusters", "") &&
			userAllowedOn(t, admin, user, namespace, "list", "", "pods", "")
	})
	c := rest.CopyConfig(adminCfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: authenticatedGroups}
	cl, err := client.New(c, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &Attacker{User: user, Namespace: namespace, Config: c, Client: cl}
}

// bindUser binds user to the ClusterRole role in namespace, with a
// RoleBinding named after both.
func bindUser(t *testing.T, namespace, user, role string) {
	t.Helper()
	bindUserOn(t, k8s, namespace, user, role)
}

func bindUserOn(t *testing.T, k8s client.Client, namespace, user, role string) {
	t.Helper()
	b := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: strings.ReplaceAll(user, "@", "-at-") + "-" + role, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if err := k8s.Create(context.Background(), b); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("bind %s to %s in %s: %v", user, role, namespace, err)
	}
}

// userAllowed asks the API server whether an authenticated user (not a
// ServiceAccount) may verb the resource ("pods" or "pods/exec").
func userAllowed(t testing.TB, user, namespace, verb, group, resource, name string) bool {
	t.Helper()
	return userAllowedOn(t, k8s, user, namespace, verb, group, resource, name)
}

func userAllowedOn(t testing.TB, k8s client.Client, user, namespace, verb, group, resource, name string) bool {
	t.Helper()
	res, sub, _ := strings.Cut(resource, "/")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: authenticatedGroups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Group: group, Resource: res, Subresource: sub, Name: name,
		},
	}}
	if err := k8s.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// userRolesMu keeps two tests from running the aggregation at once.
var userRolesMu sync.Mutex

// ensureUserRolesAggregated creates config/rbac's editor and viewer roles
// and waits until Kubernetes' admin, edit and view roles hold their rules.
// envtest runs no kube-controller-manager, whose clusterrole-aggregation
// controller fills those built-in roles (they are created empty, with only
// their aggregation rule): the real binary runs with only that controller
// until they are filled, and the filled roles stay.
func ensureUserRolesAggregated(t *testing.T) {
	t.Helper()
	ensureUserRolesAggregatedOn(t, cfg, k8s)
}

func ensureUserRolesAggregatedOn(t *testing.T, cfg *rest.Config, k8s client.Client) {
	t.Helper()
	userRolesMu.Lock()
	defer userRolesMu.Unlock()
	root, _ := testbin.RepoRoot()
	for _, file := range []string{"openbao_editor_role.yaml", "openbao_viewer_role.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, "config", "rbac", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range decodeAll(t, data) {
			if err := k8s.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("create %s: %v", obj.GetName(), err)
			}
		}
	}
	if builtinRolesAggregated(t, k8s) {
		return
	}
	t.Log("running kube-controller-manager's clusterrole-aggregation controller")
	stop := startRoleAggregation(t, cfg)
	defer stop()
	waitUntil(t, 60*time.Second, "admin, edit and view aggregate the editor and viewer roles", func() bool {
		return builtinRolesAggregated(t, k8s)
	})
}

// builtinRolesAggregated: admin and edit hold the editor's rules, view the
// viewer's and Kubernetes' own (system:aggregate-to-view's, which the
// attacker's view binding stands for).
func builtinRolesAggregated(t *testing.T, k8s client.Client) bool {
	t.Helper()
	holds := func(role, from string) bool {
		var r, f rbacv1.ClusterRole
		if k8s.Get(context.Background(), client.ObjectKey{Name: role}, &r) != nil ||
			k8s.Get(context.Background(), client.ObjectKey{Name: from}, &f) != nil {
			return false
		}
		for _, want := range f.Rules {
			if !slices.ContainsFunc(r.Rules, func(got rbacv1.PolicyRule) bool { return equalRule(got, want) }) {
				return false
			}
		}
		return len(f.Rules) > 0
	}
	return holds("admin", editorRole) && holds("edit", editorRole) && holds("view", viewerRole) &&
		holds("view", "system:aggregate-to-view")
}

func equalRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.ResourceNames, b.ResourceNames) &&
		slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

// startRoleAggregation runs the real kube-controller-manager (make tools
// builds it beside kube-apiserver) with only its clusterrole-aggregation
// controller, as the suite's admin; stop ends it.
func startRoleAggregation(t *testing.T, cfg *rest.Config) (stop func()) {
	t.Helper()
	return startKubeControllers(t, cfg, "--controllers=clusterrole-aggregation-controller")
}

// startKubeControllers runs the real kube-controller-manager with args
// (which name its controllers) as the suite's admin; stop ends it.
func startKubeControllers(t *testing.T, cfg *rest.Config, args ...string) (stop func()) {
	t.Helper()
	bin, err := testbin.Path("kube-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig,
		"--leader-elect=false", "--use-service-account-credentials=false", "--secure-port=0"}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	// Killed with the test binary, should it die first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kube-controller-manager: %v", err)
	}
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = log.Close()
	}
}

// checkUserAccessTable asks the API server, for each row's user, the verb
// on the resource in each of namespaces ("" is cluster scope), prints the
// answers as a table as the tenancy test does, and fails on any answer
// other than the row's.
func checkUserAccessTable(t *testing.T, title string, users map[string]string, namespaces []string, rows []accessRow) {
	t.Helper()
	var table strings.Builder
	fmt.Fprintf(&table, "%-10s %-16s %-44s", "identity", "verb", "resource")
	for _, ns := range namespaces {
		fmt.Fprintf(&table, " %-17s", map[bool]string{true: "cluster", false: ns}[ns == ""])
	}
	table.WriteString("\n")
	for _, row := range rows {
		resource := strings.TrimPrefix(row.group+"/"+row.resource, "/")
		if row.name != "" {
			resource += " " + row.name
		}
		fmt.Fprintf(&table, "%-10s %-16s %-44s", row.who, row.verb, resource)
		for _, ns := range namespaces {
			got := userAllowed(t, users[row.who], ns, row.verb, row.group, row.resource, row.name)
			mark := map[bool]string{true: "allowed", false: "denied"}[got]
			if got != row.allowed[ns] {
				mark += " (!)"
				t.Errorf("%s %s %s in %q: allowed=%v, want %v", row.who, row.verb, resource, ns, got, row.allowed[ns])
			}
			fmt.Fprintf(&table, " %-17s", mark)
		}
		table.WriteString("\n")
	}
	t.Logf("%s:\n%s", title, table.String())
}

// allowedIn is the allowed column of an accessRow: true in these namespaces.
func allowedIn(namespaces ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range namespaces {
		m[n] = true
	}
	return m
}

// TestAttackerTenant pins down the attacker of issue 34 before any finding
// is tested against it: what its two bindings give it, by
// SubjectAccessReview and by acting, and that the editor and viewer roles
// reach Kubernetes' admin, edit and view roles.
func TestAttackerTenant(t *testing.T) {
	ensureNamespace(t, "attacker-b")
	a := NewAttacker(t, "attacker-a")
	t.Run("the attacker holds view and the editor role in its namespace and nothing else", func(t *testing.T) {
		testAttackerRights(t, a)
	})
	t.Run("the attacker creates OpenBao resources and nothing it may not create by hand", func(t *testing.T) {
		testAttackerActs(t, a)
	})
	t.Run("admin, edit and view carry the editor and viewer roles", testBuiltinRolesAggregate)
}

// testAttackerRights: the SubjectAccessReview table of the attacker in its
// namespace, in another, and at cluster scope.
func testAttackerRights(t *testing.T, a *Attacker) {
	const bao = "openbao.org"
	own := allowedIn(a.Namespace)
	none := allowedIn()
	rows := []accessRow{
		{who: "attacker", verb: "create", group: bao, resource: "openbaoclusters", allowed: own},
		{who: "attacker", verb: "update", group: bao, resource: "openbaoclusters", allowed: own},
		{who: "attacker", verb: "delete", group: bao, resource: "openbaoclusters", allowed: own},
		{who: "attacker", verb: "deletecollection", group: bao, resource: "openbaoclusters", allowed: own},
		{who: "attacker", verb: "create", group: bao, resource: "openbaobackups", allowed: own},
		{who: "attacker", verb: "create", group: bao, resource: "openbaorestores", allowed: own},
		{who: "attacker", verb: "get", group: bao, resource: "openbaoclusters/status", allowed: own},
		{who: "attacker", verb: "update", group: bao, resource: "openbaoclusters/status", allowed: none},
		{who: "attacker", verb: "list", group: bao, resource: "openbaotenants", allowed: none},
		{who: "attacker", verb: "create", group: bao, resource: "openbaotenants", allowed: none},
		{who: "attacker", verb: "get", resource: "secrets", allowed: none},
		{who: "attacker", verb: "list", resource: "secrets", allowed: none},
		{who: "attacker", verb: "watch", resource: "secrets", allowed: none},
		{who: "attacker", verb: "get", resource: "configmaps", allowed: own},
		{who: "attacker", verb: "list", resource: "pods", allowed: own},
		{who: "attacker", verb: "create", resource: "pods", allowed: none},
		{who: "attacker", verb: "create", resource: "pods/exec", allowed: none},
		{who: "attacker", verb: "get", group: "networking.k8s.io", resource: "networkpolicies", allowed: own},
		{who: "attacker", verb: "create", group: "networking.k8s.io", resource: "networkpolicies", allowed: none},
		{who: "attacker", verb: "update", group: "networking.k8s.io", resource: "networkpolicies", allowed: none},
		{who: "attacker", verb: "delete", group: "networking.k8s.io", resource: "networkpolicies", allowed: none},
		{who: "attacker", verb: "create", resource: "services", allowed: none},
		{who: "attacker", verb: "update", resource: "services", allowed: none},
		{who: "attacker", verb: "create", resource: "serviceaccounts", allowed: none},
		{who: "attacker", verb: "update", resource: "serviceaccounts", allowed: none},
		{who: "attacker", verb: "create", resource: "serviceaccounts/token", allowed: none},
		{who: "attacker", verb: "create", group: "batch", resource: "jobs", allowed: none},
		{who: "attacker", verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings", allowed: none},
	}
	checkUserAccessTable(t, "SubjectAccessReview of the attacker tenant",
		map[string]string{"attacker": a.User}, []string{a.Namespace, "attacker-b", ""}, rows)
}

// testAttackerActs: acting through its client, the attacker creates an
// OpenBaoCluster and an OpenBaoBackup in its namespace; every other write
// is forbidden, Secrets stay unread, and the objects the platform put in
// its namespace are unchanged afterwards.
func testAttackerActs(t *testing.T, a *Attacker) {
	ctx := context.Background()
	ns := a.Namespace
	platform := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "payments-db", Namespace: ns}, StringData: map[string]string{"password": "x"}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: ns}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: ns},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: ns}},
	}
	versions := map[string]string{}
	for _, obj := range platform {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		versions[typeName(obj)+"/"+obj.GetName()] = obj.GetResourceVersion()
	}

	cluster := newCluster(t, ns, "metadata: {name: bao}\nspec: {version: 2.4.0, replicas: 3}\n")
	if err := a.Client.Create(ctx, cluster); err != nil {
		t.Errorf("the attacker creates an OpenBaoCluster in its namespace: %v", err)
	}
	backup := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "manual", Namespace: ns},
		Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: "bao"}}
	if err := a.Client.Create(ctx, backup); err != nil {
		t.Errorf("the attacker creates an OpenBaoBackup in its namespace: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, backup); _ = k8s.Delete(ctx, cluster) })

	for what, err := range attackerForbiddenActs(t, a) {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the attacker %s: got %v, want forbidden", what, err)
		}
	}
	for _, obj := range platform {
		key := typeName(obj) + "/" + obj.GetName()
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Errorf("%s: %v", key, err)
		} else if obj.GetResourceVersion() != versions[key] {
			t.Errorf("%s changed (resourceVersion %s, was %s)", key, obj.GetResourceVersion(), versions[key])
		}
	}
}

// attackerForbiddenActs tries, as the attacker, each act its rights must
// refuse, and returns the answers by what was tried.
func attackerForbiddenActs(t *testing.T, a *Attacker) map[string]error {
	ctx := context.Background()
	ns, other := a.Namespace, "attacker-b"
	cl := a.Client
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
	policy := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "openbao"}}}}
	service := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8200}}}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: ns, Labels: map[string]string{"x": "y"}}}
	fresh := func(obj client.Object, name string) client.Object {
		c := obj.DeepCopyObject().(client.Object)
		c.SetName(name)
		return c
	}
	elsewhere := newCluster(t, other, "metadata: {name: bao}\nspec: {version: 2.4.0, replicas: 3}\n")
	return map[string]error{
		"reads a Secret":                      cl.Get(ctx, key("payments-db"), &corev1.Secret{}),
		"lists Secrets":                       cl.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)),
		"creates a NetworkPolicy":             cl.Create(ctx, fresh(policy, "allow-all")),
		"replaces the NetworkPolicy deny-all": cl.Update(ctx, withVersion(ctx, policy)),
		"deletes the NetworkPolicy deny-all":  cl.Delete(ctx, fresh(policy, "deny-all")),
		"creates a Service":                   cl.Create(ctx, fresh(service, "other")),
		"replaces the Service payments":       cl.Update(ctx, withVersion(ctx, service)),
		"creates a ServiceAccount":            cl.Create(ctx, fresh(sa, "other")),
		"changes the ServiceAccount payments": cl.Update(ctx, withVersion(ctx, sa)),
		"creates an OpenBaoCluster elsewhere": cl.Create(ctx, elsewhere),
		"lists OpenBaoClusters elsewhere":     cl.List(ctx, &v1alpha1.OpenBaoClusterList{}, client.InNamespace(other)),
		"lists OpenBaoTenants":                cl.List(ctx, &v1alpha1.OpenBaoTenantList{}),
		"creates an OpenBaoTenant":            cl.Create(ctx, &v1alpha1.OpenBaoTenant{ObjectMeta: metav1.ObjectMeta{Name: "attacker"}, Spec: v1alpha1.OpenBaoTenantSpec{Namespaces: []string{other}}}),
		"writes an OpenBaoCluster's status":   cl.Status().Update(ctx, clusterWithVersion(ctx, ns, "bao")),
	}
}

// withVersion returns obj with the stored object's resourceVersion, read
// as the admin, so that an update is refused for its rights, not as stale.
func withVersion(ctx context.Context, obj client.Object) client.Object {
	stored := obj.DeepCopyObject().(client.Object)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), stored); err == nil {
		obj.SetResourceVersion(stored.GetResourceVersion())
	}
	return obj
}

func clusterWithVersion(ctx context.Context, namespace, name string) *v1alpha1.OpenBaoCluster {
	c := &v1alpha1.OpenBaoCluster{}
	_ = k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, c)
	return c
}

// testBuiltinRolesAggregate: users bound only to admin, edit or view in a
// namespace get the editor's or the viewer's rights on the operator's
// kinds there, and never on OpenBaoTenants.
func testBuiltinRolesAggregate(t *testing.T) {
	const bao = "openbao.org"
	ns := "attacker-builtin"
	ensureNamespace(t, ns)
	users := map[string]string{}
	for _, role := range []string{"admin", "edit", "view"} {
		users[role] = role + "@" + ns
		bindUser(t, ns, users[role], role)
	}
	waitUntil(t, 30*time.Second, "the admin, edit and view bindings in force", func() bool {
		return userAllowed(t, users["view"], ns, "list", "", "pods", "") && userAllowed(t, users["edit"], ns, "create", "", "pods", "")
	})
	own, none := allowedIn(ns), allowedIn()
	var rows []accessRow
	for _, who := range []string{"admin", "edit"} {
		for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection", "get", "list", "watch"} {
			rows = append(rows, accessRow{who: who, verb: verb, group: bao, resource: "openbaoclusters", allowed: own})
		}
		rows = append(rows,
			accessRow{who: who, verb: "create", group: bao, resource: "openbaobackups", allowed: own},
			accessRow{who: who, verb: "create", group: bao, resource: "openbaorestores", allowed: own},
			accessRow{who: who, verb: "get", group: bao, resource: "openbaoclusters/status", allowed: own},
			accessRow{who: who, verb: "update", group: bao, resource: "openbaoclusters/status", allowed: none},
			accessRow{who: who, verb: "list", group: bao, resource: "openbaotenants", allowed: none})
	}
	for _, verb := range []string{"get", "list", "watch"} {
		for _, res := range []string{"openbaoclusters", "openbaobackups", "openbaorestores"} {
			rows = append(rows, accessRow{who: "view", verb: verb, group: bao, resource: res, allowed: own})
		}
	}
	for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
		rows = append(rows, accessRow{who: "view", verb: verb, group: bao, resource: "openbaoclusters", allowed: none})
	}
	rows = append(rows,
		accessRow{who: "view", verb: "get", group: bao, resource: "openbaobackups/status", allowed: own},
		accessRow{who: "view", verb: "list", group: bao, resource: "openbaotenants", allowed: none})
	checkUserAccessTable(t, "SubjectAccessReview of users bound to Kubernetes' admin, edit and view only",
		users, []string{ns, "attacker-b", ""}, rows)
}
