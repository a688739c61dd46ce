package imageverify

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	sigs "github.com/sigstore/cosign/v3/pkg/signature"
	"github.com/sigstore/sigstore-go/pkg/root"
)

// Policy is what a signature must verify against: a key, or a keyless
// identity.
type Policy struct {
	// PublicKey is a PEM public key.
	PublicKey string
	// Keyless, when set, asks for a Fulcio certificate of this identity.
	Keyless *Identity
}

// Identity is a keyless signer: the OIDC issuer and subject (exact or
// regular expression), and the trusted root its certificate must chain to.
type Identity struct {
	Issuer, Subject, SubjectRegExp string
	// TrustedRoot is a Sigstore TrustedRoot, JSON: the Fulcio CAs, CT logs,
	// Rekor logs and TSAs everything is checked against, offline.
	TrustedRoot []byte
	// TrustedRootSource says where TrustedRoot was read, for messages.
	TrustedRootSource string
}

// String names the identity in messages.
func (i *Identity) String() string {
	if i.SubjectRegExp != "" {
		return fmt.Sprintf("issuer %q, subject matching %q", i.Issuer, i.SubjectRegExp)
	}
	return fmt.Sprintf("issuer %q, subject %q", i.Issuer, i.Subject)
}

// ID identifies the policy in the cache and in status: a hash, so a key
// never has to be compared or shown in full.
func (p Policy) ID() string {
	h := sha256.New()
	write := func(parts ...string) {
		for _, s := range parts {
			h.Write([]byte(s))
			h.Write([]byte{0})
		}
	}
	write("key", strings.TrimSpace(p.PublicKey))
	if k := p.Keyless; k != nil {
		// The root's content, not its source: a root replaced in place
		// re-verifies, the same root under another name does not.
		root := sha256.Sum256(k.TrustedRoot)
		write("keyless", k.Issuer, k.Subject, k.SubjectRegExp, hex.EncodeToString(root[:]))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}

// Request is one image to verify.
type Request struct {
	// Image is repository:tag (or repository@digest).
	Image  string
	Policy Policy
	// Keychain holds the registry credentials (the cluster's
	// imagePullSecrets); nil is anonymous.
	Keychain authn.Keychain
}

// Format is how the verified signature was stored.
type Format string

// Signature formats.
const (
	FormatBundle    Format = "bundle"    // Sigstore bundle, an OCI referrer
	FormatSignature Format = "signature" // classic, the sha256-<hex>.sig tag
)

// Result is a verified image.
type Result struct {
	// Digest is the verified manifest digest, sha256:<hex>.
	Digest string
	Format Format
	// Cached says the signature was verified earlier and not fetched again;
	// the tag was resolved anyway.
	Cached bool
}

// Verifier verifies images; the reconciler holds one.
type Verifier interface {
	Verify(ctx context.Context, req Request) (Result, error)
}

// Cosign verifies with cosign's library against the registry.
type Cosign struct {
	// Transport reaches the registries; nil is remote.DefaultTransport.
	Transport http.RoundTripper
	cache     *lru
}

// DefaultCacheSize bounds the verified digests remembered: a few per
// cluster, across many clusters.
const DefaultCacheSize = 512

// NewCosign returns a verifier that remembers up to size verified
// (digest, policy) pairs; size < 1 takes DefaultCacheSize. Only successes
// are cached: an image unsigned now may be signed later.
func NewCosign(size int, transport http.RoundTripper) *Cosign {
	if size < 1 {
		size = DefaultCacheSize
	}
	return &Cosign{Transport: transport, cache: newLRU(size)}
}

// Verify resolves req.Image to its digest, then checks the digest's
// bundles and, without a good one, its classic signatures.
func (c *Cosign) Verify(ctx context.Context, req Request) (Result, error) {
	chk, err := newChecker(req.Policy)
	if err != nil {
		return Result{}, err
	}
	ref, err := name.ParseReference(req.Image)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %q is not an image reference: %w", ErrImageNotFound, req.Image, err)
	}
	opts := c.registryOptions(ctx, req.Keychain)
	digest, err := ociremote.ResolveDigest(ref, opts...)
	if err != nil {
		return Result{}, registryError("resolve "+req.Image, err)
	}
	key := cacheKey{digest: digest.String(), policy: req.Policy.ID()}
	if f, ok := c.cache.get(key); ok {
		return Result{Digest: digest.DigestStr(), Format: f, Cached: true}, nil
	}
	chk.co.RegistryClientOpts = opts
	format, err := verifyDigest(ctx, digest, chk)
	if err != nil {
		return Result{}, fmt.Errorf("verify %s (%s): %w", req.Image, digest.DigestStr(), err)
	}
	c.cache.add(key, format)
	return Result{Digest: digest.DigestStr(), Format: format}, nil
}

