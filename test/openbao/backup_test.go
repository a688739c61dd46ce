package openbao_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"k8s.io/utils/clock"

	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/executor"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/objectstore/open"
	"github.com/openbao/operator/internal/objectstore/s3store"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/snapshot"
	"github.com/openbao/operator/test/baotest"
	"github.com/openbao/operator/test/miniotest"
)

// The backup Job's service account, as the operator's identity (set up by
// identity.Apply, as at initialization) binds the role "backup" to it.
const backupSubject = "system:serviceaccount:team-a:bao-backup-serviceaccount"

// writeData stores n values of size bytes of random data, so the snapshot
// spans several upload parts.
func writeData(t *testing.T, bao *baotest.Server, root openbao.Token, n, size int) {
	t.Helper()
	for i := range n {
		value := make([]byte, size)
		rand.Read(value)
		body, _ := json.Marshal(map[string]string{"value": base64.StdEncoding.EncodeToString(value)})
		if status, resp := callToken(t, bao, http.MethodPost, fmt.Sprintf("/v1/cubbyhole/blob-%d", i), root, string(body)); status != http.StatusNoContent {
			t.Fatalf("write blob %d: %d %s", i, status, resp)
		}
	}
}

// executorFiles writes what the Job mounts: the JWT and the store
// credentials, as files.
func executorFiles(t *testing.T, jwt string, m *miniotest.Server) (jwtFile, credsDir string) {
	t.Helper()
	dir := t.TempDir()
	credsDir = filepath.Join(dir, "creds")
	if err := os.Mkdir(credsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		filepath.Join(dir, "token"): jwt, filepath.Join(credsDir, backup.AccessKeyIDKey): m.AccessKey,
		filepath.Join(credsDir, backup.SecretAccessKeyKey): m.SecretKey + "\n",
	}
	for p, v := range files {
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "token"), credsDir
}

func runExecutor(t *testing.T, cfg backup.ExecutorConfig) backup.Report {
	t.Helper()
	if cfg.ProvenanceKeyFile == "" {
		cfg.ProvenanceKeyFile = provenanceKeyFile(t)
	}
	return executor.Run(context.Background(), cfg, executor.Deps{
		OpenBao: openbao.New, NewStore: open.Store, ReadFile: os.ReadFile, Clock: clock.RealClock{},
		Random: rand.Reader, Sleep: executor.SleepContext, PeakRSS: executor.PeakRSS,
	})
}

// TestExecutorStreamsARealSnapshotIntoMinIO runs the executor against the
// real bao 2.4.0 and a real MinIO on loopback, logging in with a JWT as a
// backup Job does: the object is the snapshot, verified, under the
// cluster's prefix; a JWT for another cluster is refused; retention then
// keeps exactly what it should.
func TestExecutorStreamsARealSnapshotIntoMinIO(t *testing.T) {
	t.Parallel()
	bao := baotest.Start(t, baotest.Options{})
	m := miniotest.Start(t)
	root := initNode(t, bao, nil)
	c, iss := testCluster(), newIssuer(t)
	if err := identity.Apply(context.Background(), baoClient(t, bao, nil, root), c, iss.identity(t)); err != nil {
		t.Fatalf("the operator's identity: %v", err)
	}
	writeData(t, bao, root, 24, 256<<10) // about 8 MiB of random data in the snapshot: two parts
	jwt := iss.roleToken(t, identity.BackupRole).Reveal()
	jwtFile, credsDir := executorFiles(t, jwt, m)
	cfg := backup.ExecutorConfig{
		Namespace: c.Namespace, Cluster: c.Name, Backup: "b1", OpenBaoAddress: bao.Addr,
		Auth: backup.AuthJWT, JWTMount: backup.OperatorAuthMount, JWTRole: "backup", JWTFile: jwtFile,
		Endpoint: m.Endpoint, Bucket: m.Bucket, PathStyle: true, CredentialsDir: credsDir, PathPrefix: "openbao",
		Timeout: time.Minute, PartSize: 5 << 20, Concurrency: 2,
	}
	report := runExecutor(t, cfg)
	if report.Failed() {
		t.Fatalf("%s: %s", report.Reason, report.Error)
	}
	t.Logf("stored %s: %d bytes in %s, peak RSS %d MiB", report.Key, report.Size, report.Duration, report.PeakRSSBytes>>20)
	if report.Canary == "" || report.CanaryError != "" {
		t.Errorf("no canary: %q", report.CanaryError)
	}
	prefix := backup.ObjectPrefix("openbao", c.Namespace, c.Name)
	if _, ok := backup.ParseObjectKey(prefix, report.Key); !ok || report.Size < 5<<20 {
		t.Fatalf("report %+v", report)
	}
	stored := download(t, m, report.Key)
	sum := sha256.Sum256(stored)
	if hex.EncodeToString(sum[:]) != report.SHA256 || int64(len(stored)) != report.Size {
		t.Fatal("the stored object is not what the report says")
	}
	if _, err := snapshot.Verify(bytes.NewReader(stored)); err != nil {
		t.Fatalf("the stored object is not a good snapshot: %v", err)
	}
	for _, secret := range []string{jwt, m.SecretKey, root.Reveal()} {
		if strings.Contains(string(report.Encode()), secret) || strings.Contains(bao.Log(), secret) {
			t.Error("a secret is in the report or the server log")
		}
	}

	// A token minted for another cluster's audience is refused.
	other, _ := executorFiles(t, iss.token(t, backupSubject, "openbao-operator:team-a/other").Reveal(), m)
	cfg.JWTFile = other
	if r := runExecutor(t, cfg); r.Reason != executor.ReasonAuthFailed {
		t.Errorf("another cluster's token: %+v", r)
	}
	cfg.JWTFile = jwtFile
	checkRetention(t, m, cfg, report.Key)
}

