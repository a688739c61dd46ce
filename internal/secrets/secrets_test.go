package secrets_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/secrets"
)

func cluster(policy v1alpha1.DeletionPolicy) *v1alpha1.OpenBaoCluster {
	return &v1alpha1.OpenBaoCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "team", UID: "uid-1"},
		Spec:       v1alpha1.OpenBaoClusterSpec{DeletionPolicy: policy},
	}
}

func TestOwnerReferenceFollowsLifetimeAndPolicy(t *testing.T) {
	tests := map[string]struct {
		lifetime secrets.Lifetime
		policy   v1alpha1.DeletionPolicy
		owned    bool
	}{
		"server TLS material goes with the cluster":             {secrets.WithCluster, v1alpha1.DeletionPolicyRetain, true},
		"the seal key outlives a retained cluster":              {secrets.WithData, v1alpha1.DeletionPolicyRetain, false},
		"the seal key outlives a cluster without a policy":      {secrets.WithData, "", false},
		"the seal key is never owned: the finalizer deletes it": {secrets.WithData, v1alpha1.DeletionPolicyDeleteAll, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := secrets.New(cluster(tc.policy), secrets.Spec{Name: "x", Lifetime: tc.lifetime})
			if got := len(s.OwnerReferences) == 1; got != tc.owned {
				t.Fatalf("owned %v, want %v", got, tc.owned)
			}
			if tc.owned {
				ref := s.OwnerReferences[0]
				if ref.UID != "uid-1" || ref.Kind != v1alpha1.Kind || ref.Controller == nil || !*ref.Controller {
					t.Errorf("owner reference %+v", ref)
				}
			}
			if s.Namespace != "team" || s.Labels[v1alpha1.LabelCluster] != "bao" || s.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
				t.Errorf("namespace %q, labels %v", s.Namespace, s.Labels)
			}
			if s.Type != corev1.SecretTypeOpaque {
				t.Errorf("type %q, want Opaque by default", s.Type)
			}
		})
	}
}

func TestImmutableIsSetOnlyWhenAsked(t *testing.T) {
	if s := secrets.New(cluster(""), secrets.Spec{Name: "x"}); s.Immutable != nil {
		t.Error("a Secret is immutable without being asked")
	}
	if s := secrets.New(cluster(""), secrets.Spec{Name: "x", Immutable: true}); s.Immutable == nil || !*s.Immutable {
		t.Error("an immutable Secret is not")
	}
}

func TestRedactKeepsTheChainAndDropsTheMessage(t *testing.T) {
	const echoed = "data.token: s.secret-value-echoed-by-a-webhook"
	apiErr := apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "bao-root-token", nil)
	apiErr.ErrStatus.Message = echoed
	err := secrets.Redact(apiErr)
	if strings.Contains(err.Error(), "secret-value") {
		t.Fatalf("the message reaches the error: %q", err)
	}
	if !strings.Contains(err.Error(), "Invalid") || !strings.Contains(err.Error(), "422") {
		t.Errorf("the error %q does not name the reason and code", err)
	}
	if !apierrors.IsInvalid(err) {
		t.Error("the API error is no longer in the chain")
	}
	if got := secrets.Redact(errors.New("dial tcp: connection refused")).Error(); got != "request failed" {
		t.Errorf("a transport error reads %q", got)
	}
	if secrets.Redact(nil) != nil {
		t.Error("Redact(nil) is not nil")
	}
}
