package release

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/cosign/v3/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	sigpayload "github.com/sigstore/sigstore/pkg/signature/payload"
)

// loadSigner reads the PEM private key: ECDSA P-256, as cosign's keys are.
func loadSigner(pemBytes []byte) (signature.SignerVerifier, error) {
	key, err := cryptoutils.UnmarshalPEMToPrivateKey(pemBytes, cryptoutils.SkipPassword)
	if err != nil {
		return nil, fmt.Errorf("read the signing key (an unencrypted PEM ECDSA P-256 private key): %w", err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("the signing key is a %T, not an ECDSA P-256 key", key)
	}
	sv, err := signature.LoadECDSASignerVerifier(ec, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("load the signing key: %w", err)
	}
	return sv, nil
}

// writePublicKey checks the signing key and writes its public half as
// OutDir/cosign.pub, the key users verify the release with.
func (r *release) writePublicKey(context.Context) error {
	sv, err := loadSigner(r.o.SigningKeyPEM)
	if err != nil {
		return err
	}
	pub, err := sv.PublicKey()
	if err != nil {
		return fmt.Errorf("public key: %w", err)
	}
	pemBytes, err := cryptoutils.MarshalPublicKeyToPEM(pub)
	if err != nil {
		return fmt.Errorf("encode the public key: %w", err)
	}
	path := filepath.Join(r.o.OutDir, "cosign.pub")
	if err := os.WriteFile(path, pemBytes, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	r.signer = sv
	r.res.PublicKey = path
	return nil
}

// signAll signs every pushed artifact by digest.
func (r *release) signAll(ctx context.Context) error {
	for _, d := range r.signed {
		if err := r.sign(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// sign attaches a classic cosign signature (the sha256-<hex>.sig tag) to
// digest: the simple-signing claim naming digest, signed with the key.
// ECDSA signatures are randomised, so the signature manifests differ
// between runs; the artifacts they sign do not.
func (r *release) sign(ctx context.Context, digest name.Digest) error {
	payload, err := (&sigpayload.Cosign{Image: digest}).MarshalJSON()
	if err != nil {
		return fmt.Errorf("claim for %s: %w", digest, err)
	}
	raw, err := r.signer.SignMessage(bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("sign %s: %w", digest, err)
	}
	sig, err := static.NewSignature(payload, base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		return fmt.Errorf("signature of %s: %w", digest, err)
	}
	opts := []ociremote.Option{ociremote.WithRemoteOptions(r.reg.remoteOpts...)}
	se, err := ociremote.SignedEntity(digest, opts...)
	if err != nil {
		return fmt.Errorf("read %s: %w", digest, err)
	}
	signed, err := mutate.AttachSignatureToEntity(se, sig)
	if err != nil {
		return fmt.Errorf("attach the signature to %s: %w", digest, err)
	}
	if err := ociremote.WriteSignatures(digest.Repository, signed, opts...); err != nil {
		return fmt.Errorf("push the signature of %s: %w", digest, err)
	}
	r.o.Logf("signed %s", digest)
	return nil
}

// resolveOpenBao pins the default OpenBao image by its digest now.
func (r *release) resolveOpenBao(context.Context) error {
	d, err := r.reg.resolve(r.o.OpenBaoImage)
	if err != nil {
		return fmt.Errorf("OPENBAO_IMAGE: %w", err)
	}
	r.res.OpenBao = d.String()
	return nil
}
