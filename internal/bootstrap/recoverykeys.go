package bootstrap

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/openbao"
)

// ReasonRecoveryKeysUnavailable (OpenBaoInitialized False, Degraded): the
// PGP keys of spec.rootToken.recoveryKeys cannot be read or used, so
// sys/init is not called: a cluster initialized without them could never
// make a root token again once its token is revoked.
const ReasonRecoveryKeysUnavailable = "RecoveryKeysUnavailable"

// ReasonRecoveryKeysLost (Warning): sys/init returned the encrypted
// recovery key shares, but they could not be stored.
const ReasonRecoveryKeysLost = "RecoveryKeysLost"

// ErrPGPKey marks a key of the ConfigMap that is not one usable PGP public key.
var ErrPGPKey = errors.New("not one PGP public key with an encryption key")

// PGPKeys reads the public keys that spec.rootToken.recoveryKeys names, in
// order, from a ConfigMap's data and binaryData, and returns them as
// sys/init's recovery_pgp_keys wants them: base64 of the binary key. Each
// must be one key with a usable encryption (sub)key; errors name the
// ConfigMap key, not its content.
func PGPKeys(ref v1alpha1.PGPKeysConfigMapRef, data map[string]string, binary map[string][]byte, now time.Time) ([]string, error) {
	out := make([]string, 0, len(ref.Keys))
	for _, k := range ref.Keys {
		raw, ok := []byte(data[k]), true
		if _, inData := data[k]; !inData {
			raw, ok = binary[k]
		}
		if !ok {
			return nil, fmt.Errorf("ConfigMap %s has no key %s", ref.Name, k)
		}
		key, err := pgpPublicKey(raw, now)
		if err != nil {
			return nil, fmt.Errorf("ConfigMap %s, key %s: %w", ref.Name, k, err)
		}
		out = append(out, base64.StdEncoding.EncodeToString(key))
	}
	return out, nil
}

// pgpPublicKey turns an armored, base64 or binary public key into the
// binary key, after checking it is one entity that can encrypt now.
func pgpPublicKey(raw []byte, now time.Time) ([]byte, error) {
	text := strings.TrimSpace(string(raw))
	bin := raw
	switch {
	case strings.HasPrefix(text, "-----BEGIN PGP PUBLIC KEY BLOCK-----"):
		block, err := armor.Decode(strings.NewReader(text))
		if err != nil {
			return nil, fmt.Errorf("%w: the armor does not decode", ErrPGPKey)
		}
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(block.Body); err != nil {
			return nil, fmt.Errorf("%w: the armor does not decode", ErrPGPKey)
		}
		bin = buf.Bytes()
	default:
		if b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(text), "")); err == nil {
			bin = b
		}
	}
	ring, err := openpgp.ReadKeyRing(bytes.NewReader(bin))
	if err != nil || len(ring) != 1 {
		return nil, ErrPGPKey
	}
	if ring[0].PrivateKey != nil {
		return nil, fmt.Errorf("%w: it holds a private key; give the public key only (gpg --export)", ErrPGPKey)
	}
	if _, ok := ring[0].EncryptionKey(now); !ok {
		return nil, ErrPGPKey
	}
	return bin, nil
}

// RecoveryKeyStore keeps the encrypted recovery key shares.
type RecoveryKeyStore interface {
	// Name names the store (the Secret) for logs and messages.
	Name() string
	// DryRunCreate checks that Create would succeed now, without writing.
	DryRunCreate(ctx context.Context) error
	// Create stores the shares (base64 PGP messages, as sys/init returns
	// them) and the threshold.
	Create(ctx context.Context, shares []openbao.Token, threshold int) error
}

// RecoveryShareKey is the data key of share i (from 1, as bao prints
// them) in <cluster>-recovery-keys: the binary PGP message, which
// gpg --decrypt opens into the share's hex form.
func RecoveryShareKey(i int) string { return fmt.Sprintf("recovery-key-%d.gpg", i) }

// RecoveryThresholdKey holds the threshold in <cluster>-recovery-keys.
const RecoveryThresholdKey = "threshold"
