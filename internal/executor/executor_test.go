package executor_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/executor"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/objectstore/memstore"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
	"github.com/openbao/operator/internal/snapshot"
)

const (
	jwt         = "eyJhbGciOiJSUzI1NiJ9.JWT-NEVER-PRINTED.sig"
	issuedToken = "s.ISSUED-TOKEN-NEVER-PRINTED"
	secretKey   = "SECRET-ACCESS-KEY-NEVER-PRINTED"
)

func snapshotFixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "snapshot", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// harness is one executor run against fakes.
type harness struct {
	cfg       backup.ExecutorConfig
	bao       *openbaofake.Client
	store     *memstore.Store
	files     map[string]string
	mu        sync.Mutex
	addresses []string // the addresses clients were made for, with "+token" when they carry one
	sleeps    int
	onSleep   func()               // runs at each wait, to end a fault
	storeCfgs []objectstore.Config // what the store was opened with
}

// testProvenanceKey is ns/bao's provenance key in these tests.
const testProvenanceKey = "0123456789abcdef0123456789abcdef"

// signer is the prover of cluster ns/<cluster> with testProvenanceKey.
func signer(cluster string) backup.Prover {
	return backup.NewProver([]byte(testProvenanceKey), "ns", cluster)
}

func newHarness(t *testing.T) *harness {
	h := &harness{
		cfg: backup.ExecutorConfig{
			Namespace: "ns", Cluster: "bao", Backup: "b1",
			OpenBaoAddress: "https://bao.ns.svc:8200", OpenBaoCAFile: "/ca/ca.crt", ServerDomain: "bao-internal.ns.svc",
			Auth: backup.AuthJWT, JWTMount: backup.OperatorAuthMount, JWTRole: "backup", JWTFile: "/id/token",
			Endpoint: "http://store:9000", Bucket: "backups", PathPrefix: "p", CredentialsDir: "/creds",
			Timeout: time.Minute, PartSize: 5 << 20, Concurrency: 1, ProvenanceKeyFile: "/provenance/key",
		},
		bao: &openbaofake.Client{
			LeaderAnswer: openbao.Leader{HAEnabled: true, IsSelf: true, LeaderAddress: "https://bao-0.bao-internal.ns.svc:8200"},
			LoginToken:   openbao.NewToken(issuedToken),
			SnapshotData: snapshotFixture(t, "with-data.snap"),
		},
		store: memstore.New(),
		files: map[string]string{
			"/ca/ca.crt": "PEM", "/id/token": jwt + "\n", "/creds/AWS_ACCESS_KEY_ID": "AKID",
			"/creds/AWS_SECRET_ACCESS_KEY": secretKey, "/provenance/key": testProvenanceKey,
		},
	}
	return h
}

func (h *harness) run(t *testing.T) backup.Report {
	t.Helper()
	return executor.Run(context.Background(), h.cfg, executor.Deps{
		OpenBao: func(o openbao.Options) (openbao.Client, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			a := o.Address
			if !o.Token.IsZero() {
				a += "+token"
			}
			h.addresses = append(h.addresses, a)
			return h.bao, nil
		},
		NewStore: func(_ context.Context, c objectstore.Config) (objectstore.Store, error) {
			h.storeCfgs = append(h.storeCfgs, c)
			if h.cfg.CredentialsDir == "" && c.Credentials == nil && c.AmbientIdentity {
				return h.store, nil // the Job's own identity
			}
			if c.Credentials == nil || c.Credentials.SecretAccessKey.Reveal() != secretKey {
				return nil, errors.New("credentials not read")
			}
			return h.store, nil
		},
		ReadFile: func(p string) ([]byte, error) {
			v, ok := h.files[p]
			if !ok {
				return nil, fmt.Errorf("open %s: %w", p, fs.ErrNotExist)
			}
			return []byte(v), nil
		},
		Clock:  clocktesting.NewFakeClock(time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)),
		Random: bytes.NewReader(bytes.Repeat([]byte{0xab}, 64)),
		Sleep: func(context.Context, time.Duration) {
			h.sleeps++
			if h.onSleep != nil {
				h.onSleep()
			}
		},
	})
}

