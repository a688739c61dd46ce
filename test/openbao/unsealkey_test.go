package openbao_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/sealkey"
	"github.com/openbao/operator/test/testbin"
)

// TestOpenBaoRefusesTheKeysValidateUnsealKeyRejects starts bao with the
// operator's rendered static seal and a key file: 32 raw bytes from
// NewUnsealKey initialize and unseal, the same bytes with a trailing
// newline (which ValidateUnsealKey rejects) stop bao at the seal
// configuration.
func TestOpenBaoRefusesTheKeysValidateUnsealKeyRejects(t *testing.T) {
	t.Parallel()
	good := newUnsealKey(t)
	bad := append(append([]byte{}, good...), '\n')
	if err := sealkey.Validate(bad); err == nil {
		t.Fatal("ValidateUnsealKey accepts a trailing newline")
	}
	certs := newTestCerts(t)
	c := baoClient(t, startNode(t, certs, good, "node-0", nodeConfig{}), certs.CA, openbao.Token{})
	if _, err := c.Init(context.Background(), openbao.InitRequest{}); err != nil {
		t.Fatalf("init with the static seal and 32 raw bytes: %v", err)
	}
	waitForActive(t, c, 30*time.Second)
	if h, err := c.Health(context.Background()); err != nil || !h.Initialized || h.Sealed {
		t.Fatalf("with 32 raw bytes: %+v %v, want initialized and unsealed by the static seal", h, err)
	}
	out, exited := runBaoWithKey(t, bad, 30*time.Second)
	if !exited || !strings.Contains(out, "Error parsing Seal configuration") {
		t.Errorf("bao with a trailing newline in the key: exited %v, want a seal configuration error:\n%s", exited, out)
	}
}

// runBaoWithKey runs bao for at most d and returns its output and whether
// it exited by itself.
func runBaoWithKey(t *testing.T, key []byte, d time.Duration) (string, bool) {
	t.Helper()
	bao, err := testbin.Path("bao")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certs := newTestCerts(t)
	files := map[string][]byte{"unseal.key": key, "tls.crt": certs.Cert, "tls.key": certs.Key, "ca.crt": certs.CA}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "raft"), 0o700); err != nil {
		t.Fatal(err)
	}
	config := strings.NewReplacer("{{dir}}", dir, "{{api_port}}", "0", "{{cluster_port}}", "0").
		Replace(renderNodeConfig(t, nodeConfig{}))
	if err := os.WriteFile(filepath.Join(dir, "config.hcl"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, bao, "server", "-config="+filepath.Join(dir, "config.hcl"))
	cmd.Env = append(os.Environ(), "BAO_RAFT_NODE_ID=node-0",
		"BAO_API_ADDR=https://127.0.0.1:8200", "BAO_CLUSTER_ADDR=https://127.0.0.1:8201")
	out, _ := cmd.CombinedOutput()
	return string(out), ctx.Err() == nil
}
