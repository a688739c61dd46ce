// Package imageverify checks an OpenBao image's cosign signature against a
// public key before the operator runs it, and resolves the tag to the digest
// that was verified, so the pod template can pin exactly that.
//
// It uses cosign v3's library, not v2's: v3 signs in the new bundle format
// (a Sigstore bundle attached as an OCI referrer) by default, which v2's
// verification reports as "no signatures found". Bundles are checked first,
// then classic signatures under the image's .sig tag.
//
// Verification is offline: no transparency log, no certificate timestamps,
// no TUF. Key-based signatures need none of them; keyless signatures need
// Sigstore's trusted root, so keyless policies are refused
// (ErrKeylessUnsupported) until the operator can be given one.
//
// Each signature must name the image's digest in its signed claim, so a
// signature copied from another image is refused: classic signatures go
// through cosign.SimpleClaimVerifier, bundles through the in-toto subject
// (the artifact digest policy and cosign.IntotoSubjectClaimVerifier, since
// a bundle's payload is an in-toto statement, not the simple-signing claim).
package imageverify
