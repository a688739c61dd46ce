package imageverify

import "errors"

// Failures, each wrapped with the image and what was found. None carries a
// credential: registry errors name the URL and status, never headers.
var (
	// ErrUnsigned: the digest has neither a bundle nor a classic signature.
	ErrUnsigned = errors.New("the image has no cosign signature")
	// ErrWrongKey: signatures exist, none verifies with the key.
	ErrWrongKey = errors.New("no signature of the image verifies with the public key")
	// ErrTampered: a signature verifies, but its signed claim names another
	// digest: it was copied from another image.
	ErrTampered = errors.New("the image's signature was made for another digest")
	// ErrRegistry: the registry could not be reached or refused the request
	// (network, TLS, 401/403, 5xx). Retrying may help.
	ErrRegistry = errors.New("the registry could not be reached or refused the request")
	// ErrImageNotFound: the registry has no such repository or tag.
	ErrImageNotFound = errors.New("the image is not in the registry")
	// ErrWrongIdentity: signatures exist, none verifies under the keyless
	// policy: another signer, a certificate of a CA the trusted root does
	// not hold, no SCT or Rekor entry the root's logs signed, or no
	// certificate at all.
	ErrWrongIdentity = errors.New("no signature of the image verifies with the keyless identity and trusted root")
	// ErrInvalidPolicy: the public key, the subject expression or the
	// trusted root cannot be used.
	ErrInvalidPolicy = errors.New("the verification policy is invalid")
)

// Retryable says the failure may go away by itself; the others need the
// image, its signatures or the policy to change.
func Retryable(err error) bool { return errors.Is(err, ErrRegistry) }
