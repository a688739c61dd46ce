package openbao_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/test/baotest"
	"github.com/openbao/operator/test/miniotest"
)

// backupLogin logs in to role as the Job of that role does.
func backupLogin(t *testing.T, bao *baotest.Server, iss *issuer, role string) openbao.Token {
	t.Helper()
	tok, _, err := baoClient(t, bao, nil, openbao.Token{}).Login(context.Background(), identity.Mount, role,
		iss.roleToken(t, role))
	if err != nil {
		t.Fatalf("login as %s: %v", role, err)
	}
	return tok
}

// TestTheBackupRoleMayWriteAndReadTheCanaryAndNothingElse: after Apply
// the backup role writes and reads openbao-operator/canary; another path
// of the mount, the mount list and the mount itself are refused.
func TestTheBackupRoleMayWriteAndReadTheCanaryAndNothingElse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bao := baotest.Start(t, baotest.Options{})
	root := initNode(t, bao, nil)
	iss := newIssuer(t)
	rootClient := baoClient(t, bao, nil, root)
	if err := identity.Apply(ctx, rootClient, testCluster(), iss.identity(t)); err != nil {
		t.Fatalf("apply: %v", err)
	}
	engines, err := rootClient.SecretsEngines(ctx)
	if err != nil || !engines[identity.CanaryMount].KVVersion1() {
		t.Fatalf("secrets engines %v (%v), want kv version 1 at %s", engines, err, identity.CanaryMount)
	}
	if err := identity.Apply(ctx, rootClient, testCluster(), iss.identity(t)); err != nil {
		t.Fatalf("a second apply over the mount: %v", err)
	}

	b := baoClient(t, bao, nil, backupLogin(t, bao, iss, identity.BackupRole))
	data, stamp := backup.CanaryValue("b1", "k1", time.Now())
	if err := b.Write(ctx, identity.CanaryPath, data); err != nil {
		t.Fatalf("the backup role writes the canary: %v", err)
	}
	read, err := b.Read(ctx, identity.CanaryPath)
	if err != nil {
		t.Fatalf("the backup role reads the canary: %v", err)
	}
	if err := backup.CanaryMatches(read, "b1", stamp); err != nil {
		t.Error(err)
	}
	btok := backupLogin(t, bao, iss, identity.BackupRole)
	assertRefused(t, bao, btok, http.MethodPost, "/v1/"+identity.CanaryMount+"/other")
	assertRefused(t, bao, btok, http.MethodGet, "/v1/"+identity.CanaryMount+"/other")
	assertRefused(t, bao, btok, http.MethodGet, "/v1/sys/mounts")
	assertRefused(t, bao, btok, http.MethodDelete, "/v1/"+identity.CanaryPath)
	assertRefused(t, bao, btok, http.MethodPost, "/v1/sys/mounts/"+identity.CanaryMount+"/tune")
	if _, err := b.Read(ctx, identity.CanaryMount+"/other"); !errors.Is(err, openbao.ErrPermissionDenied) {
		t.Errorf("read another path of the mount: %v, want ErrPermissionDenied", err)
	}
	// The restore role may not touch the canary.
	rtok := backupLogin(t, bao, iss, identity.RestoreRole)
	assertRefused(t, bao, rtok, http.MethodGet, "/v1/"+identity.CanaryPath)
	assertRefused(t, bao, rtok, http.MethodPost, "/v1/"+identity.CanaryPath)
}

// revision1Policy is the backup policy of revision 1, as an earlier
// release set it up.
const revision1Policy = `path "sys/storage/raft/snapshot" { capabilities = ["read"] }
`