func TestAGoodRunStoresTheCheckedSnapshotUnderTheClustersPrefix(t *testing.T) {
	h := newHarness(t)
	r := h.run(t)
	if r.Failed() {
		t.Fatalf("%s: %s", r.Reason, r.Error)
	}
	want := h.bao.SnapshotData
	sum := sha256.Sum256(want)
	if r.Key != signer("bao").SignedObjectKey("p/ns/bao/", time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC), "abababab") || r.Size != int64(len(want)) ||
		r.SHA256 != hex.EncodeToString(sum[:]) || r.RaftIndex == 0 || r.Duration == "" {
		t.Errorf("report %+v", r)
	}
	if !bytes.Equal(h.store.Data(r.Key), want) {
		t.Error("the stored object differs from the snapshot")
	}
	if h.bao.Logins[0] != "openbao-operator/backup" || h.bao.CallCount("Snapshot") != 1 {
		t.Errorf("login roles %v, %d snapshots", h.bao.Logins, h.bao.CallCount("Snapshot"))
	}
	// Log in, find the leader, use it at its own address; then again to
	// disarm the drill role.
	once := "https://bao.ns.svc:8200 https://bao.ns.svc:8200 https://bao-0.bao-internal.ns.svc:8200+token"
	if strings.Join(h.addresses, " ") != once+" "+once {
		t.Errorf("clients for %v", h.addresses)
	}
}

func TestATokenFromASecretNeedsNoLogin(t *testing.T) {
	h := newHarness(t)
	h.cfg.Auth, h.cfg.TokenFile = backup.AuthToken, "/id/openbao-token"
	h.files["/id/openbao-token"] = issuedToken
	if r := h.run(t); r.Failed() || h.bao.CallCount("Login") != 0 {
		t.Fatalf("%+v, %d logins", r, h.bao.CallCount("Login"))
	}
}

func TestAStandbyBehindTheServiceSendsTheExecutorToTheLeader(t *testing.T) {
	h := newHarness(t)
	h.bao.LeaderAnswer = openbao.Leader{HAEnabled: true, LeaderAddress: "https://bao-1.bao-internal.ns.svc:8200"}
	if r := h.run(t); r.Failed() {
		t.Fatal(r.Error)
	}
	if last := h.addresses[len(h.addresses)-1]; last != "https://bao-1.bao-internal.ns.svc:8200+token" {
		t.Errorf("snapshot taken through %s", last)
	}
}

// TestTheExecutorAsksTheActiveServerAtItsOwnAddress: the server that
// answered sys/leader through the client Service as the active one is
// asked at the address it names, never through the Service again, which
// may name a standby by then (and a standby redirects the snapshot).
func TestTheExecutorAsksTheActiveServerAtItsOwnAddress(t *testing.T) {
	h := newHarness(t)
	if r := h.run(t); r.Failed() {
		t.Fatal(r.Error)
	}
	for _, a := range h.addresses {
		if strings.HasSuffix(a, "+token") && a != "https://bao-0.bao-internal.ns.svc:8200+token" {
			t.Errorf("a client holding the token was made for %s, want the active server's own address", a)
		}
	}
}

func TestTheTokenGoesToNoServerOutsideTheCluster(t *testing.T) {
	h := newHarness(t)
	h.bao.LeaderAnswer = openbao.Leader{HAEnabled: true, LeaderAddress: "https://evil.example.com:8200"}
	r := h.run(t)
	if r.Reason != executor.ReasonLeaderNotFound || h.bao.CallCount("Snapshot") != 0 {
		t.Fatalf("%+v, %d snapshots", r, h.bao.CallCount("Snapshot"))
	}
	for _, a := range h.addresses {
		if strings.Contains(a, "evil") {
			t.Errorf("a client was made for %s", a)
		}
	}
}

func TestABadSnapshotIsNeverStored(t *testing.T) {
	cases := map[string]struct {
		data     string
		reasons  []string
		attempts int
	}{
		"truncated (retried, as a cut connection)": {"truncated.snap", []string{snapshot.ReasonSnapshotTruncated}, 3},
		"bit-flipped (not retried)":                {"bit-flipped.snap", []string{snapshot.ReasonSnapshotCorrupt, snapshot.ReasonSnapshotChecksumMismatch}, 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.bao.SnapshotData = snapshotFixture(t, tc.data)
			r := h.run(t)
			if !contains(tc.reasons, r.Reason) || h.bao.CallCount("Snapshot") != tc.attempts {
				t.Fatalf("%+v after %d snapshots", r, h.bao.CallCount("Snapshot"))
			}
			if keys := h.store.Keys(); len(keys) != 0 {
				t.Errorf("stored %v", keys)
			}
		})
	}
}

