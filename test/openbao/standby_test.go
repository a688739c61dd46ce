package openbao_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/objectstore/open"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/standby"
	"github.com/openbao/operator/test/baotest"
)

// TestAStandbyServesTheDataOfItsSourcesNewerSnapshot: a source backs up
// twice with the executor into MinIO; a second server with the source's
// static key (a standby, formed from the first snapshot) lists the
// store, and standby.Decide picks the newer proven snapshot (never the
// planted one beside it); the restore executor posts it to the standby,
// which then serves what the source wrote before that snapshot, and not
// what it wrote after. The canary read from the standby as its backup
// role names each snapshot it restored; Decide calls it current only
// with the canary of the served snapshot, and the canary of the earlier
// one (the data of a restore that did not take) is a mismatch.
func TestAStandbyServesTheDataOfItsSourcesNewerSnapshot(t *testing.T) {
	t.Parallel()
	f := newRestoreFixture(t)
	ctx := context.Background()
	key, err := os.ReadFile(filepath.Join(f.bao.Dir, "unseal.key"))
	if err != nil {
		t.Fatal(err)
	}
	sb := baotest.Start(t, baotest.Options{NodeID: "standby-0", Files: map[string][]byte{"unseal.key": key}})
	sbRoot := initNode(t, sb, nil)
	// The standby's own identity for the same service accounts: the
	// operator binds it so after every restore (the test keeps one issuer).
	if err := identity.Apply(ctx, baoClient(t, sb, nil, sbRoot), testCluster(), f.iss.identity(t)); err != nil {
		t.Fatal(err)
	}

	kvWrite(t, f.bao, f.root, "first", "one")
	b1 := runExecutor(t, f.backupCfg)
	kvWrite(t, f.bao, f.root, "second", "two")
	// Names carry the second a snapshot was taken: the next one is named
	// in a later second, so that it is the newer one by name.
	prefix := backup.ObjectPrefix(f.backupCfg.PathPrefix, f.backupCfg.Namespace, f.backupCfg.Cluster)
	if at, ok := backup.ParseObjectKey(prefix, b1.Key); ok {
		time.Sleep(time.Until(at.Add(time.Second)))
	}
	b2 := runExecutor(t, f.backupCfg)
	kvWrite(t, f.bao, f.root, "third", "after")
	if b1.Failed() || b2.Failed() {
		t.Fatalf("backups: %+v %+v", b1, b2)
	}
	putObject(t, f.m, plantedKey(prefix), download(t, f.m, b2.Key))

	// Form from the first snapshot, as the fromBackup path does.
	first := f.restoreBase
	first.Key, first.OpenBaoAddress = b1.Key, sb.Addr
	if r := runRestoreExecutor(t, first); r.Failed() {
		t.Fatalf("forming: %s: %s", r.Reason, r.Error)
	}
	waitForActive(t, baoClient(t, sb, nil, openbao.Token{}), 30*time.Second)
	formedCanary := readCanary(t, sb, f.iss)
	if formedCanary.Key != b1.Key || formedCanary.Backup != f.backupCfg.Backup || formedCanary.WrittenAt != b1.Canary {
		t.Fatalf("the canary of the formed data: %+v, want %s written %s", formedCanary, b1.Key, b1.Canary)
	}

	d := standby.Decide(standby.Observed{Now: time.Now(), Formed: true, FormedKey: b1.Key, Listed: true,
		Snapshots: listProven(t, f, prefix), Prefix: prefix, Cluster: standbyCluster()})
	if d.Post == nil || d.Post.Key != b2.Key {
		t.Fatalf("the standby did not choose the newer snapshot %s: %+v", b2.Key, d.Post)
	}
	next := f.restoreBase
	next.Key, next.OpenBaoAddress = d.Post.Key, sb.Addr
	if r := runRestoreExecutor(t, next); r.Failed() || r.SHA256 != b2.SHA256 {
		t.Fatalf("following: %+v", r)
	}
	waitForActive(t, baoClient(t, sb, nil, openbao.Token{}), 30*time.Second)
	// The restored data's root token is the source's.
	for k, want := range map[string]string{"first": "one", "second": "two"} {
		if v, ok := kvRead(t, sb, f.root, k); !ok || !strings.Contains(v, `"`+want+`"`) {
			t.Errorf("kv/%s on the standby: %q %v, want %q", k, v, ok, want)
		}
	}
	if v, ok := kvRead(t, sb, f.root, "third"); ok {
		t.Errorf("kv/third, written after the snapshot, is on the standby: %q", v)
	}

	// The restore of b2 succeeded: Decide asks for the canary, and the
	// one read from the standby proves it; the formed data's does not.
	served := standby.Observed{Now: time.Now(), Formed: true, FormedKey: b1.Key, Listed: true, Snapshots: listProven(t, f, prefix),
		Prefix: prefix, Cluster: standbyCluster(), Status: &d.Status,
		Restore: &standby.Restore{Found: true, Phase: v1alpha1.RestoreSucceeded, Installed: true, Key: b2.Key, SHA256: b2.SHA256}}
	served.Status.IdentityBoundKey = b2.Key
	if d := standby.Decide(served); !d.ReadCanary || d.Value {
		t.Fatalf("after the restore of %s, before its canary: %+v", b2.Key, d)
	}
	served.Canary = &standby.CanaryRead{Canary: readCanary(t, sb, f.iss)}
	if d := standby.Decide(served); !d.Value || d.Reason != standby.ReasonCurrent || !d.Status.Proven() {
		t.Errorf("with the canary read from the standby: %+v, canary %+v", d, served.Canary)
	}
	served.Canary = &standby.CanaryRead{Canary: formedCanary}
	if d := standby.Decide(served); d.Value || d.Reason != standby.ReasonStandbyCanaryMismatch || !d.Degraded {
		t.Errorf("with the formed data's canary: %+v", d)
	}
}

// readCanary logs in to the standby as its backup role, as the operator
// does after each restore, and reads the canary.
func readCanary(t *testing.T, sb *baotest.Server, iss *issuer) backup.Canary {
	t.Helper()
	data, err := baoClient(t, sb, nil, backupLogin(t, sb, iss, identity.BackupRole)).Read(context.Background(), identity.CanaryPath)
	if err != nil {
		t.Fatalf("read the canary from the standby: %v", err)
	}
	return backup.CanaryOf(data)
}

// listProven lists the source's prefix in MinIO and keeps the names its
// provenance key proves, newest first, as the standby step does.
func listProven(t *testing.T, f restoreFixture, prefix string) []backup.Snapshot {
	t.Helper()
	creds, err := backup.StoreCredentials("", func(k string) (string, error) {
		return map[string]string{backup.AccessKeyIDKey: f.m.AccessKey, backup.SecretAccessKeyKey: f.m.SecretKey}[k], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	store, err := open.Store(context.Background(), objectstore.Config{Endpoint: f.m.Endpoint, Bucket: f.m.Bucket, PathStyle: true, Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	objects, err := store.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(objects))
	for i, o := range objects {
		keys[i] = o.Key
	}
	snaps, ignored := backup.Proven(backup.NewProver([]byte(testProvenanceKey), f.backupCfg.Namespace, f.backupCfg.Cluster), prefix, keys)
	if ignored == nil || ignored.Count != 1 {
		t.Fatalf("the planted name was not ignored: %+v", ignored)
	}
	return snaps
}

func standbyCluster() *v1alpha1.OpenBaoCluster {
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "standby", Namespace: "team-a"}}
	c.Spec.Standby = &v1alpha1.StandbySpec{}
	return c
}
