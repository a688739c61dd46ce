package localnode

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
)

// tenant is an OpenBaoTenant named after the one namespace it hands to the
// operator; unstructured, so that any client's scheme will do.
func tenant(namespace string) *unstructured.Unstructured {
	t := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"namespaces": []any{namespace}},
	}}
	t.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(v1alpha1.TenantKind))
	t.SetName(namespace)
	return t
}

// Provision hands namespace to the operator, which the node installs in
// least-privilege mode: an OpenBaoTenant of the same name names it, and
// Provision waits until the provisioner reports it provisioned.
func Provision(ctx context.Context, cl client.Client, namespace string) error {
	t := tenant(namespace)
	if err := cl.Create(ctx, t); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("create OpenBaoTenant %s: %w", namespace, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last []any
	for {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(t), t); err == nil {
			last, _, _ = unstructured.NestedSlice(t.Object, "status", "namespaces")
			for _, s := range last {
				if m, ok := s.(map[string]any); ok && m["name"] == namespace && m["provisioned"] == true {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("OpenBaoTenant %s: namespace not provisioned (status %v): %w", namespace, last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Unprovision deletes the tenant Provision made; the namespace should be
// gone first, so that its clusters' deletion policies ran with the
// operator's rights.
func Unprovision(ctx context.Context, cl client.Client, namespace string) error {
	if err := cl.Delete(ctx, tenant(namespace)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete OpenBaoTenant %s: %w", namespace, err)
	}
	return nil
}