func download(t *testing.T, m *miniotest.Server, key string) []byte {
	t.Helper()
	obj, err := m.Client.GetObject(context.Background(), m.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkRetention plants older snapshots of this cluster (1, 30, 50 and
// 100 hours old), another cluster's and a foreign file, takes one more
// backup and applies retention twice: maxAge 48h (with room in maxCount)
// deletes the 50- and 100-hour-old ones; then maxCount 3 the 30-hour-old
// one, keeping the new backup, the first and the hour-old one. Nothing of
// anyone else's is touched, and neither is the fault planted beside them:
// 99991231T000000Z-xxxxxxxx.snap and a far-future copy carrying a real
// name's tag, which take no place among maxCount and are never deleted.
func checkRetention(t *testing.T, m *miniotest.Server, cfg backup.ExecutorConfig, first string) {
	t.Helper()
	ctx := context.Background()
	prefix := backup.ObjectPrefix(cfg.PathPrefix, cfg.Namespace, cfg.Cluster)
	prover := testProver(cfg.Namespace, cfg.Cluster)
	now := time.Now()
	var byAge []string
	for i, age := range []time.Duration{time.Hour, 30 * time.Hour, 50 * time.Hour, 100 * time.Hour} {
		byAge = append(byAge, prover.SignedObjectKey(prefix, now.Add(-age), fmt.Sprintf("0000000%d", i)))
	}
	foreign := []string{
		testProver(cfg.Namespace, "bao-2").SignedObjectKey(backup.ObjectPrefix(cfg.PathPrefix, cfg.Namespace, "bao-2"), now.Add(-100*time.Hour), "00000009"),
		prover.SignedObjectKey(prefix+"deeper/", now.Add(-100*time.Hour), "00000008"),
		prefix + "notes.txt",
		plantedKey(prefix), forgedKey(prefix, byAge[3]),
	}
	for _, k := range append(byAge, foreign...) {
		if _, err := m.Client.PutObject(ctx, m.Bucket, k, strings.NewReader("x"), 1, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	report := runExecutor(t, cfg)
	if report.Failed() {
		t.Fatal(report.Error)
	}
	store, err := s3store.New(s3store.Config{Endpoint: m.Endpoint, Bucket: m.Bucket, PathStyle: true,
		Credentials: &s3store.Credentials{AccessKeyID: s3store.NewSecret(m.AccessKey), SecretAccessKey: s3store.NewSecret(m.SecretKey)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, pass := range []struct {
		policy backup.Retention
		want   []string
	}{
		{backup.Retention{MaxCount: 5, MaxAge: 48 * time.Hour}, []string{byAge[3], byAge[2]}},
		{backup.Retention{MaxCount: 3}, []string{byAge[1]}},
	} {
		deleted, ignored, err := executor.ApplyRetention(ctx, store, prover, prefix, pass.policy, report.Key, now)
		if err != nil || strings.Join(deleted, " ") != strings.Join(pass.want, " ") {
			t.Fatalf("%+v deleted %v (%v), want %v", pass.policy, deleted, err, pass.want)
		}
		if ignored == nil || ignored.Count != 3 { // notes.txt and the two planted names
			t.Errorf("%+v ignored %+v, want the 3 unproven objects under the prefix", pass.policy, ignored)
		}
	}
	left := map[string]bool{}
	for o := range m.Client.ListObjects(ctx, m.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		left[o.Key] = true
	}
	for _, k := range append([]string{report.Key, first, byAge[0]}, foreign...) {
		if !left[k] {
			t.Errorf("%s was deleted", k)
		}
	}
	if len(left) != 3+len(foreign) {
		t.Errorf("left %v", left)
	}
}