func contains(set []string, s string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

func TestFailuresThatMayPassAreRetriedAndOthersAreNot(t *testing.T) {
	cases := map[string]struct {
		set      func(h *harness)
		reason   string
		attempts int
	}{
		"a store that does not answer": {func(h *harness) {
			h.store.StatErr = errors.New("connection refused")
		}, executor.ReasonStoreFailed, 3},
		"credentials the store refuses": {func(h *harness) {
			h.store.StatErr = &objectstore.Error{Op: "stat", Permanent: true, Err: errors.New("Access Denied (HTTP 403 AccessDenied)")}
		}, executor.ReasonStoreFailed, 1},
		"a role OpenBao refuses": {func(h *harness) {
			h.bao.LoginErr = &openbao.StatusError{Op: "auth/openbao-operator/login", Code: 400, Messages: []string{"invalid role"}}
		}, executor.ReasonAuthFailed, 1},
		"a policy without the snapshot": {func(h *harness) {
			h.bao.SnapshotErr = &openbao.StatusError{Op: openbao.SnapshotPath, Code: 403, Messages: []string{"permission denied"}}
		}, executor.ReasonSnapshotFailed, 1},
		"a sealed server": {func(h *harness) {
			h.bao.SnapshotErr = &openbao.StatusError{Op: openbao.SnapshotPath, Code: 503}
		}, executor.ReasonSnapshotFailed, 3},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			tc.set(h)
			r := h.run(t)
			if r.Reason != tc.reason || h.sleeps != tc.attempts-1 {
				t.Fatalf("%+v after %d waits, want %s after %d attempts", r, h.sleeps, tc.reason, tc.attempts)
			}
		})
	}
}

func TestAnUploadTheStoreDoesNotHoldAsSentIsDeleted(t *testing.T) {
	h := newHarness(t)
	h.store.CorruptStat = true
	r := h.run(t)
	if r.Reason != executor.ReasonUploadUnverified || len(h.store.Keys()) != 0 {
		t.Fatalf("%+v, store holds %v", r, h.store.Keys())
	}
	// A store that keeps no checksums is read back.
	h = newHarness(t)
	h.store.NoChecksums = true
	if r := h.run(t); r.Failed() {
		t.Fatalf("read back: %+v", r)
	}
}

func TestTheReportHoldsNoSecret(t *testing.T) {
	h := newHarness(t)
	// An error that quotes what it was sent (a store or a proxy could).
	h.bao.SnapshotErr = fmt.Errorf("upstream said: bad token %s for key %s, jwt %s", issuedToken, secretKey, jwt)
	r := h.run(t)
	text := string(r.Encode())
	for _, secret := range []string{jwt, issuedToken, secretKey} {
		if strings.Contains(text, secret) {
			t.Errorf("the report holds a secret: %s", text)
		}
	}
	if !r.Failed() || !strings.Contains(r.Error, "[redacted]") {
		t.Errorf("report %+v", r)
	}
}

func TestTheCanaryIsWrittenOnTheLeaderBeforeTheSnapshotAndReported(t *testing.T) {
	h := newHarness(t)
	r := h.run(t)
	if r.Failed() || r.Canary != "2025-03-04T05:06:07Z" || r.CanaryError != "" {
		t.Fatalf("report %+v", r)
	}
	if err := backup.CanaryMatches(h.bao.Written["openbao-operator/canary"], "b1", r.Canary); err != nil {
		t.Errorf("the canary written: %v", err)
	}
	if got := backup.CanaryOf(h.bao.Written["openbao-operator/canary"]).Key; got != r.Key {
		t.Errorf("the canary names snapshot %q, the snapshot is %q", got, r.Key)
	}
	if w, s := slices.Index(h.bao.Order, "Write"), slices.Index(h.bao.Order, "Snapshot"); w < 0 || w > s {
		t.Errorf("calls %v: the canary must be written before the snapshot", h.bao.Order)
	}
}

func TestACanaryTheClusterCannotTakeLeavesTheBackupWithoutOne(t *testing.T) {
	for code, name := range map[int]string{403: "an identity of an earlier release", 404: "no canary mount"} {
		h := newHarness(t)
		h.bao.WriteErrs = map[string]error{"openbao-operator/canary": &openbao.StatusError{Op: "openbao-operator/canary", Code: code, Messages: []string{"permission denied"}}}
		r := h.run(t)
		if r.Failed() || r.Canary != "" || !strings.Contains(r.CanaryError, fmt.Sprintf("HTTP %d", code)) || r.Key == "" {
			t.Errorf("%s: report %+v", name, r)
		}
	}
	// Other failures are the attempt's: a sealed server is retried.
	h := newHarness(t)
	h.bao.WriteErrs = map[string]error{"openbao-operator/canary": &openbao.StatusError{Op: "openbao-operator/canary", Code: 503}}
	if r := h.run(t); r.Reason != executor.ReasonCanaryFailed || h.sleeps != 2 || h.bao.CallCount("Snapshot") != 0 {
		t.Errorf("sealed: %+v after %d waits, %d snapshots", r, h.sleeps, h.bao.CallCount("Snapshot"))
	}
}

