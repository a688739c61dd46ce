package openbao_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/minio/minio-go/v7"

	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/executor"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/objectstore/open"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/restore"
	"github.com/openbao/operator/test/baotest"
	"github.com/openbao/operator/test/miniotest"
)

func runRestoreExecutor(t *testing.T, cfg restore.ExecutorConfig) backup.Report {
	t.Helper()
	if cfg.ProvenanceKeyFile == "" {
		cfg.ProvenanceKeyFile = provenanceKeyFile(t)
	}
	return executor.RunRestore(context.Background(), cfg, executor.Deps{
		OpenBao: openbao.New, NewStore: open.Store, ReadFile: readFile, Clock: realClock, Random: randReader,
		Sleep: executor.SleepContext, PeakRSS: executor.PeakRSS,
	})
}

// kvWrite and kvRead use a KV v1 mount "kv" with the root token, which the
// snapshot restores along with the data.
func kvWrite(t *testing.T, bao *baotest.Server, root openbao.Token, key, value string) {
	t.Helper()
	if status, body := callToken(t, bao, http.MethodPost, "/v1/kv/"+key, root, `{"value":"`+value+`"}`); status != http.StatusNoContent {
		t.Fatalf("write kv/%s: %d %s", key, status, body)
	}
}

func kvRead(t *testing.T, bao *baotest.Server, root openbao.Token, key string) (string, bool) {
	t.Helper()
	status, body := callToken(t, bao, http.MethodGet, "/v1/kv/"+key, root, "")
	switch status {
	case http.StatusOK:
		return body, true
	case http.StatusNotFound:
		return "", false
	}
	t.Fatalf("read kv/%s: %d %s", key, status, body)
	return "", false
}

// restoreFixture is one initialized server with the operator's identity, a
// kv mount, MinIO, and the executor configurations of both Jobs.
type restoreFixture struct {
	bao         *baotest.Server
	iss         *issuer
	m           *miniotest.Server
	restoreJWT  openbao.Token
	root        openbao.Token
	backupCfg   backup.ExecutorConfig
	restoreBase restore.ExecutorConfig
}

func newRestoreFixture(t *testing.T) restoreFixture {
	t.Helper()
	bao := baotest.Start(t, baotest.Options{})
	m := miniotest.Start(t)
	root := initNode(t, bao, nil)
	c, iss := testCluster(), newIssuer(t)
	if err := identity.Apply(context.Background(), baoClient(t, bao, nil, root), c, iss.identity(t)); err != nil {
		t.Fatalf("the operator's identity: %v", err)
	}
	if status, body := callToken(t, bao, http.MethodPost, "/v1/sys/mounts/kv", root, `{"type":"kv"}`); status != http.StatusNoContent {
		t.Fatalf("mount kv: %d %s", status, body)
	}
	jwt := iss.roleToken(t, identity.BackupRole)
	jwtFile, credsDir := executorFiles(t, jwt.Reveal(), m)
	cfg := backup.ExecutorConfig{
		Namespace: c.Namespace, Cluster: c.Name, Backup: "b1", OpenBaoAddress: bao.Addr,
		Auth: backup.AuthJWT, JWTMount: backup.OperatorAuthMount, JWTRole: identity.BackupRole, JWTFile: jwtFile,
		Endpoint: m.Endpoint, Bucket: m.Bucket, PathStyle: true, CredentialsDir: credsDir, PathPrefix: "openbao",
		Timeout: time.Minute, PartSize: 5 << 20, Concurrency: 2,
	}
	rjwt := iss.roleToken(t, identity.RestoreRole)
	rjwtFile, _ := executorFiles(t, rjwt.Reveal(), m)
	rcfg := restore.ExecutorConfig{ExecutorConfig: cfg, Restore: "r1"}
	rcfg.Backup, rcfg.JWTRole, rcfg.JWTFile = "", identity.RestoreRole, rjwtFile
	return restoreFixture{bao: bao, m: m, iss: iss, restoreJWT: rjwt, root: root, backupCfg: cfg, restoreBase: rcfg}
}