// applyRevision1 sets up the identity as an earlier release did: the auth
// method, the upgrade and backup roles and policies, both roles bound to
// the cluster's one audience; no restore or drill role, no canary.
func applyRevision1(t *testing.T, w openbao.Client, iss identity.Issuer) {
	t.Helper()
	for _, r := range identity.Requests(testCluster(), iss) {
		if strings.Contains(r.Name, "restore") || strings.Contains(r.Name, "drill") || r.Path == "sys/mounts/"+identity.CanaryMount {
			continue
		}
		if r.Path == "sys/policies/acl/"+identity.BackupPolicy {
			r.Data = map[string]any{"policy": revision1Policy}
		}
		if _, ok := r.Data["bound_audiences"]; ok {
			r.Data["bound_audiences"] = []any{testCluster().OperatorTokenAudience()}
		}
		if err := w.Write(context.Background(), r.Path, r.Data); err != nil {
			t.Fatalf("revision 1 (%s): %v", r.Name, err)
		}
	}
}

// TestApplyOverARevision1IdentityAddsTheRestoreRoleAndTheCanary: a backup
// of a cluster set up by an earlier release goes on without a canary and
// says why; Apply with the root token (what the operator does with the
// stored token) adds the restore role and the canary, and the next backup
// writes one.
func TestApplyOverARevision1IdentityAddsTheRestoreRoleAndTheCanary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRevision1Fixture(t)
	if _, _, err := baoClient(t, f.bao, nil, openbao.Token{}).Login(ctx, identity.Mount, identity.RestoreRole,
		f.iss.roleToken(t, identity.RestoreRole)); err == nil {
		t.Fatal("revision 1 has a restore role: the simulation is wrong")
	}
	old := runExecutor(t, f.backupCfg)
	if old.Failed() || old.Canary != "" || !strings.Contains(old.CanaryError, "HTTP 403") {
		t.Fatalf("a backup of revision 1: %+v", old)
	}
	t.Logf("revision 1: %s", old.CanaryError)

	if err := identity.Apply(ctx, baoClient(t, f.bao, nil, f.root), testCluster(), f.iss.identity(t)); err != nil {
		t.Fatalf("apply over revision 1: %v", err)
	}
	backupLogin(t, f.bao, f.iss, identity.RestoreRole)
	// The operator records revision 3: the next Job's token is of the
	// backup role's own audience, which the role is now bound to.
	if _, _, err := baoClient(t, f.bao, nil, openbao.Token{}).Login(ctx, identity.Mount, identity.BackupRole,
		f.iss.token(t, backupSubject, testCluster().OperatorTokenAudience())); err == nil {
		t.Error("after the update the backup role still takes the cluster's shared audience")
	}
	f.backupCfg.JWTFile = writeFiles(t, map[string]string{"token": f.iss.roleToken(t, identity.BackupRole).Reveal()}) + "/token"
	r := runExecutor(t, f.backupCfg)
	if r.Failed() || r.Canary == "" || r.CanaryError != "" {
		t.Fatalf("a backup after the update: %+v", r)
	}
	read, err := baoClient(t, f.bao, nil, f.root).Read(ctx, identity.CanaryPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := backup.CanaryMatches(read, f.backupCfg.Backup, r.Canary); err != nil {
		t.Error(err)
	}
}

// TestABackupWithoutTheCanaryMountSaysSo: the policy allows the path but
// no mount serves it (someone disabled it): 404, and the backup goes on.
// Apply refuses to take a path that holds KV version 2.
func TestABackupWithoutTheCanaryMountSaysSo(t *testing.T) {
	t.Parallel()
	f := newRevision1Fixture(t)
	if err := identity.Apply(context.Background(), baoClient(t, f.bao, nil, f.root), testCluster(), f.iss.identity(t)); err != nil {
		t.Fatal(err)
	}
	f.backupCfg.JWTFile = writeFiles(t, map[string]string{"token": f.iss.roleToken(t, identity.BackupRole).Reveal()}) + "/token"
	if status, body := callToken(t, f.bao, http.MethodDelete, "/v1/sys/mounts/"+identity.CanaryMount, f.root, ""); status != http.StatusNoContent {
		t.Fatalf("disable the canary mount: %d %s", status, body)
	}
	r := runExecutor(t, f.backupCfg)
	if r.Failed() || r.Canary != "" || r.CanaryError == "" {
		t.Fatalf("report %+v", r)
	}
	t.Logf("no mount: %s", r.CanaryError)

	// KV version 2 at the path is another engine: Apply refuses it.
	if status, body := callToken(t, f.bao, http.MethodPost, "/v1/sys/mounts/"+identity.CanaryMount, f.root,
		`{"type":"kv","options":{"version":"2"}}`); status != http.StatusNoContent {
		t.Fatalf("mount kv version 2: %d %s", status, body)
	}
	err := identity.Apply(context.Background(), baoClient(t, f.bao, nil, f.root), testCluster(), f.iss.identity(t))
	if !errors.Is(err, identity.ErrCanaryMountTaken) {
		t.Errorf("apply over kv version 2: %v, want ErrCanaryMountTaken", err)
	}
}