// TestTheDrillRoleAcceptsTheSnapshotsAudienceOnlyWhileItIsTaken: the
// drill role is set to this snapshot's audience before the canary and the
// snapshot, and back to the idle one after, so the snapshot holds the
// audience the drill's token carries and the cluster no longer does.
func TestTheDrillRoleAcceptsTheSnapshotsAudienceOnlyWhileItIsTaken(t *testing.T) {
	h := newHarness(t)
	r := h.run(t)
	if r.Failed() {
		t.Fatalf("%s: %s", r.Reason, r.Error)
	}
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bao"}}
	want := []string{identity.DrillRolePath, "openbao-operator/canary", identity.DrillRolePath}
	if !slices.Equal(h.bao.Writes, want) {
		t.Fatalf("writes %v, want %v", h.bao.Writes, want)
	}
	if got := h.bao.Written[identity.DrillRolePath]["bound_audiences"]; got != c.DrillIdleAudience() {
		t.Errorf("the drill role is left at audience %v, want the idle one", got)
	}
	order := strings.Join(h.bao.Order, " ")
	if !strings.Contains(order, "Write Write Snapshot") || !strings.HasSuffix(order, "Login Leader Write") {
		t.Errorf("calls %s: want the audience set and the canary written before the snapshot, and the idle "+
			"audience put back after, with a fresh login", order)
	}
	if len(h.bao.Logins) != 2 {
		t.Errorf("logins %v", h.bao.Logins)
	}
}

// TestADrillRoleTheClusterCannotSetLeavesTheBackupUnarmed: a cluster of an
// earlier identity revision refuses the drill role's audience (403): the
// backup goes on, and nothing is put back.
func TestADrillRoleTheClusterCannotSetLeavesTheBackupUnarmed(t *testing.T) {
	h := newHarness(t)
	h.bao.WriteErrs = map[string]error{identity.DrillRolePath: &openbao.StatusError{Op: identity.DrillRolePath, Code: 403}}
	r := h.run(t)
	if r.Failed() || r.Canary == "" {
		t.Fatalf("report %+v", r)
	}
	if !slices.Equal(h.bao.Writes, []string{"openbao-operator/canary"}) || len(h.bao.Logins) != 1 {
		t.Errorf("writes %v, logins %v", h.bao.Writes, h.bao.Logins)
	}
}

// TestAnIdleAudienceNotPutBackFailsTheAttempt: the cluster would go on
// accepting the snapshot's drill audience, so the backup must not succeed
// (a drill mints that audience only for a successful backup).
func TestAnIdleAudienceNotPutBackFailsTheAttempt(t *testing.T) {
	h := newHarness(t)
	h.bao.LoginErrAfter, h.bao.LoginErr = 1, &openbao.StatusError{Op: "login", Code: 400}
	r := h.run(t)
	if !r.Failed() || r.Reason != executor.ReasonAuthFailed || !strings.Contains(r.Error, "idle audience") {
		t.Fatalf("report %+v", r)
	}
}

// TestAFailedDisarmNeverStoresASecondSnapshot: the idle audience cannot be
// put back (a 503 at every login after the first); the run fails, naming
// the object it stored, and stores no second snapshot for the one backup.
func TestAFailedDisarmNeverStoresASecondSnapshot(t *testing.T) {
	h := newHarness(t)
	h.bao.LoginErrAfter, h.bao.LoginErr = 1, &openbao.StatusError{Op: "login", Code: 503}
	r := h.run(t)
	keys := h.store.Keys()
	if !r.Failed() || len(keys) != 1 || !strings.Contains(r.Error, keys[0]) || h.bao.Calls["Snapshot"] != 1 {
		t.Fatalf("report %+v, store %v, %d snapshots taken: want one stored snapshot, named in the failure", r, keys, h.bao.Calls["Snapshot"])
	}
	if len(h.bao.Logins) != 4 { // the attempt's, and three tries of the disarm
		t.Errorf("logins %v: want the disarm itself retried", h.bao.Logins)
	}
}

// TestADisarmThatPassesOnASecondTrySucceedsWithOneSnapshot.
func TestADisarmThatPassesOnASecondTrySucceedsWithOneSnapshot(t *testing.T) {
	h := newHarness(t)
	h.bao.LoginErrAfter, h.bao.LoginErr = 1, &openbao.StatusError{Op: "login", Code: 503}
	h.onSleep = func() { h.bao.LoginErr = nil }
	r := h.run(t)
	if r.Failed() || len(h.store.Keys()) != 1 || h.sleeps != 1 {
		t.Fatalf("report %+v, store %v, %d waits", r, h.store.Keys(), h.sleeps)
	}
}
