package imageverify

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/verify"
)

// verifyBundles checks the Sigstore bundles attached to digest as OCI
// referrers: the bundle's signature under the policy (the key, or the
// certificate, its SCT and the Rekor entry against the trusted root), its
// in-toto subject against the digest (sigstore-go's artifact policy), then
// the claim again through cosign's claim verifier.
func verifyBundles(ctx context.Context, digest name.Digest, h v1.Hash, chk checker) error {
	bundles, _, err := cosign.GetBundles(ctx, digest, chk.co.RegistryClientOpts)
	if none := (*cosign.ErrNoMatchingAttestations)(nil); errors.As(err, &none) {
		return ErrUnsigned
	}
	if err != nil {
		return registryError("list referrers of "+digest.String(), err)
	}
	raw, err := hex.DecodeString(h.Hex)
	if err != nil {
		return fmt.Errorf("%w: digest %s", ErrImageNotFound, h)
	}
	policy := verify.WithArtifactDigest(h.Algorithm, raw)
	var errs []error
	for _, b := range bundles {
		err := verifyBundle(ctx, b, h, policy, chk)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return worst(errs...)
}

func verifyBundle(ctx context.Context, b *sgbundle.Bundle, h v1.Hash, policy verify.ArtifactPolicyOption, chk checker) error {
	claimErr := bundleClaim(b, h)
	if _, err := cosign.VerifyNewBundle(ctx, chk.co, policy, b); err != nil {
		if claimErr != nil {
			return fmt.Errorf("%w (bundle): %w", ErrTampered, claimErr)
		}
		return fmt.Errorf("%w (bundle): %w", chk.mismatch, err)
	}
	if claimErr != nil {
		return fmt.Errorf("%w (bundle): %w", ErrTampered, claimErr)
	}
	return nil
}

// bundleClaim reads the bundle's DSSE envelope as cosign does and checks
// that its in-toto statement names h.
func bundleClaim(b *sgbundle.Bundle, h v1.Hash) error {
	dsse, ok := b.Content.(*protobundle.Bundle_DsseEnvelope)
	if !ok {
		return errors.New("the bundle holds no DSSE envelope")
	}
	payload, err := json.Marshal(dsse.DsseEnvelope)
	if err != nil {
		return fmt.Errorf("read the DSSE envelope: %w", err)
	}
	att, err := static.NewAttestation(payload)
	if err != nil {
		return fmt.Errorf("read the DSSE envelope: %w", err)
	}
	return cosign.IntotoSubjectClaimVerifier(att, h, nil)
}