// revision1Fixture is one initialized server with the identity of an
// earlier release, MinIO, and the backup executor's configuration.
type revision1Fixture struct {
	bao       *baotest.Server
	root      openbao.Token
	iss       *issuer
	backupCfg backup.ExecutorConfig
}

func newRevision1Fixture(t *testing.T) revision1Fixture {
	t.Helper()
	bao := baotest.Start(t, baotest.Options{})
	m := miniotest.Start(t)
	root := initNode(t, bao, nil)
	c, iss := testCluster(), newIssuer(t)
	applyRevision1(t, baoClient(t, bao, nil, root), iss.identity(t))
	jwtFile, credsDir := executorFiles(t, iss.token(t, backupSubject, c.OperatorTokenAudience()).Reveal(), m)
	cfg := backup.ExecutorConfig{
		Namespace: c.Namespace, Cluster: c.Name, Backup: "b1", OpenBaoAddress: bao.Addr,
		Auth: backup.AuthJWT, JWTMount: backup.OperatorAuthMount, JWTRole: identity.BackupRole, JWTFile: jwtFile,
		Endpoint: m.Endpoint, Bucket: m.Bucket, PathStyle: true, CredentialsDir: credsDir, PathPrefix: "openbao",
		Timeout: time.Minute, PartSize: 5 << 20, Concurrency: 2,
	}
	return revision1Fixture{bao: bao, root: root, iss: iss, backupCfg: cfg}
}

// TestTheSnapshotHoldsTheCanaryItsBackupRecorded: a backup writes the
// canary, the canary changes afterwards, and the restored snapshot holds
// exactly the value the backup reported.
func TestTheSnapshotHoldsTheCanaryItsBackupRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRestoreFixture(t)
	b := runExecutor(t, f.backupCfg)
	if b.Failed() || b.Canary == "" {
		t.Fatalf("backup: %+v", b)
	}
	root := baoClient(t, f.bao, nil, f.root)
	later, _ := backup.CanaryValue("b2", "k2", time.Now())
	if err := root.Write(ctx, identity.CanaryPath, later); err != nil {
		t.Fatal(err)
	}
	cfg := f.restoreBase
	cfg.Key, cfg.ExpectedSHA256 = b.Key, b.SHA256
	if r := runRestoreExecutor(t, cfg); r.Failed() {
		t.Fatalf("restore: %s: %s", r.Reason, r.Error)
	}
	waitForActive(t, baoClient(t, f.bao, nil, openbao.Token{}), 30*time.Second)
	read, err := root.Read(ctx, identity.CanaryPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := backup.CanaryMatches(read, f.backupCfg.Backup, b.Canary); err != nil {
		t.Errorf("the restored copy: %v", err)
	}
	if err := backup.CanaryMatches(later, f.backupCfg.Backup, b.Canary); !errors.Is(err, backup.ErrCanaryMismatch) {
		t.Errorf("a later canary matches the backup's: %v", err)
	}
}

