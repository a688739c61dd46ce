package bootstrap_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
)

func testEntity(t *testing.T) *openpgp.Entity {
	t.Helper()
	e, err := openpgp.NewEntity("Alice", "", "alice@example.org", nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func publicKey(t *testing.T, e *openpgp.Entity, armored bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	if !armored {
		if err := e.Serialize(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return buf.Bytes()
}

// TestPGPKeysAreReadInEveryFormGPGWrites: armored, base64 and binary
// public keys become the base64 of the binary key, in the order named; a
// private key, a missing key and garbage are refused by ConfigMap key,
// without their content.
func TestPGPKeysAreReadInEveryFormGPGWrites(t *testing.T) {
	alice, bob := testEntity(t), testEntity(t)
	bin := publicKey(t, bob, false)
	var private bytes.Buffer
	if err := alice.SerializePrivate(&private, nil); err != nil {
		t.Fatal(err)
	}
	data := map[string]string{
		"alice.asc": string(publicKey(t, alice, true)),
		"bob.b64":   base64.StdEncoding.EncodeToString(bin),
		"garbage":   "not a key",
		"secret":    string(private.Bytes()),
	}
	binary := map[string][]byte{"bob.gpg": bin}
	ref := func(keys ...string) v1alpha1.PGPKeysConfigMapRef {
		return v1alpha1.PGPKeysConfigMapRef{Name: "pgp", Keys: keys}
	}
	got, err := bootstrap.PGPKeys(ref("alice.asc", "bob.b64", "bob.gpg"), data, binary, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{base64.StdEncoding.EncodeToString(publicKey(t, alice, false)), base64.StdEncoding.EncodeToString(bin),
		base64.StdEncoding.EncodeToString(bin)}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("key %d is not the binary public key in base64", i)
		}
	}
	for _, bad := range []string{"garbage", "secret", "missing"} {
		_, err := bootstrap.PGPKeys(ref("alice.asc", bad), data, binary, time.Now())
		if err == nil || !strings.Contains(err.Error(), "key "+bad) {
			t.Errorf("%s: %v, want a refusal naming the key", bad, err)
		}
		if err != nil && bad != "missing" && strings.Contains(err.Error(), data[bad][:8]) {
			t.Errorf("%s: the refusal quotes the content", bad)
		}
	}
}

// TestInitializeStoresTheEncryptedShares: the recovery-keys Secret is
// proven writable before sys/init (else sys/init is not called), and the
// shares sys/init returns are stored as the binary PGP messages.
func TestInitializeStoresTheEncryptedShares(t *testing.T) {
	ctx, _ := logCtx(t)
	recoveryTemplate := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bao-recovery-keys", Namespace: "ns"}}
	opts := func(c client.Client) bootstrap.InitOptions {
		return bootstrap.InitOptions{Sleep: noSleep,
			Request:  openbao.InitRequest{RecoveryShares: 2, RecoveryThreshold: 2, RecoveryPGPKeys: []string{"a", "b"}},
			Recovery: &bootstrap.SecretRecoveryKeyStore{Client: c, Template: recoveryTemplate}}
	}
	shares := []openbao.Token{openbao.NewToken(base64.StdEncoding.EncodeToString([]byte("pgp-1"))),
		openbao.NewToken(base64.StdEncoding.EncodeToString([]byte("pgp-2")))}

	c, _ := kube(nil, nil, 0)
	bao := &openbaofake.Client{InitAnswer: openbao.InitResult{RootToken: openbao.NewToken("s.root"), RecoveryKeys: shares}}
	o := opts(c)
	o.Recovery = &bootstrap.SecretRecoveryKeyStore{Client: failingDryRun{c, recoveryTemplate.Name}, Template: recoveryTemplate}
	if _, err := bootstrap.Initialize(ctx, bao, &bootstrap.SecretTokenStore{Client: c, Template: template()}, o); err == nil || bao.Calls["Init"] != 0 {
		t.Fatalf("an unwritable recovery-keys Secret: %v, %d sys/init call(s)", err, bao.Calls["Init"])
	}

	c, _ = kube(nil, nil, 0)
	out, err := bootstrap.Initialize(ctx, bao, &bootstrap.SecretTokenStore{Client: c, Template: template()}, opts(c))
	if err != nil || out.RecoveryErr != nil {
		t.Fatalf("Initialize: %v, recovery: %v", err, out.RecoveryErr)
	}
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "bao-recovery-keys"}, &s); err != nil {
		t.Fatal(err)
	}
	if string(s.Data[bootstrap.RecoveryShareKey(2)]) != "pgp-2" || string(s.Data[bootstrap.RecoveryThresholdKey]) != "2" {
		t.Fatalf("stored %v", s.Data)
	}
	if n, th := bootstrap.StoredRecoveryShares(&s); n != 2 || th != 2 {
		t.Errorf("StoredRecoveryShares = %d, %d", n, th)
	}

	bao = &openbaofake.Client{InitAnswer: openbao.InitResult{RootToken: openbao.NewToken("s.root"), RecoveryKeys: shares[:1]}}
	c, _ = kube(nil, nil, 0)
	if out, err := bootstrap.Initialize(ctx, bao, &bootstrap.SecretTokenStore{Client: c, Template: template()}, opts(c)); err != nil || out.RecoveryErr == nil {
		t.Fatalf("one share of two: %v, recovery %v", err, out.RecoveryErr)
	}
}

// failingDryRun refuses the dry-run create of one Secret.
type failingDryRun struct {
	client.Client
	name string
}

func (f failingDryRun) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if obj.GetName() == f.name {
		return errors.New("refused by admission")
	}
	return f.Client.Create(ctx, obj, opts...)
}
