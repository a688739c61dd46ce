package webhookcert

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

var settings = Settings{Namespace: "openbao-operator-system", Service: "openbao-operator-webhook-service"}

const dnsName = "openbao-operator-webhook-service.openbao-operator-system.svc"

// verify checks that the serving certificate chains to the bundle for the
// name the API server dials, at now.
func verify(t *testing.T, data map[string][]byte, now time.Time) *x509.Certificate {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[BundleKey]) {
		t.Fatal("bundle holds no certificate")
	}
	block, _ := pem.Decode(data[CertKey])
	if block == nil {
		t.Fatal("no serving certificate")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: roots, CurrentTime: now}); err != nil {
		t.Fatalf("serving certificate does not verify for %s at %s: %v", dnsName, now, err)
	}
	return leaf
}

func TestAMissingSecretIsIssuedAndThenLeftAlone(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := Refresh(nil, settings, now, rand.Reader)
	if err != nil || !res.Changed || res.Reason != "Missing" {
		t.Fatalf("first refresh: %+v, %v", res, err)
	}
	verify(t, res.Data, now)
	again, err := Refresh(res.Data, settings, now.Add(time.Hour), rand.Reader)
	if err != nil || again.Changed {
		t.Fatalf("second refresh changed the Secret (%s): %v", again.Reason, err)
	}
	if want := now.Add(60 * 24 * time.Hour); again.NextCheck.After(want) {
		t.Errorf("next check %s is after the renewal window opens (%s)", again.NextCheck, want)
	}
}

func TestTheServingCertificateIsRenewedBeforeItExpires(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first, err := Refresh(nil, settings, now, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	old := verify(t, first.Data, now)
	later := now.Add(61 * 24 * time.Hour) // less than a third of 90 days left
	res, err := Refresh(first.Data, settings, later, rand.Reader)
	if err != nil || !res.Changed {
		t.Fatalf("refresh within the rotation window: %+v, %v", res, err)
	}
	if leaf := verify(t, res.Data, later); leaf.NotAfter.Equal(old.NotAfter) {
		t.Error("the serving certificate was not reissued")
	}
}

func TestACASuccessorIsTrustedBeforeItSigns(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := Refresh(nil, settings, now, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	first := res.Data
	// The CA lives 900 days; its successor is staged 180 days before.
	at := now.Add(721 * 24 * time.Hour)
	for i := 0; i < 4; i++ {
		if res, err = Refresh(res.Data, settings, at, rand.Reader); err != nil {
			t.Fatal(err)
		}
		verify(t, res.Data, at)
		at = at.Add(time.Hour)
	}
	if _, staged := res.Data[nextKey]; staged || string(res.Data[caCertKey]) == string(first[caCertKey]) {
		t.Error("no successor CA was promoted")
	}
}
