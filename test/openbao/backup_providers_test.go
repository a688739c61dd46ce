package openbao_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/executor"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/objectstore/open"
	"github.com/openbao/operator/internal/snapshot"
	"github.com/openbao/operator/test/azuritetest"
	"github.com/openbao/operator/test/baotest"
	"github.com/openbao/operator/test/gcstest"
	"github.com/openbao/operator/test/storetest"
)

// TestExecutorStreamsARealSnapshotIntoGCSAndAzure runs the executor, as a
// backup Job does (JWT login, files for the credentials), against the real
// bao 2.4.0 into fake-gcs-server and into Azurite, the latter with a
// shared key and with a SAS token: each object is the verified snapshot,
// no secret is in the report, and retention through the same store keeps
// the newest.
func TestExecutorStreamsARealSnapshotIntoGCSAndAzure(t *testing.T) {
	t.Parallel()
	bao := baotest.Start(t, baotest.Options{})
	root := initNode(t, bao, nil)
	c, iss := testCluster(), newIssuer(t)
	if err := identity.Apply(context.Background(), baoClient(t, bao, nil, root), c, iss.identity(t)); err != nil {
		t.Fatalf("the operator's identity: %v", err)
	}
	writeData(t, bao, root, 24, 256<<10) // about 8 MiB: two parts
	jwt := iss.roleToken(t, identity.BackupRole).Reveal()
	base := backup.ExecutorConfig{
		Namespace: c.Namespace, Cluster: c.Name, Backup: "b1", OpenBaoAddress: bao.Addr,
		Auth: backup.AuthJWT, JWTMount: backup.OperatorAuthMount, JWTRole: "backup", JWTFile: writeFiles(t, map[string]string{"token": jwt}) + "/token",
		PathPrefix: "openbao", Timeout: time.Minute, PartSize: 5 << 20, Concurrency: 2,
	}
	secrets := []string{jwt, root.Reveal()}

	t.Run("GCS", func(t *testing.T) {
		g := gcstest.Start(t)
		cfg := base
		cfg.Provider, cfg.Endpoint, cfg.Bucket = backup.ProviderGCS, g.Endpoint, g.Bucket
		backupTwiceAndRetain(t, cfg, secrets)
	})
	t.Run("AzureSharedKey", func(t *testing.T) {
		a := azuritetest.Start(t)
		cfg := base
		cfg.Provider, cfg.Endpoint, cfg.PathStyle, cfg.Bucket = backup.ProviderAzure, a.Endpoint, true, a.Container
		cfg.CredentialsDir = writeFiles(t, map[string]string{
			backup.AzureAccountNameKey: a.AccountName, backup.AzureAccountKeyKey: a.AccountKey + "\n"})
		backupTwiceAndRetain(t, cfg, append(secrets, a.AccountKey))
	})
	t.Run("AzureSAS", func(t *testing.T) {
		a := azuritetest.Start(t)
		sas := a.SASToken(t)
		cfg := base
		cfg.Provider, cfg.Endpoint, cfg.PathStyle, cfg.Bucket = backup.ProviderAzure, a.Endpoint, true, a.Container
		cfg.CredentialsDir = writeFiles(t, map[string]string{
			backup.AzureAccountNameKey: a.AccountName, backup.AzureSASTokenKey: sas})
		backupTwiceAndRetain(t, cfg, append(secrets, sas, a.AccountKey))
	})
}

// writeFiles writes a directory of files, as a mounted Secret.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func backupTwiceAndRetain(t *testing.T, cfg backup.ExecutorConfig, secrets []string) {
	var keys []string
	for range 2 {
		report := runExecutor(t, cfg)
		if report.Failed() {
			t.Fatalf("%s: %s", report.Reason, report.Error)
		}
		for _, secret := range secrets {
			if strings.Contains(string(report.Encode()), secret) {
				t.Fatal("a secret is in the report")
			}
		}
		t.Logf("stored %s: %d bytes in %s, peak RSS %d MiB", report.Key, report.Size, report.Duration, report.PeakRSSBytes>>20)
		store := storeOf(t, cfg)
		stored := storetest.ReadAll(t, store, report.Key)
		sum := sha256.Sum256(stored)
		if hex.EncodeToString(sum[:]) != report.SHA256 || int64(len(stored)) != report.Size || report.Size < 5<<20 {
			t.Fatalf("the stored object is not what the report says: %+v", report)
		}
		if _, err := snapshot.Verify(bytes.NewReader(stored)); err != nil {
			t.Fatalf("the stored object is not a good snapshot: %v", err)
		}
		keys = append(keys, report.Key)
		time.Sleep(time.Second) // keys are named by the second
	}
	prefix := backup.ObjectPrefix(cfg.PathPrefix, cfg.Namespace, cfg.Cluster)
	deleted, _, err := executor.ApplyRetention(context.Background(), storeOf(t, cfg), testProver(cfg.Namespace, cfg.Cluster), prefix,
		backup.Retention{MaxCount: 1}, keys[1], time.Now())
	if err != nil || len(deleted) != 1 || deleted[0] != keys[0] {
		t.Fatalf("retention deleted %v (%v), want %s", deleted, err, keys[0])
	}
	if objs, err := storeOf(t, cfg).List(context.Background(), prefix); err != nil || len(objs) != 1 || objs[0].Key != keys[1] {
		t.Fatalf("left %+v (%v), want %s", objs, err, keys[1])
	}
}

// storeOf opens the store as retention does, from the same files.
func storeOf(t *testing.T, cfg backup.ExecutorConfig) objectstore.Store {
	t.Helper()
	ocfg := objectstore.Config{Provider: cfg.Provider, Endpoint: cfg.Endpoint, Bucket: cfg.Bucket, PathStyle: cfg.PathStyle}
	if cfg.CredentialsDir != "" {
		creds, err := backup.StoreCredentials(cfg.Provider, func(k string) (string, error) {
			data, err := os.ReadFile(filepath.Join(cfg.CredentialsDir, k))
			if os.IsNotExist(err) {
				return "", nil
			}
			return string(data), err
		})
		if err != nil {
			t.Fatal(err)
		}
		ocfg.Credentials = creds
	}
	store, err := open.Store(context.Background(), ocfg)
	if err != nil {
		t.Fatal(err)
	}
	return store
}
