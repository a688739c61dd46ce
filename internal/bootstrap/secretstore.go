package bootstrap

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/secrets"
)

// RootTokenDataKey is the data key of <cluster>-root-token.
const RootTokenDataKey = "token"

// SecretTokenStore stores the root token in a Kubernetes Secret built from
// Template (name, namespace, labels, owner references set by the
// reconciler) with the token under RootTokenDataKey.
type SecretTokenStore struct {
	Client   client.Client
	Template *corev1.Secret
}

var _ TokenStore = (*SecretTokenStore)(nil)

// Name returns namespace/name of the Secret.
func (s *SecretTokenStore) Name() string {
	return s.Template.Namespace + "/" + s.Template.Name
}

// DryRunCreate asks the API server to admit the Secret without storing
// it: RBAC, quota, admission and an existing Secret of that name fail here,
// before sys/init.
func (s *SecretTokenStore) DryRunCreate(ctx context.Context) error {
	obj := s.secret(nil)
	if err := s.Client.Create(ctx, obj, client.DryRunAll); err != nil {
		return fmt.Errorf("create Secret %s: %w", s.Name(), err)
	}
	return nil
}

// Create stores the token. A Secret that already holds exactly this token
// counts as stored (an earlier attempt whose answer was lost). Errors name
// the API status reason only: an admission webhook's message could echo
// the object.
func (s *SecretTokenStore) Create(ctx context.Context, token openbao.Token) error {
	obj := s.secret([]byte(token.Reveal()))
	return createOnce(ctx, s.Client, obj, func(existing *corev1.Secret) bool {
		return bytes.Equal(existing.Data[RootTokenDataKey], obj.Data[RootTokenDataKey])
	})
}

// createOnce creates obj; a Secret of its name that already holds what
// obj holds (stored says so) counts as created: an earlier attempt whose
// answer was lost. Errors name the API status reason only: an admission
// webhook's message could echo the object.
func createOnce(ctx context.Context, cl client.Client, obj *corev1.Secret, stored func(existing *corev1.Secret) bool) error {
	err := cl.Create(ctx, obj)
	if err == nil {
		return nil
	}
	if apierrors.IsAlreadyExists(err) {
		var existing corev1.Secret
		if getErr := cl.Get(ctx, client.ObjectKeyFromObject(obj), &existing); getErr == nil && stored(&existing) {
			return nil
		}
	}
	return fmt.Errorf("create Secret %s/%s: %w", obj.Namespace, obj.Name, secrets.Redact(err))
}

func (s *SecretTokenStore) secret(token []byte) *corev1.Secret {
	obj := s.Template.DeepCopy()
	obj.Type = corev1.SecretTypeOpaque
	obj.Data = map[string][]byte{}
	if token != nil {
		obj.Data[RootTokenDataKey] = token
	}
	return obj
}

// SecretRecoveryKeyStore stores the PGP-encrypted recovery key shares in a
// Kubernetes Secret built from Template: share i (from 1) as the binary
// PGP message under RecoveryShareKey(i), the threshold under
// RecoveryThresholdKey. Only the holders of the PGP private keys can open
// a share.
type SecretRecoveryKeyStore struct {
	Client   client.Client
	Template *corev1.Secret
}

var _ RecoveryKeyStore = (*SecretRecoveryKeyStore)(nil)

// Name returns namespace/name of the Secret.
func (s *SecretRecoveryKeyStore) Name() string {
	return s.Template.Namespace + "/" + s.Template.Name
}

// DryRunCreate asks the API server to admit the Secret without storing it.
func (s *SecretRecoveryKeyStore) DryRunCreate(ctx context.Context) error {
	obj := s.Template.DeepCopy()
	obj.Type = corev1.SecretTypeOpaque
	if err := s.Client.Create(ctx, obj, client.DryRunAll); err != nil {
		return fmt.Errorf("create Secret %s: %w", s.Name(), secrets.Redact(err))
	}
	return nil
}

// Create stores the shares. A Secret that already holds exactly these
// shares counts as stored (an earlier attempt whose answer was lost).
func (s *SecretRecoveryKeyStore) Create(ctx context.Context, shares []openbao.Token, threshold int) error {
	obj := s.Template.DeepCopy()
	obj.Type = corev1.SecretTypeOpaque
	obj.Data = map[string][]byte{RecoveryThresholdKey: []byte(strconv.Itoa(threshold))}
	for i, share := range shares {
		msg, err := base64.StdEncoding.DecodeString(share.Reveal())
		if err != nil {
			return fmt.Errorf("recovery key share %d from sys/init is not base64", i+1)
		}
		obj.Data[RecoveryShareKey(i+1)] = msg
	}
	return createOnce(ctx, s.Client, obj, func(existing *corev1.Secret) bool {
		return equality.Semantic.DeepEqual(existing.Data, obj.Data)
	})
}

// StoredRecoveryShares counts the shares a <cluster>-recovery-keys Secret
// holds and reads its threshold; 0, 0 for a Secret that is nil or holds
// fewer shares than its threshold (nothing generate-root could use).
func StoredRecoveryShares(s *corev1.Secret) (shares, threshold int) {
	if s == nil {
		return 0, 0
	}
	threshold, err := strconv.Atoi(string(s.Data[RecoveryThresholdKey]))
	if err != nil || threshold < 1 {
		return 0, 0
	}
	for len(s.Data[RecoveryShareKey(shares+1)]) > 0 {
		shares++
	}
	if shares < threshold {
		return 0, 0
	}
	return shares, threshold
}
