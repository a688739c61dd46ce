package openbao_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/snapshot"
	"github.com/openbao/operator/test/baotest"
	"github.com/openbao/operator/test/testbin"
)

var updateSnapshotFixtures = flag.Bool("update-snapshot-fixtures", false,
	"rewrite internal/snapshot/testdata from snapshots of the real bao")

// TestRealSnapshotsCheckOutInStream takes snapshots from the real bao
// 2.4.0, of an empty cluster and of one holding data, and checks them in
// stream; with -update-snapshot-fixtures they become the unit tests'
// fixtures (with a truncated and a bit-flipped copy), so those run against
// OpenBao's real format. Without the flag it is skipped: the executor's
// test checks a fresh real snapshot in stream on every run.
func TestRealSnapshotsCheckOutInStream(t *testing.T) {
	if !*updateSnapshotFixtures {
		t.Skip("only with -update-snapshot-fixtures")
	}
	bao := baotest.Start(t, baotest.Options{})
	root := initNode(t, bao, nil)
	fixtures := map[string][]byte{"empty.snap": takeSnapshot(t, bao, root)}
	for i := range 8 {
		status, body := callToken(t, bao, http.MethodPost, fmt.Sprintf("/v1/cubbyhole/item-%d", i), root,
			fmt.Sprintf(`{"value": %q}`, strings.Repeat(fmt.Sprint(i), 500)))
		if status != http.StatusNoContent {
			t.Fatalf("write item %d: %d %s", i, status, body)
		}
	}
	fixtures["with-data.snap"] = takeSnapshot(t, bao, root)
	for name, data := range fixtures {
		info, err := snapshot.Verify(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s does not check out: %v", name, err)
		}
		t.Logf("%s: %d bytes, Raft index %d, state.bin %d bytes", name, len(data), info.Index, info.StateSize)
	}
	writeSnapshotFixtures(t, fixtures)
}

func takeSnapshot(t *testing.T, bao *baotest.Server, token openbao.Token) []byte {
	t.Helper()
	c, err := openbao.New(openbao.Options{Address: bao.Addr, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	body, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeSnapshotFixtures(t *testing.T, fixtures map[string][]byte) {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "internal", "snapshot", "testdata")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	small := fixtures["with-data.snap"]
	flipped := bytes.Clone(small)
	flipped[len(flipped)/2] ^= 0x10
	fixtures["truncated.snap"] = small[:len(small)*2/3]
	fixtures["bit-flipped.snap"] = flipped
	for name, data := range fixtures {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
