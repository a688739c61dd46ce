package s3store

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// TestCompositeSHA256IsTheStoresForm: the SHA-256 of the parts' digests,
// base64, "-" and the count, whatever the sizes of the writes; the form
// MinIO returns is checked against a real server in the OpenBao tier.
func TestCompositeSHA256IsTheStoresForm(t *testing.T) {
	const part = 5 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), (2*part+12345)/16)
	var digests []byte
	for off := 0; off < len(data); off += part {
		sum := sha256.Sum256(data[off:min(off+part, len(data))])
		digests = append(digests, sum[:]...)
	}
	whole := sha256.Sum256(digests)
	want := base64.StdEncoding.EncodeToString(whole[:]) + "-3"
	for _, chunk := range []int{1 << 20, 4093, part, len(data)} {
		c := &compositeSHA256{partSize: part, part: sha256.New()}
		for off := 0; off < len(data); off += chunk {
			c.Write(data[off:min(off+chunk, len(data))])
		}
		if got := c.String(); got != want {
			t.Errorf("writes of %d: %s, want %s", chunk, got, want)
		}
	}
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	for _, cfg := range []Config{
		{Endpoint: "s3.example.com", Bucket: "b", AmbientIdentity: true},
		{Endpoint: "ftp://s3.example.com", Bucket: "b", AmbientIdentity: true},
		{Endpoint: "https://s3.example.com", Bucket: "b", PartSize: 1 << 20, AmbientIdentity: true},
		{Endpoint: "https://s3.example.com", Bucket: "b", CAPEM: []byte("not PEM"), AmbientIdentity: true},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

func TestSecretsPrintRedacted(t *testing.T) {
	c := Credentials{AccessKeyID: NewSecret("AKID-VALUE"), SecretAccessKey: NewSecret("SECRET-VALUE")}
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%+v %#v %x", c, c, c)} {
		if strings.Contains(out, "VALUE") {
			t.Errorf("printed %s", out)
		}
	}
}