func (c *Cosign) registryOptions(ctx context.Context, kc authn.Keychain) []ociremote.Option {
	if kc == nil {
		kc = authn.NewMultiKeychain() // anonymous
	}
	ro := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
	if c.Transport != nil {
		ro = append(ro, remote.WithTransport(c.Transport))
	}
	return []ociremote.Option{ociremote.WithRemoteOptions(ro...)}
}

// checker is how signatures are checked under one policy.
type checker struct {
	co *cosign.CheckOpts
	// mismatch is the failure of a signature that does not verify under
	// the policy: ErrWrongKey or ErrWrongIdentity, naming the identity.
	mismatch error
}

// newChecker turns a policy into cosign's options. A key needs no
// transparency log, SCT or timestamp. A keyless identity needs them all,
// checked offline against the trusted root (Offline and no RekorClient:
// cosign never looks an entry up): the certificate chains to one of its
// Fulcio CAs and carries an SCT of one of its CT logs, and the signature's
// Rekor entry is signed by one of its logs, whose time falls within the
// certificate's validity.
func newChecker(p Policy) (checker, error) {
	if p.Keyless == nil {
		verifier, err := sigs.LoadPublicKeyRaw([]byte(p.PublicKey), crypto.SHA256)
		if err != nil {
			return checker{}, fmt.Errorf("%w: publicKey: %w", ErrInvalidPolicy, err)
		}
		co := &cosign.CheckOpts{SigVerifier: verifier, IgnoreTlog: true, IgnoreSCT: true, Offline: true}
		return checker{co: co, mismatch: ErrWrongKey}, nil
	}
	k := p.Keyless
	if k.SubjectRegExp != "" {
		if _, err := regexp.Compile(k.SubjectRegExp); err != nil {
			return checker{}, fmt.Errorf("%w: keyless.subjectRegExp: %w", ErrInvalidPolicy, err)
		}
	}
	tr, err := root.NewTrustedRootFromJSON(k.TrustedRoot)
	if err != nil {
		return checker{}, fmt.Errorf("%w: the trusted root in %s is no Sigstore TrustedRoot: %w", ErrInvalidPolicy, k.TrustedRootSource, err)
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 || len(tr.RekorLogs()) == 0 {
		return checker{}, fmt.Errorf("%w: the trusted root in %s has no Fulcio certificate authority or no Rekor log", ErrInvalidPolicy, k.TrustedRootSource)
	}
	co := &cosign.CheckOpts{
		TrustedMaterial: tr, Offline: true,
		Identities: []cosign.Identity{{Issuer: k.Issuer, Subject: k.Subject, SubjectRegExp: k.SubjectRegExp}},
	}
	return checker{co: co, mismatch: fmt.Errorf("%w (%s; trusted root from %s)", ErrWrongIdentity, k, k.TrustedRootSource)}, nil
}

// verifyDigest tries bundles, then classic signatures; a failure says the
// most telling thing found across both.
func verifyDigest(ctx context.Context, digest name.Digest, chk checker) (Format, error) {
	h, err := v1.NewHash(digest.DigestStr())
	if err != nil {
		return "", fmt.Errorf("%w: digest %s: %w", ErrImageNotFound, digest.DigestStr(), err)
	}
	bundleErr := verifyBundles(ctx, digest, h, chk)
	if bundleErr == nil {
		return FormatBundle, nil
	}
	if errors.Is(bundleErr, ErrRegistry) {
		return "", bundleErr
	}
	sigErr := verifyClassic(ctx, digest, h, chk)
	if sigErr == nil {
		return FormatSignature, nil
	}
	return "", worst(bundleErr, sigErr)
}

// worst picks the failure that tells most: a registry error, then a
// tampered signature, then a wrong key or identity, then none at all.
func worst(errs ...error) error {
	for _, target := range []error{ErrRegistry, ErrTampered, ErrWrongKey, ErrWrongIdentity} {
		for _, err := range errs {
			if errors.Is(err, target) {
				return err
			}
		}
	}
	return errs[len(errs)-1]
}

// registryError turns a registry failure into ErrImageNotFound (404, a
// name the registry does not know) or ErrRegistry.
func registryError(action string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %s: %w", ErrImageNotFound, action, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrRegistry, action, err)
}

// CheckPolicy says whether policy can verify anything: its key parses, or
// its identity's regular expression and trusted root do. Errors are
// ErrInvalidPolicy.
func CheckPolicy(p Policy) error {
	_, err := newChecker(p)
	return err
}
