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
	// ErrKeylessUnsupported: keyless verification needs Sigstore's trusted
	// root, which this operator does not have offline.
	ErrKeylessUnsupported = errors.New("keyless verification is not supported yet: use publicKey")
	// ErrInvalidPolicy: the public key cannot be parsed.
	ErrInvalidPolicy = errors.New("the verification policy is invalid")
)

// Retryable says the failure may go away by itself; the others need the
// image, its signatures or the policy to change.
func Retryable(err error) bool { return errors.Is(err, ErrRegistry) }
