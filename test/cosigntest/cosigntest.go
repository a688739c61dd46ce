// Package cosigntest runs go-containerregistry's registry on loopback and
// signs images in it with cosign's own library, in both formats: classic
// signatures under the .sig tag and Sigstore bundles as OCI referrers. A
// signature may name another digest than the image it is attached to, to
// forge a copied signature.
package cosigntest

import (
	"context"
	"encoding/base64"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	intotov1 "github.com/in-toto/attestation/go/v1"
	cbundle "github.com/sigstore/cosign/v3/pkg/cosign/bundle"
	"github.com/sigstore/cosign/v3/pkg/oci"
	"github.com/sigstore/cosign/v3/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	"github.com/sigstore/cosign/v3/pkg/types"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	sigpayload "github.com/sigstore/sigstore/pkg/signature/payload"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// Registry is go-containerregistry's registry on loopback, with the
// referrers API, optional basic auth, and a log of the requests it served.
type Registry struct {
	Host string
	auth authn.Authenticator // what the test itself pushes with
	srv  *httptest.Server
	mu   sync.Mutex
	log  []string
}

// Close stops the registry, to stand for one that cannot be reached.
func (r *Registry) Close() { r.srv.Close() }

// New starts a registry; with a user, it asks every request for basic auth.
func New(t *testing.T, user, password string) *Registry {
	t.Helper()
	r := &Registry{auth: authn.Anonymous}
	inner := registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0)))
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if user != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		r.mu.Lock()
		r.log = append(r.log, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		inner.ServeHTTP(w, req)
	})
	r.srv = httptest.NewServer(h)
	t.Cleanup(r.srv.Close)
	r.Host = strings.TrimPrefix(r.srv.URL, "http://")
	if user != "" {
		r.auth = &authn.Basic{Username: user, Password: password}
	}
	return r
}

// Requests returns and clears the request log.
func (r *Registry) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.log
	r.log = nil
	return out
}

func (r *Registry) opts() []ociremote.Option {
	return []ociremote.Option{ociremote.WithRemoteOptions(remote.WithAuth(r.auth))}
}

// Push writes a random image under repo:tag and returns its digest.
func (r *Registry) Push(t *testing.T, repo, tag string) name.Digest {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(r.Host + "/" + repo + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(r.auth)); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return ref.Context().Digest(d.String())
}

// NewKey is a new ECDSA P-256 key pair, as cosign generates.
func NewKey(t *testing.T) *sign.EphemeralKeypair {
	t.Helper()
	kp, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// PublicPEM is the key's public half, PEM.
func PublicPEM(t *testing.T, kp *sign.EphemeralKeypair) string {
	t.Helper()
	p, err := kp.GetPublicKeyPem()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// SignClassic attaches to target a classic cosign signature (the .sig tag)
// whose signed claim names claim: target itself, or another digest to
// forge a copied signature.
func (r *Registry) SignClassic(t *testing.T, kp *sign.EphemeralKeypair, target, claim name.Digest) {
	t.Helper()
	payload, err := (&sigpayload.Cosign{Image: claim}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	raw, _, err := kp.SignData(context.Background(), payload)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := static.NewSignature(payload, base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		t.Fatal(err)
	}
	r.attachClassic(t, target, sig)
}

// attachClassic writes sig under target's .sig tag.
func (r *Registry) attachClassic(t *testing.T, target name.Digest, sig oci.Signature) {
	t.Helper()
	se, err := ociremote.SignedEntity(target, r.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := mutate.AttachSignatureToEntity(se, sig)
	if err != nil {
		t.Fatal(err)
	}
	if err := ociremote.WriteSignatures(target.Repository, signed, r.opts()...); err != nil {
		t.Fatal(err)
	}
}

// SignBundle attaches to target, as an OCI referrer, a Sigstore bundle as
// `cosign sign` v3 makes it: an in-toto statement naming claim, signed into
// a DSSE envelope by cosign's bundle signer, without transparency log.
func (r *Registry) SignBundle(t *testing.T, kp *sign.EphemeralKeypair, target, claim name.Digest) {
	t.Helper()
	content := &sign.DSSEData{Data: statement(t, claim), PayloadType: "application/vnd.in-toto+json"}
	b, err := cbundle.SignData(context.Background(), content, kp, "", nil, nil, &root.SigningConfig{}, nil, cbundle.SignOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.attachBundle(t, target, b)
}

// attachBundle writes the JSON bundle b as an OCI referrer of target.
func (r *Registry) attachBundle(t *testing.T, target name.Digest, b []byte) {
	t.Helper()
	if err := ociremote.WriteAttestationNewBundleFormat(target, b, types.CosignSignPredicateType, r.opts()...); err != nil {
		t.Fatal(err)
	}
}

// statement is the in-toto statement `cosign sign` v3 signs: its subject
// is claim.
func statement(t *testing.T, claim name.Digest) []byte {
	t.Helper()
	alg, hex, _ := strings.Cut(claim.DigestStr(), ":")
	annotations, _ := structpb.NewStruct(nil)
	st := &intotov1.Statement{
		Type:          intotov1.StatementTypeUri,
		Subject:       []*intotov1.ResourceDescriptor{{Digest: map[string]string{alg: hex}, Annotations: annotations}},
		PredicateType: types.CosignSignPredicateType,
		Predicate:     &structpb.Struct{},
	}
	payload, err := protojson.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return payload
}
