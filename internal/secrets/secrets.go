// Package secrets builds the Secrets the operator writes for a cluster (TLS
// material, the static seal key, the root token, the self-init requests) so
// that every one carries the same labels and the owner reference its
// lifetime calls for, and words the API server's refusals of them without
// their content. It is pure.
package secrets

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/openbao/operator/api/v1alpha1"
)

// Lifetime says whether a Secret goes with its cluster.
type Lifetime int

const (
	// WithCluster: garbage-collected with the cluster (TLS material,
	// self-init requests), which the operator can make again.
	WithCluster Lifetime = iota
	// WithData: goes with the data on the Raft volumes (the seal key and
	// root token that open it, the CA its clients trust). It has no owner:
	// the operator's finalizer deletes it as the deletion policy says when
	// the cluster is deleted, and a cluster of the same name adopts it.
	WithData
)

// Spec is one Secret to build.
type Spec struct {
	Name      string
	Type      corev1.SecretType
	Data      map[string][]byte
	Lifetime  Lifetime
	Immutable bool
}

// New builds the Secret for cluster c.
func New(c *v1alpha1.OpenBaoCluster, s Spec) *corev1.Secret {
	typ := s.Type
	if typ == "" {
		typ = corev1.SecretTypeOpaque
	}
	out := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: c.Namespace, Labels: Labels(c)},
		Type:       typ,
		Data:       s.Data,
	}
	if s.Immutable {
		out.Immutable = ptr.To(true)
	}
	if s.Lifetime == WithCluster {
		out.OwnerReferences = []metav1.OwnerReference{c.ControllerReference()}
	}
	return out
}

// Labels are the labels of every Secret the operator writes: the cluster's
// name, which the operator's cache selects on, and the manager.
func Labels(c *v1alpha1.OpenBaoCluster) map[string]string {
	return map[string]string{v1alpha1.LabelCluster: c.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
}

// APIError wraps an API server error about a Secret. It prints only the
// status reason and code, because an admission webhook's message could
// echo the Secret it refused; the error stays in the chain, so
// apierrors.IsAlreadyExists and friends still see it.
type APIError struct{ Err error }

func (e *APIError) Error() string {
	var status apierrors.APIStatus
	if errors.As(e.Err, &status) {
		return fmt.Sprintf("%s (HTTP %d)", status.Status().Reason, status.Status().Code)
	}
	return "request failed"
}

func (e *APIError) Unwrap() error { return e.Err }

// Redact wraps err in APIError; nil stays nil.
func Redact(err error) error {
	if err == nil {
		return nil
	}
	return &APIError{Err: err}
}
