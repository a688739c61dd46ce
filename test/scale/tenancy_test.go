package scale_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/tenancy"
)

// The tenancy install runs two identities, each a ServiceAccount with the
// rights config/tenancy gives it: the controller (the operator, started
// with --tenancy) and the provisioner, which binds the controller's tenant
// role in the namespaces OpenBaoTenants name.
var (
	controllerUser  = serviceAccountName(tenancy.ControllerServiceAccount)
	provisionerUser = serviceAccountName(tenancy.ProvisionerServiceAccount)
)

func serviceAccountName(sa string) string {
	return "system:serviceaccount:" + operatorNamespace + ":" + sa
}

// operatorUserOf is the name the operator authenticates as in a mode: an
// admin for the cluster-wide install, the controller's ServiceAccount for
// the tenancy one.
func operatorUserOf(mode string) string {
	if mode == modeTenancy {
		return controllerUser
	}
	return operatorUser
}

// serviceAccountUser adds a user named and grouped as the API server names
// and groups a ServiceAccount of the operator's namespace, and no more: RBAC
// gives it exactly what it gives that ServiceAccount.
func serviceAccountUser(b *testing.B, env *envtest.Environment, sa string) *rest.Config {
	b.Helper()
	u, err := env.AddUser(envtest.User{Name: serviceAccountName(sa), Groups: []string{
		"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated",
	}}, nil)
	if err != nil {
		b.Fatalf("add ServiceAccount user %s: %v", sa, err)
	}
	return u.Config()
}

// tenancyFiles are what config/tenancy installs for the two identities
// besides config/default: the generated ClusterRoles, their bindings, the
// controller's Role in its own namespace and the policy on the
// provisioner's RoleBindings (as test/envtest's tenancy test installs).
var tenancyFiles = []string{"roles/tenant_role.yaml", "roles/controller_role.yaml", "roles/provisioner_role.yaml",
	"role_bindings.yaml", "tenant-bindings-policy.yaml"}

func installTenancy(ctx context.Context, c client.Client, root string) error {
	for _, file := range tenancyFiles {
		data, err := os.ReadFile(filepath.Join(root, "config", "tenancy", file))
		if err != nil {
			return err
		}
		objs, err := decodeAll(data)
		if err != nil {
			return fmt.Errorf("config/tenancy/%s: %w", file, err)
		}
		for _, obj := range objs {
			if err := c.Create(ctx, obj); err != nil {
				return fmt.Errorf("create %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}

// decodeAll decodes the objects of a multi-document YAML file.
func decodeAll(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// startProvisioner runs `openbao-operator provisioner` as the
// provisioner's ServiceAccount and waits until its controller runs.
func startProvisioner(b *testing.B, bin, dir string, cfg *rest.Config) *process {
	b.Helper()
	kubeconfig := writeKubeconfig(b, filepath.Join(dir, "provisioner.kubeconfig"), cfg)
	p := start(b, dir, "provisioner", []string{"KUBECONFIG=" + kubeconfig}, bin, "provisioner",
		"--operator-namespace", operatorNamespace, "--health-probe-bind-address", freeAddr(b))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := p.waitForLine(ctx, "Starting workers"); err != nil {
		b.Fatalf("%v\nprovisioner log tail:\n%s", err, p.tail(40))
	}
	return p
}

func tenantName(i int) string { return fmt.Sprintf("team-%03d", i) }

// createTenants hands each benchmark namespace to the operator through an
// OpenBaoTenant of its own, from createWorkers goroutines.
func createTenants(ctx context.Context, c client.Client, namespaces int) error {
	return createEach(namespaces, func(i int) error {
		t := &v1alpha1.OpenBaoTenant{ObjectMeta: metav1.ObjectMeta{Name: tenantName(i)},
			Spec: v1alpha1.OpenBaoTenantSpec{Namespaces: []string{namespaceOf(i, namespaces)}}}
		if err := c.Create(ctx, t); err != nil {
			return fmt.Errorf("create tenant %s: %w", t.Name, err)
		}
		return nil
	})
}

// waitTenantsReady polls until n tenants report Ready=True for their
// generation (every namespace provisioned) or the timeout passes.
func waitTenantsReady(ctx context.Context, c client.Client, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		list := &v1alpha1.OpenBaoTenantList{}
		if err := c.List(ctx, list); err != nil {
			return fmt.Errorf("list tenants: %w", err)
		}
		ready := 0
		for i := range list.Items {
			t := &list.Items[i]
			if meta.IsStatusConditionTrue(t.Status.Conditions, v1alpha1.ConditionTenantReady) && t.Status.ObservedGeneration == t.Generation {
				ready++
			}
		}
		if ready >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d tenants ready after %s", ready, n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
