package cosigntest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"math/big"
	"net/url"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	cttls "github.com/google/certificate-transparency-go/tls"
	ctx509 "github.com/google/certificate-transparency-go/x509"
	ctx509util "github.com/google/certificate-transparency-go/x509util"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	cbundle "github.com/sigstore/cosign/v3/pkg/cosign/bundle"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/rekor/pkg/pki"
	rekortypes "github.com/sigstore/rekor/pkg/types"
	_ "github.com/sigstore/rekor/pkg/types/hashedrekord/v0.0.1" // registers the entry kind classic signatures log
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	sigpayload "github.com/sigstore/sigstore/pkg/signature/payload"
	"google.golang.org/protobuf/encoding/protojson"
)

// Sigstore is a private Sigstore on this machine for keyless signing: a
// Fulcio CA that issues short-lived certificates with an embedded SCT
// from a CT log of its own, and sigstore-go's VirtualSigstore as the
// Rekor log (signed entry timestamps, inclusion proofs) and the TSA.
// The CA and the CT log are ours, not the VirtualSigstore's, because its
// certificates carry no SCT and cosign requires one.
type Sigstore struct {
	vs             *ca.VirtualSigstore
	root, fulcio   *x509.Certificate
	fulcioKey      *ecdsa.PrivateKey
	ctKey          *ecdsa.PrivateKey
	validFrom, end time.Time
	noSCT          bool
}

// WithoutSCT is this Sigstore issuing certificates without an SCT, as a
// CA that bypassed certificate transparency would.
func (s *Sigstore) WithoutSCT() *Sigstore {
	c := *s
	c.noSCT = true
	return &c
}

// WithLogOf is this Sigstore's CA with other's Rekor log and TSA: a
// signature certified by a trusted CA, logged where the root does not
// look.
func (s *Sigstore) WithLogOf(other *Sigstore) *Sigstore {
	c := *s
	c.vs = other.vs
	return &c
}

// NewSigstore starts a private Sigstore, valid from an hour ago to an
// hour from now.
func NewSigstore(t *testing.T) *Sigstore {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	rootCert, rootKey, err := ca.GenerateRootCa()
	if err != nil {
		t.Fatal(err)
	}
	fulcio, fulcioKey, err := ca.GenerateFulcioIntermediate(rootCert, rootKey)
	if err != nil {
		t.Fatal(err)
	}
	ctKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	return &Sigstore{vs: vs, root: rootCert, fulcio: fulcio, fulcioKey: fulcioKey, ctKey: ctKey,
		validFrom: now.Add(-time.Hour), end: now.Add(time.Hour)}
}

// TrustedRootJSON is the Sigstore TrustedRoot of this Sigstore, as
// `cosign trusted-root create` writes it.
func (s *Sigstore) TrustedRootJSON(t *testing.T) []byte {
	t.Helper()
	logs := map[string]*root.TransparencyLog{}
	for id, l := range s.vs.RekorLogs() {
		// The VirtualSigstore's ID is the hex string; the trusted root
		// holds the raw key ID.
		raw, err := hex.DecodeString(id)
		if err != nil {
			t.Fatal(err)
		}
		copied := *l
		copied.ID = raw
		logs[id] = &copied
	}
	ctID := logID(t, s.ctKey.Public())
	ctLogs := map[string]*root.TransparencyLog{hex.EncodeToString(ctID): {
		BaseURL: "https://ctfe.localhost", ID: ctID, HashFunc: crypto.SHA256, PublicKey: s.ctKey.Public(),
		SignatureHashFunc: crypto.SHA256, ValidityPeriodStart: s.validFrom, ValidityPeriodEnd: s.end,
	}}
	cas := []root.CertificateAuthority{&root.FulcioCertificateAuthority{
		Root: s.root, Intermediates: []*x509.Certificate{s.fulcio}, URI: "https://fulcio.localhost",
		ValidityPeriodStart: s.validFrom, ValidityPeriodEnd: s.end,
	}}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, cas, ctLogs, s.vs.TimestampingAuthorities(), logs)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func logID(t *testing.T, pub crypto.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	id := sha256.Sum256(der)
	return id[:]
}

