package pki

import (
	"crypto/rand"
	"testing"
)

func BenchmarkNewCA(b *testing.B) {
	spec := testSpec()
	for b.Loop() {
		if _, _, err := NewCA(spec, t0, rand.Reader); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIssueServerCert(b *testing.B) {
	spec := testSpec()
	caPEM, keyPEM, err := NewCA(spec, t0, rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := IssueServerCert(caPEM, keyPEM, spec, t0, rand.Reader); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecideFresh is the cost of a reconcile that finds nothing to do.
func BenchmarkDecideFresh(b *testing.B) {
	spec := testSpec()
	obs, err := Execute(Decide(Observed{}, spec, t0), Observed{}, spec, t0, rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if p := Decide(obs, spec, t0); !p.NothingToDo() {
			b.Fatal(p.Message)
		}
	}
}

// FuzzDecide feeds arbitrary bytes into every Secret field: Decide must not
// panic, and Execute of its plan must reach a state with nothing to do.
func FuzzDecide(f *testing.F) {
	spec := testSpec()
	good, err := Execute(Decide(Observed{}, spec, t0), Observed{}, spec, t0, rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good.CA.CertPEM, good.CA.KeyPEM, good.Server.CertPEM, good.Server.KeyPEM, good.CA.BundlePEM)
	f.Add([]byte("x"), []byte{}, []byte("-----BEGIN CERTIFICATE-----\n"), good.CA.KeyPEM, []byte{0})
	f.Fuzz(func(t *testing.T, caCert, caKey, srvCert, srvKey, bundle []byte) {
		obs := Observed{
			CA:     CAMaterial{CertPEM: caCert, KeyPEM: caKey, BundlePEM: bundle},
			Server: ServerMaterial{CertPEM: srvCert, KeyPEM: srvKey, BundlePEM: bundle},
		}
		plan := Decide(obs, spec, t0)
		out, err := Execute(plan, obs, spec, t0, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if p := Decide(out, spec, t0); !p.NothingToDo() {
			t.Fatalf("after %s: %s", plan.Reason, p.Message)
		}
	})
}
