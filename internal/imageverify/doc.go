// Package imageverify checks an OpenBao image's cosign signature against a
// public key or a keyless identity before the operator runs it, and
// resolves the tag to the digest that was verified, so the pod template
// can pin exactly that.
//
// It uses cosign v3's library, not v2's: v3 signs in the new bundle format
// (a Sigstore bundle attached as an OCI referrer) by default, which v2's
// verification reports as "no signatures found". Bundles are checked first,
// then classic signatures under the image's .sig tag.
//
// Verification is offline: the only network peer is the registry. Key-based
// signatures need no transparency log or timestamp. Keyless signatures are
// checked against a Sigstore trusted root the user provides (there is no
// TUF client): the Fulcio certificate's chain and identity, its embedded
// SCT, and the signature's Rekor entry by its signed entry timestamp or
// inclusion proof, never by looking it up. Rekor v2 bundles, which carry
// no integrated time, need an RFC 3161 timestamp of one of the root's
// TSAs instead (cosign's rule).
//
// Each signature must name the image's digest in its signed claim, so a
// signature copied from another image is refused: classic signatures go
// through cosign.SimpleClaimVerifier, bundles through the in-toto subject
// (the artifact digest policy and cosign.IntotoSubjectClaimVerifier, since
// a bundle's payload is an in-toto statement, not the simple-signing claim).
package imageverify
