package azurestore

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/openbao/operator/internal/objectstore"
)

func TestContainerURLOfEachAddressing(t *testing.T) {
	creds := &objectstore.Credentials{AccountName: "acct"}
	for _, c := range []struct {
		cfg  objectstore.Config
		want string
	}{
		{objectstore.Config{Bucket: "b", Credentials: creds}, "https://acct.blob.core.windows.net/b"},
		{objectstore.Config{Bucket: "b", Credentials: creds, Endpoint: "https://blob.example.com/"}, "https://blob.example.com/b"},
		{objectstore.Config{Bucket: "b", Credentials: creds, Endpoint: "http://127.0.0.1:10000", PathStyle: true}, "http://127.0.0.1:10000/acct/b"},
	} {
		if got, err := containerURL(c.cfg); err != nil || got != c.want {
			t.Errorf("%+v: %q %v, want %q", c.cfg, got, err, c.want)
		}
	}
}

// TestErrorsNeverQuoteTheSASToken: a failed request's error names its URL,
// whose query is the SAS token.
func TestErrorsNeverQuoteTheSASToken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The listener keeps the port (a closed one may be taken by another
	// test's server) and hangs up on every connection: the request fails
	// with the URL in its error.
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	addr := l.Addr().String()
	const sas = "sv=2024-01-01&sig=SAS-SIGNATURE-NEVER-PRINTED"
	s, err := New(objectstore.Config{Endpoint: "http://" + addr, PathStyle: true, Bucket: "b",
		Credentials: &objectstore.Credentials{AccountName: "acct", SASToken: objectstore.NewSecret(sas)}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Stat(context.Background(), "k")
	if err == nil || strings.Contains(err.Error(), "SAS-SIGNATURE") || objectstore.IsPermanent(err) {
		t.Fatalf("%v: want a passing error without the SAS token", err)
	}
	t.Log(err)
}

// TestNoCredentialsNoContainerWhateverTheSwitch: Azure never uses an
// ambient identity; without credentials it names the missing
// credentialsSecretRef.
func TestNoCredentialsNoContainerWhateverTheSwitch(t *testing.T) {
	for _, ambient := range []bool{false, true} {
		_, err := New(objectstore.Config{Provider: objectstore.ProviderAzure, Bucket: "c", AmbientIdentity: ambient})
		if !errors.Is(err, objectstore.ErrNoCredentials) || !strings.Contains(err.Error(), "credentialsSecretRef") {
			t.Errorf("ambient %v: %v, want ErrNoCredentials", ambient, err)
		}
	}
}