// certify issues a certificate for a fresh key to subject (an e-mail, or
// a URI such as a workflow's) from the OIDC issuer, with an embedded SCT.
func (s *Sigstore) certify(t *testing.T, issuer, subject string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	issuerDER, err := asn1.MarshalWithParams(issuer, "utf8")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		NotBefore:    now.Add(-time.Minute), NotAfter: now.Add(10 * time.Minute),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		// The issuer twice, as Fulcio writes it: raw under the deprecated
		// OID (cosign's classic path reads only that one), DER under the
		// new one.
		ExtraExtensions: []pkix.Extension{
			{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 1}, Value: []byte(issuer)},
			{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}, Value: issuerDER},
		},
	}
	if u, err := url.Parse(subject); err == nil && u.Scheme != "" {
		tmpl.URIs = []*url.URL{u}
	} else {
		tmpl.EmailAddresses = []string{subject}
	}
	pre := s.issue(t, tmpl, &key.PublicKey)
	if s.noSCT {
		return pre, key
	}
	tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, s.sctExtension(t, pre))
	return s.issue(t, tmpl, &key.PublicKey), key
}

func (s *Sigstore) issue(t *testing.T, tmpl *x509.Certificate, pub crypto.PublicKey) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.fulcio, pub, s.fulcioKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// sctExtension is the CT log's SCT over pre, the certificate without it,
// as Fulcio embeds it (the verifier strips the extension to check it).
func (s *Sigstore) sctExtension(t *testing.T, pre *x509.Certificate) pkix.Extension {
	t.Helper()
	sct := ct.SignedCertificateTimestamp{SCTVersion: ct.V1, Timestamp: uint64(time.Now().UnixMilli())}
	copy(sct.LogID.KeyID[:], logID(t, s.ctKey.Public()))
	entry := ct.LogEntry{Leaf: ct.MerkleTreeLeaf{Version: ct.V1, LeafType: ct.TimestampedEntryLeafType,
		TimestampedEntry: &ct.TimestampedEntry{Timestamp: sct.Timestamp, EntryType: ct.PrecertLogEntryType,
			PrecertEntry: &ct.PreCert{IssuerKeyHash: sha256.Sum256(s.fulcio.RawSubjectPublicKeyInfo), TBSCertificate: pre.RawTBSCertificate}}}}
	input, err := ct.SerializeSCTSignatureInput(sct, entry)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(input)
	sig, err := ecdsa.SignASN1(rand.Reader, s.ctKey, h[:])
	if err != nil {
		t.Fatal(err)
	}
	sct.Signature = ct.DigitallySigned{Algorithm: cttls.SignatureAndHashAlgorithm{Hash: cttls.SHA256, Signature: cttls.ECDSA}, Signature: sig}
	list, err := ctx509util.MarshalSCTsIntoSCTList([]*ct.SignedCertificateTimestamp{&sct})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cttls.Marshal(*list)
	if err != nil {
		t.Fatal(err)
	}
	value, err := asn1.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	return pkix.Extension{Id: asn1.ObjectIdentifier(ctx509.OIDExtensionCTSCT), Value: value}
}

// SignKeyless attaches to target, as an OCI referrer, a Sigstore bundle
// as keyless `cosign sign` v3 makes it: an in-toto statement naming claim
// in a DSSE envelope, signed with a key certified to subject from issuer,
// its Rekor entry (signed entry timestamp and inclusion proof) and a
// TSA timestamp.
func (r *Registry) SignKeyless(t *testing.T, s *Sigstore, issuer, subject string, target, claim name.Digest) {
	t.Helper()
	cert, key := s.certify(t, issuer, subject)
	const payloadType = "application/vnd.in-toto+json"
	payload := statement(t, claim)
	sig := signSHA256(t, key, dsse.PAE(payloadType, payload))
	env := &dsse.Envelope{PayloadType: payloadType, Payload: base64.StdEncoding.EncodeToString(payload),
		Signatures: []dsse.Signature{{Sig: base64.StdEncoding.EncodeToString(sig)}}}
	integrated := time.Now().Unix()
	entry, err := s.vs.GenerateTlogEntry(cert, env, sig, integrated, true)
	if err != nil {
		t.Fatal(err)
	}
	tle := entry.TransparencyLogEntry()
	tle.KindVersion = &protorekor.KindVersion{Kind: "dsse", Version: "0.0.1"}
	tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: s.set(t, tle.CanonicalizedBody, integrated, tle.LogIndex)}
	tsr, err := s.vs.TimestampResponse(sig)
	if err != nil {
		t.Fatal(err)
	}
	pb := &protobundle.Bundle{
		MediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content:     &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: cert.Raw}},
			TlogEntries: []*protorekor.TransparencyLogEntry{tle},
			TimestampVerificationData: &protobundle.TimestampVerificationData{
				Rfc3161Timestamps: []*protocommon.RFC3161SignedTimestamp{{SignedTimestamp: tsr}},
			},
		},
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload: payload, PayloadType: payloadType, Signatures: []*protodsse.Signature{{Sig: sig}},
		}},
	}
	if _, err := sgbundle.NewBundle(pb); err != nil {
		t.Fatalf("the keyless bundle is not valid: %v", err)
	}
	b, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	r.attachBundle(t, target, b)
}

