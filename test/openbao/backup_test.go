package openbao_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
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
	"github.com/openbao/operator/internal/objectstore/s3store"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/snapshot"
	"github.com/openbao/operator/test/baotest"
	"github.com/openbao/operator/test/miniotest"
)

// The operator's identity in OpenBao, as the operator sets it up at
// initialization: JWT auth at openbao-operator, a role "backup" bound to
// the backup service account and the cluster's audience, and a policy
// that reads snapshots and nothing else. Here the test sets it up with the
// root token and a key of its own in place of the service-account issuer.
const (
	testNamespace = "ns"
	testCluster   = "bao"
	backupSubject = "system:serviceaccount:ns:bao-backup-serviceaccount"
	backupAud     = "openbao-operator:ns/bao"
)

type issuer struct{ key *ecdsa.PrivateKey }

func newIssuer(t *testing.T) issuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return issuer{key}
}

func (i issuer) publicPEM(t *testing.T) string {
	der, err := x509.MarshalPKIXPublicKey(&i.key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// sign makes an ES256 JWT as the kubelet's projected token carries.
func (i issuer) sign(t *testing.T, sub, aud string, ttl time.Duration) string {
	t.Helper()
	enc := func(v any) string {
		data, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(data)
	}
	now := time.Now()
	signing := enc(map[string]string{"alg": "ES256", "typ": "JWT"}) + "." + enc(map[string]any{
		"iss": "https://kubernetes.default.svc", "sub": sub, "aud": []string{aud},
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(ttl).Unix(),
	})
	digest := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, i.key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// setUpOperatorIdentity configures the backup identity with the root token.
func setUpOperatorIdentity(t *testing.T, bao *baotest.Server, root openbao.Token, iss issuer) {
	t.Helper()
	pub, _ := json.Marshal(iss.publicPEM(t))
	steps := []struct{ method, path, body string }{
		{http.MethodPost, "/v1/sys/auth/" + backup.OperatorAuthMount, `{"type": "jwt"}`},
		{http.MethodPost, "/v1/auth/" + backup.OperatorAuthMount + "/config", `{"jwt_validation_pubkeys": [` + string(pub) + `]}`},
		{http.MethodPut, "/v1/sys/policies/acl/openbao-operator-backup",
			`{"policy": "path \"sys/storage/raft/snapshot\" { capabilities = [\"read\"] }"}`},
		{http.MethodPost, "/v1/auth/" + backup.OperatorAuthMount + "/role/backup", `{"role_type": "jwt", "user_claim": "sub",
			"bound_subject": "` + backupSubject + `", "bound_audiences": ["` + backupAud + `"],
			"token_policies": ["openbao-operator-backup"], "token_ttl": "10m", "token_max_ttl": "10m"}`},
	}
	for _, s := range steps {
		if status, body := callToken(t, bao, s.method, s.path, root, s.body); status >= 300 {
			t.Fatalf("%s %s: %d %s", s.method, s.path, status, body)
		}
	}
}

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
	return executor.Run(context.Background(), cfg, executor.Deps{
		OpenBao: openbao.New, NewStore: s3store.New, ReadFile: os.ReadFile, Clock: clock.RealClock{},
		Random: rand.Reader, Sleep: executor.SleepContext, PeakRSS: executor.PeakRSS,
	})
}

// TestExecutorStreamsARealSnapshotIntoMinIO runs the executor against the
// real bao 2.4.0 and a real MinIO on loopback, logging in with a JWT as a
// backup Job does: the object is the snapshot, verified, under the
// cluster's prefix; a JWT for another cluster is refused; retention then
// keeps exactly what it should.
func TestExecutorStreamsARealSnapshotIntoMinIO(t *testing.T) {
	bao := baotest.Start(t, baotest.Options{})
	m := miniotest.Start(t)
	root := initNode(t, bao, nil)
	iss := newIssuer(t)
	setUpOperatorIdentity(t, bao, root, iss)
	writeData(t, bao, root, 24, 256<<10) // about 8 MiB of random data in the snapshot: two parts
	jwt := iss.sign(t, backupSubject, backupAud, 10*time.Minute)
	jwtFile, credsDir := executorFiles(t, jwt, m)
	cfg := backup.ExecutorConfig{
		Namespace: testNamespace, Cluster: testCluster, Backup: "b1", OpenBaoAddress: bao.Addr,
		Auth: backup.AuthJWT, JWTMount: backup.OperatorAuthMount, JWTRole: "backup", JWTFile: jwtFile,
		Endpoint: m.Endpoint, Bucket: m.Bucket, PathStyle: true, CredentialsDir: credsDir, PathPrefix: "openbao",
		Timeout: time.Minute, PartSize: 5 << 20, Concurrency: 2,
	}
	report := runExecutor(t, cfg)
	if report.Failed() {
		t.Fatalf("%s: %s", report.Reason, report.Error)
	}
	t.Logf("stored %s: %d bytes in %s, peak RSS %d MiB", report.Key, report.Size, report.Duration, report.PeakRSSBytes>>20)
	prefix := backup.ObjectPrefix("openbao", testNamespace, testCluster)
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
	other, _ := executorFiles(t, iss.sign(t, backupSubject, "openbao-operator:ns/other", 10*time.Minute), m)
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
// anyone else's is touched.
func checkRetention(t *testing.T, m *miniotest.Server, cfg backup.ExecutorConfig, first string) {
	t.Helper()
	ctx := context.Background()
	prefix := backup.ObjectPrefix(cfg.PathPrefix, cfg.Namespace, cfg.Cluster)
	now := time.Now()
	var byAge []string
	for i, age := range []time.Duration{time.Hour, 30 * time.Hour, 50 * time.Hour, 100 * time.Hour} {
		byAge = append(byAge, backup.ObjectKey(prefix, now.Add(-age), fmt.Sprintf("0000000%d", i)))
	}
	foreign := []string{
		backup.ObjectKey(backup.ObjectPrefix(cfg.PathPrefix, cfg.Namespace, "bao-2"), now.Add(-100*time.Hour), "00000009"),
		backup.ObjectKey(prefix+"deeper/", now.Add(-100*time.Hour), "00000008"),
		prefix + "notes.txt",
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
		deleted, err := executor.ApplyRetention(ctx, store, prefix, pass.policy, report.Key, now)
		if err != nil || strings.Join(deleted, " ") != strings.Join(pass.want, " ") {
			t.Fatalf("%+v deleted %v (%v), want %v", pass.policy, deleted, err, pass.want)
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
