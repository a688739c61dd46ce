package imageverify

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
)

// verifyClassic checks the signatures under the digest's .sig tag, each
// under the policy and cosign.SimpleClaimVerifier: without the claim check
// a signature copied from another digest verifies. A keyless signature is
// checked offline by its Rekor bundle annotation (the signed entry
// timestamp, against the trusted root's logs); one without it is refused,
// as cosign, Offline, never looks the entry up.
func verifyClassic(ctx context.Context, digest name.Digest, h v1.Hash, chk checker) error {
	co := chk.co
	tag, err := ociremote.SignatureTag(digest, co.RegistryClientOpts...)
	if err != nil {
		return registryError("name the signature tag of "+digest.String(), err)
	}
	found, err := ociremote.Signatures(tag, co.RegistryClientOpts...)
	if err != nil {
		return registryError("read "+tag.String(), err)
	}
	list, err := found.Get()
	if err != nil {
		return registryError("read "+tag.String(), err)
	}
	if len(list) == 0 {
		return ErrUnsigned
	}
	withClaim := *co
	withClaim.ClaimVerifier = cosign.SimpleClaimVerifier
	var errs []error
	for _, sig := range list {
		_, err := cosign.VerifyImageSignature(ctx, sig, h, &withClaim)
		if err == nil {
			return nil
		}
		// Which check failed: the claim alone names another digest, or the
		// signature does not verify with the key.
		if claimErr := cosign.SimpleClaimVerifier(sig, h, nil); claimErr != nil {
			errs = append(errs, fmt.Errorf("%w (signature): %w", ErrTampered, claimErr))
			continue
		}
		errs = append(errs, fmt.Errorf("%w (signature): %w", chk.mismatch, err))
	}
	return worst(errs...)
}