// TestRestoreBringsBackTheSnapshotsDataThroughTheSealCheckedEndpoint takes
// a backup with the executor, writes more, and restores the latest
// snapshot through the restore executor with the restore role: the keys
// written before the snapshot are back, the ones after are gone. The
// backup role's token may not restore.
func TestRestoreBringsBackTheSnapshotsDataThroughTheSealCheckedEndpoint(t *testing.T) {
	t.Parallel()
	f := newRestoreFixture(t)
	kvWrite(t, f.bao, f.root, "before", "one")
	writeData(t, f.bao, f.root, 8, 256<<10)
	b := runExecutor(t, f.backupCfg)
	if b.Failed() {
		t.Fatalf("backup: %s: %s", b.Reason, b.Error)
	}
	kvWrite(t, f.bao, f.root, "after", "two")
	kvWrite(t, f.bao, f.root, "before", "changed")

	// The backup role's token may read a snapshot, never install one.
	withBackupRole := f.restoreBase
	withBackupRole.Key, withBackupRole.JWTRole = b.Key, identity.BackupRole
	if r := runRestoreExecutor(t, withBackupRole); r.Reason != executor.ReasonAuthFailed {
		t.Fatalf("a restore with the backup role: %+v", r)
	}

	// The restore role's token may install a snapshot, and do nothing else.
	rtok, _, err := baoClient(t, f.bao, nil, openbao.Token{}).Login(context.Background(), identity.Mount, identity.RestoreRole, f.restoreJWT)
	if err != nil {
		t.Fatalf("login as restore: %v", err)
	}
	assertRefused(t, f.bao, rtok, http.MethodGet, "/v1/sys/storage/raft/snapshot")
	assertRefused(t, f.bao, rtok, http.MethodGet, "/v1/kv/before")
	assertRefused(t, f.bao, rtok, http.MethodPut, "/v1/sys/step-down")

	// The fault latest guards against, in the store beside the backup: a
	// planted far-future name and a forged copy carrying the backup's tag,
	// each holding a real snapshot of the data as it is now.
	prefix := backup.ObjectPrefix(f.backupCfg.PathPrefix, f.backupCfg.Namespace, f.backupCfg.Cluster)
	now := runExecutor(t, f.backupCfg)
	if now.Failed() {
		t.Fatalf("second backup: %s: %s", now.Reason, now.Error)
	}
	current := download(t, f.m, now.Key)
	putObject(t, f.m, plantedKey(prefix), current)
	putObject(t, f.m, forgedKey(prefix, b.Key), current)
	removeObject(t, f.m, now.Key)

	cfg := f.restoreBase
	cfg.Latest, cfg.ExpectedSHA256 = true, b.SHA256
	r := runRestoreExecutor(t, cfg)
	if r.Key != b.Key || r.Unproven == nil || r.Unproven.Count != 2 {
		t.Fatalf("latest restored %q (%s: %s), ignoring %+v; want %s, ignoring the 2 planted objects", r.Key, r.Reason, r.Error, r.Unproven, b.Key)
	}
	if r.Failed() {
		t.Fatalf("restore: %s: %s", r.Reason, r.Error)
	}
	if r.Key != b.Key || r.SHA256 != b.SHA256 || r.Size != b.Size || r.RaftIndex == 0 {
		t.Fatalf("report %+v, backup %+v", r, b)
	}
	waitForActive(t, baoClient(t, f.bao, nil, openbao.Token{}), 30*time.Second)
	if v, ok := kvRead(t, f.bao, f.root, "before"); !ok || !strings.Contains(v, `"one"`) {
		t.Errorf("kv/before after the restore: %q %v, want the snapshot's value", v, ok)
	}
	if v, ok := kvRead(t, f.bao, f.root, "after"); ok {
		t.Errorf("kv/after, written after the snapshot, survived the restore: %q", v)
	}
	if strings.Contains(string(r.Encode()), f.root.Reveal()) || strings.Contains(string(r.Encode()), f.m.SecretKey) {
		t.Error("a secret is in the report")
	}
}

