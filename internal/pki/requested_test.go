package pki

import (
	"bytes"
	"crypto/rand"
	"testing"
	"time"
)

// TestARequestReissuesTheServerCertificateAndKeepsTheCA: a fresh cluster
// asked for a rotation gets a new server certificate, signed by the same
// CA, and the CA and bundle stay byte for byte; a plan that reissues
// anyway keeps its own reason.
func TestARequestReissuesTheServerCertificateAndKeepsTheCA(t *testing.T) {
	f := newFixtures()
	obs := f.fresh(t)
	now := t0.Add(time.Hour)
	plan := Decide(obs, f.spec, now)
	if !plan.NothingToDo() {
		t.Fatalf("fixture: a fresh cluster plans %+v", plan)
	}
	asked := plan.Requested("2026-05-01T10:00:00Z")
	if !asked.IssueServer || asked.CA != CAKeep || asked.UpdateBundle || asked.Reason != ReasonRotateRequested || !asked.NextCheck.IsZero() {
		t.Fatalf("requested: %+v, want the server certificate alone reissued", asked)
	}
	out, err := Execute(asked, obs, f.spec, now, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(out.Server.CertPEM, obs.Server.CertPEM) || bytes.Equal(out.Server.KeyPEM, obs.Server.KeyPEM) {
		t.Error("the server certificate or key was not reissued")
	}
	if !bytes.Equal(out.CA.CertPEM, obs.CA.CertPEM) || !bytes.Equal(out.CA.KeyPEM, obs.CA.KeyPEM) || !bytes.Equal(out.CA.BundlePEM, obs.CA.BundlePEM) {
		t.Error("the CA or its bundle changed")
	}
	assertServerVerifies(t, out, f.spec, now)

	expired := Decide(obs, f.spec, t0.Add(f.spec.RotationPeriod+time.Hour))
	if got := expired.Requested("r"); got.Reason != expired.Reason || !got.IssueServer {
		t.Errorf("a plan that reissues anyway: reason %s, want %s kept", got.Reason, expired.Reason)
	}
}