// SignKeylessClassic attaches to target a classic keyless signature under
// the .sig tag, as `cosign sign` v2 makes it: the simple-signing claim
// naming claim, the certificate and its chain, and the Rekor bundle (a
// hashedrekord entry and its signed entry timestamp).
func (r *Registry) SignKeylessClassic(t *testing.T, s *Sigstore, issuer, subject string, target, claim name.Digest) {
	t.Helper()
	cert, key := s.certify(t, issuer, subject)
	payload, err := (&sigpayload.Cosign{Image: claim}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	sig := signSHA256(t, key, payload)
	certPEM, err := cryptoutils.MarshalCertificateToPEM(cert)
	if err != nil {
		t.Fatal(err)
	}
	chainPEM, err := cryptoutils.MarshalCertificatesToPEM([]*x509.Certificate{s.fulcio, s.root})
	if err != nil {
		t.Fatal(err)
	}
	body := hashedRekord(t, payload, certPEM, sig)
	integrated := time.Now().Unix()
	id, err := s.vs.RekorLogID()
	if err != nil {
		t.Fatal(err)
	}
	rb := &cbundle.RekorBundle{
		SignedEntryTimestamp: s.set(t, body, integrated, 7),
		Payload:              cbundle.RekorPayload{Body: base64.StdEncoding.EncodeToString(body), IntegratedTime: integrated, LogIndex: 7, LogID: id},
	}
	signed, err := static.NewSignature(payload, base64.StdEncoding.EncodeToString(sig),
		static.WithCertChain(certPEM, chainPEM), static.WithBundle(rb))
	if err != nil {
		t.Fatal(err)
	}
	r.attachClassic(t, target, signed)
}

// set is the Rekor log's signed entry timestamp over an entry.
func (s *Sigstore) set(t *testing.T, body []byte, integrated, index int64) []byte {
	t.Helper()
	id, err := s.vs.RekorLogID()
	if err != nil {
		t.Fatal(err)
	}
	set, err := s.vs.RekorSignPayload(tlog.RekorPayload{
		Body: base64.StdEncoding.EncodeToString(body), IntegratedTime: integrated, LogIndex: index, LogID: id,
	})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// hashedRekord is the canonical Rekor entry of a classic signature.
func hashedRekord(t *testing.T, payload, certPEM, sig []byte) []byte {
	t.Helper()
	digest := sha256.Sum256(payload)
	ctx := context.Background()
	proposed, err := rekortypes.NewProposedEntry(ctx, "hashedrekord", "0.0.1", rekortypes.ArtifactProperties{
		PublicKeyBytes: [][]byte{certPEM}, PKIFormat: string(pki.X509),
		ArtifactHash: hex.EncodeToString(digest[:]), SignatureBytes: sig,
	})
	if err != nil {
		t.Fatal(err)
	}
	impl, err := rekortypes.CreateVersionedEntry(proposed)
	if err != nil {
		t.Fatal(err)
	}
	body, err := rekortypes.CanonicalizeEntry(ctx, impl)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func signSHA256(t *testing.T, key *ecdsa.PrivateKey, data []byte) []byte {
	t.Helper()
	h := sha256.Sum256(data)
	sig, err := ecdsa.SignASN1(rand.Reader, key, h[:])
	if err != nil {
		t.Fatal(err)
	}
	return sig
}