// TestADrillTokenLogsInToTheRestoredCopyOnlyNeverToItsSource: the token
// the operator mints to log in to a drill's copy (identity.DrillLogin:
// the drill account, the snapshot's own audience) is refused by the
// cluster the backup was taken of, at every role, once the backup is
// over; the copy restored from that snapshot takes it at the drill role,
// which reads the canary and the Raft state and nothing else. Restoring
// onto the same server stands for the copy: it holds the snapshot's data.
func TestADrillTokenLogsInToTheRestoredCopyOnlyNeverToItsSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRestoreFixture(t)
	b := runExecutor(t, f.backupCfg)
	if b.Failed() || b.Canary == "" {
		t.Fatalf("backup: %+v", b)
	}
	c := testCluster()
	login := identity.DrillLogin(c, b.Key)
	drillJWT := f.iss.token(t, identity.Subject(c.Namespace, login.ServiceAccount), login.Audience)
	anon := baoClient(t, f.bao, nil, openbao.Token{})
	for _, role := range []string{identity.DrillRole, identity.BackupRole, identity.RestoreRole, identity.UpgradeRole} {
		if _, _, err := anon.Login(ctx, identity.Mount, role, drillJWT); err == nil {
			t.Errorf("the source takes the drill's token at role %s", role)
		}
	}

	// The copy: the snapshot's data, with the drill role at its audience.
	cfg := f.restoreBase
	cfg.Key, cfg.ExpectedSHA256 = b.Key, b.SHA256
	if r := runRestoreExecutor(t, cfg); r.Failed() {
		t.Fatalf("restore: %s: %s", r.Reason, r.Error)
	}
	waitForActive(t, anon, 30*time.Second)
	tok, _, err := anon.Login(ctx, identity.Mount, login.Role, drillJWT)
	if err != nil {
		t.Fatalf("the copy refuses the drill's token: %v", err)
	}
	copyClient := baoClient(t, f.bao, nil, tok)
	read, err := copyClient.Read(ctx, identity.CanaryPath)
	if err != nil {
		t.Fatalf("the drill role reads the canary: %v", err)
	}
	if err := backup.CanaryMatches(read, f.backupCfg.Backup, b.Canary); err != nil {
		t.Error(err)
	}
	if _, err := copyClient.AutopilotState(ctx); err != nil {
		t.Errorf("the drill role reads the autopilot state: %v", err)
	}
	assertRefused(t, f.bao, tok, http.MethodGet, "/v1/sys/storage/raft/snapshot")
	assertRefused(t, f.bao, tok, http.MethodPost, "/v1/sys/storage/raft/snapshot-force")
	assertRefused(t, f.bao, tok, http.MethodPost, "/v1/"+identity.CanaryPath)
	assertRefused(t, f.bao, tok, http.MethodPut, "/v1/sys/step-down")
	assertRefused(t, f.bao, tok, http.MethodPost, "/v1/"+identity.DrillRolePath)
	assertRefused(t, f.bao, tok, http.MethodGet, "/v1/kv/before")

	// The backup role may set the drill role's audience, within this
	// cluster's drill audiences, and nothing else of it.
	btok := backupLogin(t, f.bao, f.iss, identity.BackupRole)
	for name, body := range map[string]string{
		"another cluster's drill audience": `{"role_type":"jwt","bound_audiences":"openbao-operator:team-a/other:drill:x"}`,
		"the backup role's audience":       `{"role_type":"jwt","bound_audiences":"openbao-operator:team-a/bao:backup"}`,
		"another policy":                   `{"role_type":"jwt","bound_audiences":"` + c.DrillIdleAudience() + `","token_policies":"root"}`,
		"another account":                  `{"role_type":"jwt","bound_audiences":"` + c.DrillIdleAudience() + `","bound_subject":"` + backupSubject + `"}`,
	} {
		if code, _ := callToken(t, f.bao, http.MethodPost, "/v1/"+identity.DrillRolePath, btok, body); code != http.StatusForbidden {
			t.Errorf("the backup role sets the drill role to %s: HTTP %d, want 403", name, code)
		}
	}
	for _, path := range []string{"auth/" + identity.Mount + "/role/restore", "auth/" + identity.Mount + "/role/other"} {
		if code, _ := callToken(t, f.bao, http.MethodPost, "/v1/"+path, btok,
			`{"role_type":"jwt","bound_audiences":"`+c.DrillIdleAudience()+`"}`); code != http.StatusForbidden {
			t.Errorf("the backup role writes %s: HTTP %d, want 403", path, code)
		}
	}
}