// TestRestoreRefusesAnotherClustersSnapshotAndChangesNothing restores a
// snapshot of a second server with another static seal key: OpenBao
// refuses it at the seal-checked endpoint, the report says SealMismatch,
// and the data is unchanged.
func TestRestoreRefusesAnotherClustersSnapshotAndChangesNothing(t *testing.T) {
	t.Parallel()
	f := newRestoreFixture(t)
	other := baotest.Start(t, baotest.Options{NodeID: "other-0"})
	otherRoot := initNode(t, other, nil)
	snap, err := baoClient(t, other, nil, otherRoot).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	data := readAll(t, snap)
	key := backup.ObjectKey(backup.ObjectPrefix("openbao", "team-a", "other"), time.Now(), "0000000a")
	putObject(t, f.m, key, data)
	kvWrite(t, f.bao, f.root, "mine", "kept")

	cfg := f.restoreBase
	cfg.Key = key
	r := runRestoreExecutor(t, cfg)
	if r.Reason != restore.ReasonSealMismatch || !strings.Contains(r.Error, "Nothing was changed") {
		t.Fatalf("another seal's snapshot: %+v", r)
	}
	t.Logf("refused: %s", r.Error)
	if v, ok := kvRead(t, f.bao, f.root, "mine"); !ok || !strings.Contains(v, "kept") {
		t.Errorf("the data changed: %q %v", v, ok)
	}
}

// TestRestoreInstallsNoBadObject: an expected digest that differs (a
// valid snapshot of this cluster, larger than restore.WithheldTail, that
// only its SHA-256 at its end tells apart), a truncated object and a
// corrupted one are each refused, and OpenBao, which received all of the
// first but its last MiB, installs none of them: the server's data is
// unchanged.
func TestRestoreInstallsNoBadObject(t *testing.T) {
	t.Parallel()
	f := newRestoreFixture(t)
	kvWrite(t, f.bao, f.root, "before", "one")
	writeData(t, f.bao, f.root, 8, 256<<10)
	b := runExecutor(t, f.backupCfg)
	if b.Failed() {
		t.Fatalf("backup: %s: %s", b.Reason, b.Error)
	}
	kvWrite(t, f.bao, f.root, "after", "two")
	good := download(t, f.m, b.Key)
	prefix := backup.ObjectPrefix("openbao", "team-a", "bao")
	truncated := backup.ObjectKey(prefix, time.Now().Add(-time.Hour), "0000000b")
	putObject(t, f.m, truncated, good[:len(good)/2])
	corrupted := backup.ObjectKey(prefix, time.Now().Add(-2*time.Hour), "0000000c")
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0xff
	putObject(t, f.m, corrupted, bad)

	for _, tc := range []struct {
		name, key, sha, want string
	}{
		{"another digest", b.Key, strings.Repeat("0", 64), restore.ReasonDigestMismatch},
		{"a truncated object", truncated, "", restore.ReasonCorruptSnapshot},
		{"a corrupted object", corrupted, "", restore.ReasonCorruptSnapshot},
	} {
		cfg := f.restoreBase
		cfg.Key, cfg.ExpectedSHA256 = tc.key, tc.sha
		logFrom := len(f.bao.Log())
		if r := runRestoreExecutor(t, cfg); r.Reason != tc.want || !strings.Contains(r.Error, "installed nothing") {
			t.Errorf("%s: %+v, want %s", tc.name, r, tc.want)
		}
		afterCutUpload(t, f.bao, logFrom)
	}
	if _, ok := kvRead(t, f.bao, f.root, "after"); !ok {
		t.Error("kv/after is gone: something was restored")
	}
	if installed(f.bao, 0) {
		t.Errorf("the server installed a snapshot:\n%s", f.bao.Log())
	}
}

func removeObject(t *testing.T, m *miniotest.Server, key string) {
	t.Helper()
	if err := m.Client.RemoveObject(context.Background(), m.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

func putObject(t *testing.T, m *miniotest.Server, key string, data []byte) {
	t.Helper()
	if _, err := m.Client.PutObject(context.Background(), m.Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

var (
	readFile   = os.ReadFile
	realClock  = clock.RealClock{}
	randReader = rand.Reader
)

func readAll(t *testing.T, r io.ReadCloser) []byte {
	t.Helper()
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
