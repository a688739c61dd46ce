package pki

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testSpec(opts ...func(*Spec)) Spec {
	s := Spec{
		ClusterName:     "bao",
		Namespace:       "vault",
		HeadlessService: "bao-internal",
		ClientService:   "bao",
		Replicas:        3,
		RotationPeriod:  24 * time.Hour,
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func withReplicas(n int32) func(*Spec)       { return func(s *Spec) { s.Replicas = n } }
func withExtraSANs(x ...string) func(*Spec)  { return func(s *Spec) { s.ExtraSANs = x } }
func withPeriod(d time.Duration) func(*Spec) { return func(s *Spec) { s.RotationPeriod = d } }

// caAt creates a CA as if issued at t.
func caAt(t *testing.T, spec Spec, at time.Time) *pair {
	t.Helper()
	ca, err := newCA(spec, at, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func serverAt(t *testing.T, ca *pair, spec Spec, at time.Time) *pair {
	t.Helper()
	leaf, err := issueServer(ca, spec, at, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// observed assembles the two Secrets; the bundle is the given CAs in order.
func observed(ca, next, server *pair, bundle ...*pair) Observed {
	var b []byte
	for _, c := range bundle {
		b = append(b, c.certPEM...)
	}
	o := Observed{CA: CAMaterial{CertPEM: ca.certPEM, KeyPEM: ca.keyPEM, BundlePEM: b}}
	if next != nil {
		o.CA.NextCertPEM, o.CA.NextKeyPEM = next.certPEM, next.keyPEM
	}
	if server != nil {
		o.Server = ServerMaterial{CertPEM: server.certPEM, KeyPEM: server.keyPEM, BundlePEM: b}
	}
	return o
}

type decideCase struct {
	name     string
	obs      func(t *testing.T) Observed
	spec     Spec
	now      time.Time
	reason   Reason
	ca       CAAction
	server   bool
	bundle   bool
	contains string
}

// fixtures are the shared starting points of the decision table.
type fixtures struct {
	spec      Spec
	fresh     func(t *testing.T) Observed
	caNearEnd time.Time // issue time of a CA with less than CARenewBefore left at t0
}

func newFixtures() fixtures {
	spec := testSpec()
	return fixtures{
		spec: spec,
		fresh: func(t *testing.T) Observed {
			ca := caAt(t, spec, t0)
			return observed(ca, nil, serverAt(t, ca, spec, t0), ca)
		},
		caNearEnd: t0.Add(-spec.CAValidity() + spec.CARenewBefore() - time.Minute),
	}
}

func decideCases() []decideCase {
	f := newFixtures()
	return slices.Concat(caCases(f), serverCases(f), bundleCases(f))
}

func caCases(f fixtures) []decideCase {
	spec, fresh, caNearEnd := f.spec, f.fresh, f.caNearEnd
	return []decideCase{
		{name: "no Secrets yet: a new CA and server certificate are issued",
			obs: func(*testing.T) Observed { return Observed{} }, spec: spec, now: t0,
			reason: ReasonMissing, ca: CAReplace, server: true, bundle: true},
		{name: "CA near expiry publishes a successor and keeps signing with the current CA",
			obs: func(t *testing.T) Observed {
				ca := caAt(t, spec, caNearEnd)
				return observed(ca, nil, serverAt(t, ca, spec, t0), ca)
			}, spec: spec, now: t0, reason: ReasonCANearExpiry, ca: CAStageNext, bundle: true},
		{name: "successor published for less than the propagation delay: wait",
			obs: func(t *testing.T) Observed {
				ca, next := caAt(t, spec, caNearEnd), caAt(t, spec, t0)
				return observed(ca, next, serverAt(t, ca, spec, t0), ca, next)
			}, spec: spec, now: t0.Add(spec.Propagation() - time.Second), reason: ReasonFresh},
		{name: "successor published for the propagation delay is promoted and the server reissued",
			obs: func(t *testing.T) Observed {
				ca, next := caAt(t, spec, caNearEnd), caAt(t, spec, t0)
				return observed(ca, next, serverAt(t, ca, spec, t0), ca, next)
			}, spec: spec, now: t0.Add(spec.Propagation()),
			reason: ReasonCAPromoted, ca: CAPromoteNext, server: true, bundle: true},
		{name: "expired CA is replaced at once and the server reissued",
			obs: fresh, spec: spec, now: t0.Add(spec.CAValidity()),
			reason: ReasonExpired, ca: CAReplace, server: true, bundle: true, contains: "CA expired"},
		{name: "garbage PEM in the CA key replaces the CA",
			obs: func(t *testing.T) Observed {
				o := fresh(t)
				o.CA.KeyPEM = []byte("not pem at all")
				return o
			}, spec: spec, now: t0, reason: ReasonInvalidPEM, ca: CAReplace, server: true, bundle: true, contains: "CA Secret"},
		{name: "a CA key from another CA is a key mismatch",
			obs: func(t *testing.T) Observed {
				o := fresh(t)
				o.CA.KeyPEM = caAt(t, spec, t0).keyPEM
				return o
			}, spec: spec, now: t0, reason: ReasonKeyMismatch, ca: CAReplace, server: true, bundle: true},
		{name: "garbage in the successor CA stages a new successor",
			obs: func(t *testing.T) Observed {
				o := fresh(t)
				o.CA.NextCertPEM, o.CA.NextKeyPEM = []byte("x"), []byte("y")
				return o
			}, spec: spec, now: t0, reason: ReasonInvalidPEM, ca: CAStageNext, bundle: true, contains: "successor"},
	}
}

func serverCases(f fixtures) []decideCase {
	spec, fresh, p := f.spec, f.fresh, f.spec.rotationPeriod()
	return []decideCase{
		{name: "fresh material matching the spec: nothing to do",
			obs: fresh, spec: spec, now: t0.Add(time.Hour), reason: ReasonFresh},
		{name: "server certificate one minute inside the rotation window is reissued",
			obs: fresh, spec: spec, now: t0.Add(p - spec.RenewBefore() + time.Minute),
			reason: ReasonWithinRotationWindow, server: true, contains: "rotation window"},
		{name: "server certificate one minute before the window is kept",
			obs: fresh, spec: spec, now: t0.Add(p - spec.RenewBefore() - time.Minute), reason: ReasonFresh},
		{name: "expired server certificate is reissued",
			obs: fresh, spec: spec, now: t0.Add(p + time.Minute),
			reason: ReasonExpired, server: true, contains: "expired"},
		{name: "scaling out beyond the certificate's ordinals changes the SANs",
			obs: fresh, spec: testSpec(withReplicas(5)), now: t0.Add(time.Hour),
			reason: ReasonSANsChanged, server: true, contains: "added bao-3.bao-internal, "},
		{name: "scaling in drops SANs too",
			obs: fresh, spec: testSpec(withReplicas(1)), now: t0.Add(time.Hour),
			reason: ReasonSANsChanged, server: true, contains: "removed"},
		{name: "a new extra SAN is added",
			obs: fresh, spec: testSpec(withExtraSANs("bao.example.com", "10.0.0.7")), now: t0.Add(time.Hour),
			reason: ReasonSANsChanged, server: true, contains: "10.0.0.7"},
		{name: "a shorter rotation period reissues a certificate that outlives it",
			obs: fresh, spec: testSpec(withPeriod(time.Hour)), now: t0.Add(time.Minute),
			reason: ReasonRotationPeriodChanged, server: true},
		{name: "server key that does not match the certificate is a key mismatch",
			obs: func(t *testing.T) Observed {
				o := fresh(t)
				o.Server.KeyPEM = serverAt(t, caAt(t, spec, t0), spec, t0).keyPEM
				return o
			}, spec: spec, now: t0, reason: ReasonKeyMismatch, server: true},
		{name: "garbage PEM in the server certificate is reissued with a clear message",
			obs: func(t *testing.T) Observed {
				o := fresh(t)
				o.Server.CertPEM = []byte("-----BEGIN CERTIFICATE-----\nZ2FyYmFnZQ==\n-----END CERTIFICATE-----\n")
				return o
			}, spec: spec, now: t0, reason: ReasonInvalidPEM, server: true, contains: "server certificate: invalid PEM"},
		{name: "a truncated server key is invalid PEM and its bytes are not quoted",
			obs: func(t *testing.T) Observed {
				o := fresh(t)
				o.Server.KeyPEM = o.Server.KeyPEM[:len(o.Server.KeyPEM)/2]
				return o
			}, spec: spec, now: t0, reason: ReasonInvalidPEM, server: true},
		{name: "a server certificate from another CA is reissued",
			obs: func(t *testing.T) Observed {
				ca := caAt(t, spec, t0)
				return observed(ca, nil, serverAt(t, caAt(t, spec, t0), spec, t0), ca)
			}, spec: spec, now: t0, reason: ReasonIssuerChanged, server: true},
	}
}

func bundleCases(f fixtures) []decideCase {
	spec, fresh := f.spec, f.fresh
	return []decideCase{
		{name: "an expired previous CA is dropped from the bundle",
			obs: func(t *testing.T) Observed {
				old, ca := caAt(t, spec, t0.Add(-spec.CAValidity())), caAt(t, spec, t0.Add(-time.Hour))
				return observed(ca, nil, serverAt(t, ca, spec, t0), ca, old)
			}, spec: spec, now: t0.Add(time.Second), reason: ReasonBundleChanged, bundle: true, contains: "expired at"},
		{name: "a previous CA that has not expired stays in the bundle",
			obs: func(t *testing.T) Observed {
				old, ca := caAt(t, spec, t0.Add(-spec.CAValidity()+time.Hour)), caAt(t, spec, t0.Add(-time.Hour))
				return observed(ca, nil, serverAt(t, ca, spec, t0), ca, old)
			}, spec: spec, now: t0, reason: ReasonFresh},
		{name: "a stale bundle in the server Secret is rewritten",
			obs: func(t *testing.T) Observed {
				o := fresh(t)
				o.Server.BundlePEM = nil
				return o
			}, spec: spec, now: t0, reason: ReasonBundleChanged, bundle: true, contains: "stale"},
		{name: "garbage in the bundle is rewritten from the CAs",
			obs: func(t *testing.T) Observed {
				o := fresh(t)
				o.CA.BundlePEM = append(o.CA.BundlePEM, "garbage"...)
				return o
			}, spec: spec, now: t0, reason: ReasonBundleChanged, bundle: true},
	}
}

func TestDecide(t *testing.T) {
	for _, tc := range decideCases() {
		t.Run(tc.name, func(t *testing.T) {
			obs := tc.obs(t)
			plan := Decide(obs, tc.spec, tc.now)
			if plan.Reason != tc.reason || plan.CA != tc.ca || plan.IssueServer != tc.server || plan.UpdateBundle != tc.bundle {
				t.Fatalf("got reason=%s ca=%s server=%v bundle=%v (%s)\nwant reason=%s ca=%s server=%v bundle=%v",
					plan.Reason, plan.CA, plan.IssueServer, plan.UpdateBundle, plan.Message, tc.reason, tc.ca, tc.server, tc.bundle)
			}
			if !strings.Contains(plan.Message, tc.contains) {
				t.Errorf("message %q does not mention %q", plan.Message, tc.contains)
			}
			assertNoKeyBytes(t, plan.Message, obs)
			if plan.NothingToDo() != (tc.reason == ReasonFresh) {
				t.Errorf("NothingToDo=%v for reason %s", plan.NothingToDo(), plan.Reason)
			}
			if plan.NothingToDo() && !plan.NextCheck.After(tc.now) {
				t.Errorf("fresh plan has NextCheck %v, not after now", plan.NextCheck)
			}
		})
	}
}

// TestExecuteThenDecideIsFresh: carrying out any plan and deciding again with
// the same spec and clock finds nothing to do, so a second pass writes nothing.
func TestExecuteThenDecideIsFresh(t *testing.T) {
	for _, tc := range decideCases() {
		t.Run(tc.name, func(t *testing.T) {
			obs := tc.obs(t)
			first := Decide(obs, tc.spec, tc.now)
			out, err := Execute(first, obs, tc.spec, tc.now, rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			second := Decide(out, tc.spec, tc.now)
			if !second.NothingToDo() {
				t.Fatalf("after %s, second pass: %s (%s)", first.Reason, second.Reason, second.Message)
			}
			again, err := Execute(second, out, tc.spec, tc.now, rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			if !equalSecrets(again, out) {
				t.Fatal("executing a Fresh plan changed the Secrets")
			}
			assertServerVerifies(t, out, tc.spec, tc.now)
		})
	}
}

func equalSecrets(a, b Observed) bool {
	return mapsEqual(CASecretData(a.CA), CASecretData(b.CA)) && mapsEqual(ServerSecretData(a.Server), ServerSecretData(b.Server))
}

func mapsEqual(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if string(b[k]) != string(v) {
			return false
		}
	}
	return true
}

// assertServerVerifies checks the server certificate against the published
// bundle for every desired name, as a TLS client would.
func assertServerVerifies(t *testing.T, o Observed, spec Spec, now time.Time) {
	t.Helper()
	leaf, err := parseCert(o.Server.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(o.Server.BundlePEM) {
		t.Fatal("bundle holds no certificate")
	}
	sans := DesiredSANs(spec)
	names := append(slices.Clone(sans.DNSNames), "127.0.0.1", "::1")
	for _, name := range names {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
		if err != nil {
			t.Fatalf("verify for %s: %v", name, err)
		}
	}
}

// assertNoKeyBytes fails when a message quotes any part of a private key.
func assertNoKeyBytes(t *testing.T, msg string, o Observed) {
	t.Helper()
	for _, key := range [][]byte{o.CA.KeyPEM, o.CA.NextKeyPEM, o.Server.KeyPEM} {
		body := strings.ReplaceAll(string(key), "\n", "")
		body = strings.TrimPrefix(body, "-----BEGIN PRIVATE KEY-----")
		for i := 0; i+12 <= len(body) && i < 200; i += 4 {
			if chunk := body[i : i+12]; !strings.Contains(chunk, "-----") && strings.Contains(msg, chunk) {
				t.Fatalf("message quotes key bytes %q", chunk)
			}
		}
	}
}

func TestDesiredSANs(t *testing.T) {
	sans := DesiredSANs(testSpec(withReplicas(2), withExtraSANs("Bao.Example.com", "10.0.0.7", "localhost", " ")))
	for _, want := range []string{
		"localhost", "bao.example.com",
		"bao-0.bao-internal", "bao-0.bao-internal.vault", "bao-0.bao-internal.vault.svc", "bao-0.bao-internal.vault.svc.cluster.local",
		"bao-1.bao-internal.vault.svc.cluster.local",
		"bao", "bao.vault", "bao.vault.svc", "bao.vault.svc.cluster.local",
		"bao-internal", "bao-internal.vault.svc", "bao-internal.vault.svc.cluster.local",
	} {
		if !slices.Contains(sans.DNSNames, want) {
			t.Errorf("DNS SANs lack %s: %v", want, sans.DNSNames)
		}
	}
	if slices.Contains(sans.DNSNames, "bao-2.bao-internal.vault.svc") {
		t.Error("SANs cover an ordinal beyond the replica count")
	}
	if len(sans.DNSNames) != 1+1+2*4+2*4 {
		t.Errorf("unexpected duplicates or extras: %d names %v", len(sans.DNSNames), sans.DNSNames)
	}
	for _, ip := range []string{"127.0.0.1", "::1", "10.0.0.7"} {
		if !slices.ContainsFunc(sans.IPs, net.ParseIP(ip).Equal) {
			t.Errorf("IP SANs lack %s: %v", ip, sans.IPs)
		}
	}
}

func TestIssuedCertificateFields(t *testing.T) {
	spec := testSpec()
	caPEM, caKeyPEM, err := NewCA(spec, t0, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := parseCert(caPEM)
	if !ca.IsCA || !ca.BasicConstraintsValid || !ca.MaxPathLenZero || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA constraints: IsCA=%v BC=%v MaxPathLenZero=%v usage=%b", ca.IsCA, ca.BasicConstraintsValid, ca.MaxPathLenZero, ca.KeyUsage)
	}
	if len(ca.SubjectKeyId) != 20 || ca.PublicKeyAlgorithm != x509.ECDSA || ca.SignatureAlgorithm != x509.ECDSAWithSHA256 {
		t.Errorf("CA key: SKID %x, algorithm %s, signature %s", ca.SubjectKeyId, ca.PublicKeyAlgorithm, ca.SignatureAlgorithm)
	}
	if got := ca.NotAfter.Sub(t0); got != spec.CAValidity() {
		t.Errorf("CA validity %s, want %s", got, spec.CAValidity())
	}
	certPEM, keyPEM, err := IssueServerCert(caPEM, caKeyPEM, spec, t0, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := parseCert(certPEM)
	if leaf.IsCA || !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) {
		t.Errorf("leaf usage: IsCA=%v EKU=%v", leaf.IsCA, leaf.ExtKeyUsage)
	}
	if string(leaf.AuthorityKeyId) != string(ca.SubjectKeyId) {
		t.Error("leaf AuthorityKeyId does not name the CA")
	}
	if leaf.NotBefore != t0.Add(-ClockSkew) || leaf.NotAfter != t0.Add(spec.RotationPeriod) {
		t.Errorf("leaf validity %s to %s", leaf.NotBefore, leaf.NotAfter)
	}
	if block, _ := pem.Decode(keyPEM); block == nil || block.Type != "PRIVATE KEY" {
		t.Error("server key is not PKCS#8 PEM")
	}
}

func TestServerCertNeverOutlivesCA(t *testing.T) {
	spec := testSpec()
	ca := caAt(t, spec, t0)
	leaf := serverAt(t, ca, spec, ca.cert.NotAfter.Add(-time.Hour))
	if !leaf.cert.NotAfter.Equal(ca.cert.NotAfter) {
		t.Fatalf("leaf expires %s, CA %s", leaf.cert.NotAfter, ca.cert.NotAfter)
	}
	// A clamped leaf inside the window is not reissued over and over.
	o := observed(ca, caAt(t, spec, ca.cert.NotAfter.Add(-time.Hour)), leaf, ca)
	o.CA.BundlePEM = BundlePEM(o.CA.CertPEM, o.CA.NextCertPEM, nil, t0)
	o.Server.BundlePEM = o.CA.BundlePEM
	if p := Decide(o, spec, ca.cert.NotAfter.Add(-time.Hour)); p.IssueServer {
		t.Fatalf("clamped leaf reissued: %s", p.Message)
	}
}

func TestCertHash(t *testing.T) {
	ca := caAt(t, testSpec(), t0)
	h, err := CertHash(append(append([]byte{}, ca.certPEM...), ca.certPEM...))
	if err != nil || len(h) != 64 {
		t.Fatalf("hash %q, %v", h, err)
	}
	if h2, _ := CertHash(ca.certPEM); h2 != h {
		t.Error("hash depends on what follows the leaf")
	}
	if _, err := CertHash([]byte("garbage")); err == nil {
		t.Error("garbage hashed")
	}
}

func TestSecretDataRoundTrip(t *testing.T) {
	spec := testSpec()
	ca, next := caAt(t, spec, t0), caAt(t, spec, t0)
	o := observed(ca, next, serverAt(t, ca, spec, t0), ca, next)
	back := ObservedFromSecrets(CASecretData(o.CA), ServerSecretData(o.Server))
	if !equalSecrets(back, o) {
		t.Fatal("Secret data does not round-trip")
	}
	if _, ok := CASecretData(CAMaterial{CertPEM: ca.certPEM})[NextCertKey]; ok {
		t.Error("empty successor written to the CA Secret")
	}
}

// TestLifecycleNeverBreaksAClient runs the controller loop over several CA
// lifetimes with a coarse clock. At every step, a client still holding the
// bundle published before the step must verify the certificate served after
// it: that is what keeps connections alive across server and CA rotations.
func TestLifecycleNeverBreaksAClient(t *testing.T) {
	spec := testSpec(withPeriod(time.Hour))
	spec.BundlePropagation = 10 * time.Minute
	step := 7 * time.Minute
	var obs Observed
	seen := map[Reason]int{}
	for now := t0; now.Before(t0.Add(3 * spec.CAValidity())); now = now.Add(step) {
		plan := Decide(obs, spec, now)
		seen[plan.Reason]++
		next, err := Execute(plan, obs, spec, now, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if !Decide(next, spec, now).NothingToDo() {
			t.Fatalf("%s: not idempotent after %s", now, plan.Reason)
		}
		if len(obs.Server.BundlePEM) > 0 && plan.IssueServer {
			// The client trusts the bundle it had before the step.
			assertServerVerifies(t, Observed{Server: ServerMaterial{CertPEM: next.Server.CertPEM, BundlePEM: obs.Server.BundlePEM}}, spec, now)
		}
		assertServerVerifies(t, next, spec, now)
		if n := len(parseCerts(next.CA.BundlePEM)); n > 3 {
			t.Fatalf("%s: bundle grew to %d CAs", now, n)
		}
		obs = next
	}
	for _, r := range []Reason{ReasonMissing, ReasonWithinRotationWindow, ReasonCANearExpiry, ReasonCAPromoted, ReasonBundleChanged} {
		if seen[r] == 0 {
			t.Errorf("lifecycle never went through %s: %v", r, seen)
		}
	}
	if seen[ReasonExpired] > 0 {
		t.Errorf("something expired while the loop ran every %s: %v", step, seen)
	}
	t.Logf("reasons over %s: %v", 3*spec.CAValidity(), seen)
}

func TestSpecValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		spec Spec
		ok   bool
	}{
		"the test spec is valid":                            {testSpec(), true},
		"defaults for period and propagation are valid":     {Spec{ClusterName: "a", Namespace: "b", HeadlessService: "c", Replicas: 1}, true},
		"a missing namespace is rejected":                   {testSpec(func(s *Spec) { s.Namespace = "" }), false},
		"zero replicas are rejected":                        {testSpec(withReplicas(0)), false},
		"a period too short for the CA overlap is rejected": {testSpec(withPeriod(4 * time.Minute)), false},
	} {
		t.Run(name, func(t *testing.T) {
			if err := tc.spec.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if _, err := Execute(Decide(Observed{}, tc.spec, t0), Observed{}, tc.spec, t0, rand.Reader); (err == nil) != tc.ok {
				t.Fatalf("Execute error %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestSANsChangedMessageIsShort(t *testing.T) {
	spec := testSpec()
	ca := caAt(t, spec, t0)
	o := observed(ca, nil, serverAt(t, ca, spec, t0), ca)
	plan := Decide(o, testSpec(withReplicas(100)), t0)
	if plan.Reason != ReasonSANsChanged || len(plan.Message) > 400 || !strings.Contains(plan.Message, "more") {
		t.Fatalf("%s: %d bytes: %s", plan.Reason, len(plan.Message), plan.Message)
	}
}
