package envtest_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/objectstore/memstore"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
	"github.com/openbao/operator/internal/restore"
	"github.com/openbao/operator/internal/sealkey"
	"github.com/openbao/operator/internal/secrets"
	"github.com/openbao/operator/internal/standby"
)

// standbyIssuer stands for the Kubernetes service-account issuer.
type standbyIssuer struct{}

func (standbyIssuer) Issuer(context.Context) (identity.Issuer, error) {
	return identity.Issuer{URL: "https://kubernetes.default.svc.cluster.local", PublicKeysPEM: []string{`-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEfgmQYctP/zoqvrqIK9TTBPC4bm2a
xs0cHU2aas8CPNTu8V7HKZyVV4ItoQo0DslsBpmcgAgxN3zoxKWDRVaFnQ==
-----END PUBLIC KEY-----
`}}, nil
}

// standbyRig is one standby cluster "bao" in its namespace, following
// the snapshots of "primary" that the test writes into a memory store as
// the backup executor names them (signed with primary's provenance key).
type standbyRig struct {
	t      *testing.T
	ns     string
	clock  *clocktesting.FakeClock
	events *events.FakeRecorder
	store  *memstore.Store
	prover backup.Prover
	prefix string
	cr     *controllers.OpenBaoClusterReconciler
	rr     *controllers.OpenBaoRestoreReconciler
	mu     sync.Mutex
	// addresses are where the operator dialled OpenBao.
	addresses []string
	// bao stands for the standby's OpenBao; its canary is the restored
	// data's.
	bao *openbaofake.Client
	// canaryNames, when set, is the snapshot the canary of the next
	// restored data names instead of its own (a fault).
	canaryNames string
	// lists counts the operator's listings of the store.
	lists int
}

// countingStore counts List calls.
type countingStore struct {
	objectstore.Store
	lists *int
}

func (s countingStore) List(ctx context.Context, prefix string) ([]objectstore.Object, error) {
	*s.lists++
	return s.Store.List(ctx, prefix)
}

func newStandbyRig(t *testing.T, ns string) *standbyRig {
	t.Helper()
	ctx := context.Background()
	createNamespace(t, ns)
	rig := &standbyRig{t: t, ns: ns, clock: clocktesting.NewFakeClock(at("2026-03-01T12:00:00Z")), events: events.NewFakeRecorder(500),
		store: memstore.New(), prefix: backup.ObjectPrefix("site-a", ns, "primary")}
	key := []byte(strings.Repeat("p", backup.ProvenanceKeyBytes))
	rig.prover = backup.NewProver(key, ns, "primary")
	primary := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "primary", Namespace: ns}}
	for _, s := range []*corev1.Secret{
		// The copies a user carries across from the primary's Kubernetes cluster.
		{ObjectMeta: metav1.ObjectMeta{Name: primary.BackupProvenanceSecretName(), Labels: secrets.Labels(primary)},
			Data: map[string][]byte{backup.ProvenanceDataKey: key}},
		{ObjectMeta: metav1.ObjectMeta{Name: "primary-seal"}, Data: map[string][]byte{sealkey.DataKey: []byte(strings.Repeat("k", sealkey.Size))}},
		{ObjectMeta: metav1.ObjectMeta{Name: "primary-token"}, Data: map[string][]byte{"token": []byte("s.primary-root")}},
	} {
		s.Namespace = ns
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	rig.restart()
	return rig
}

// restart stands for the operator starting again: new reconcilers with
// nothing in memory.
func (r *standbyRig) restart() {
	var err error
	if r.cr, err = newReconciler(k8s, k8s, r.events); err != nil {
		r.t.Fatal(err)
	}
	r.cr.Clock, r.cr.Issuer = r.clock, standbyIssuer{}
	r.cr.NewStore = func(context.Context, objectstore.Config) (objectstore.Store, error) {
		return countingStore{Store: r.store, lists: &r.lists}, nil
	}
	bao := &openbaofake.Client{HealthAnswer: openbao.Health{Initialized: true}}
	if r.bao != nil {
		bao.Written = r.bao.Written // the data outlives the operator
	}
	r.bao = bao
	r.cr.OpenBao = func(o openbao.Options) (openbao.Client, error) {
		r.mu.Lock()
		r.addresses = append(r.addresses, o.Address)
		r.mu.Unlock()
		return bao, nil
	}
	r.rr = &controllers.OpenBaoRestoreReconciler{Client: k8s, APIReader: k8s, Recorder: r.events, Clock: r.clock,
		OperatorImage: "localhost/openbao-operator:test", Servers: &fakeServers{lag: map[string]uint64{"bao-0": 0}}, Operations: r.cr.Operations}
}

// snapshot writes a snapshot of primary taken at t, named as its executor
// names it.
func (r *standbyRig) snapshot(t time.Time, id string) string {
	r.t.Helper()
	key := r.prover.SignedObjectKey(r.prefix, t, id)
	if _, err := r.store.Put(context.Background(), key, strings.NewReader("snapshot "+id)); err != nil {
		r.t.Fatal(err)
	}
	return key
}

func (r *standbyRig) reconcile() {
	r.t.Helper()
	if _, err := r.cr.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: r.ns, Name: "bao"}}); err != nil {
		r.t.Fatalf("cluster pass: %v", err)
	}
}

func (r *standbyRig) reconcileRestore(name string) {
	r.t.Helper()
	if _, err := r.rr.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: r.ns, Name: name}}); err != nil {
		r.t.Fatalf("restore pass of %s: %v", name, err)
	}
}

func (r *standbyRig) get() *v1alpha1.OpenBaoCluster {
	r.t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: "bao"}, c); err != nil {
		r.t.Fatal(err)
	}
	return c
}

// restores are the cluster's OpenBaoRestores by name.
func (r *standbyRig) restores() map[string]v1alpha1.OpenBaoRestore {
	r.t.Helper()
	list := &v1alpha1.OpenBaoRestoreList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(r.ns)); err != nil {
		r.t.Fatal(err)
	}
	out := map[string]v1alpha1.OpenBaoRestore{}
	for _, rs := range list.Items {
		out[rs.Name] = rs
	}
	return out
}

// runRestore takes restore name through its Job (which reports key as
// posted) and its verification, with cluster passes between, as the
// controllers would interleave them.
func (r *standbyRig) runRestore(name, key string) {
	r.t.Helper()
	r.reconcileRestore(name)
	r.reconcileRestore(name)
	rs := r.restores()[name]
	if rs.Status.JobName == "" {
		r.t.Fatalf("restore %s has no Job: %+v", name, rs.Status)
	}
	job := &batchv1.Job{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: rs.Status.JobName}, job); err != nil {
		r.t.Fatal(err)
	}
	args := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--openbao-address=https://bao-0.bao-internal."+r.ns+".svc:8200") || !strings.Contains(args, "--bucket=dr-store") ||
		!strings.Contains(args, "--source-cluster=primary") || !strings.Contains(args, "--path-prefix=site-a") {
		r.t.Fatalf("the restore Job of a standby does not read its source through pod-0: %s", args)
	}
	endJob(r.t, job, 0, backup.Report{Key: key, Size: 8, SHA256: strings.Repeat("ab", 32), RaftIndex: 7})
	// The restored data holds the canary the source's backup wrote into it.
	named := key
	if r.canaryNames != "" {
		named = r.canaryNames
	}
	canary, _ := backup.CanaryValue("primary-"+named[len(named)-12:], named, r.clock.Now())
	if err := r.bao.Write(context.Background(), identity.CanaryPath, canary); err != nil {
		r.t.Fatal(err)
	}
	r.reconcileRestore(name) // installed: verifying
	r.reconcile()            // binds the identity in the restored data
	r.reconcileRestore(name) // verified
	r.reconcile()
}

func (r *standbyRig) clientSelector() map[string]string {
	r.t.Helper()
	svc := &corev1.Service{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: "bao"}, svc); err != nil {
		r.t.Fatal(err)
	}
	return svc.Spec.Selector
}

// TestAStandbyFormsFollowsEachNewerSnapshotOnceAndOpensWhenPromoted: a
// standby forms from its source's newest proven snapshot (a newer planted
// name is ignored), keeps its client Service closed, restores a newer
// snapshot once, posts nothing twice across an operator restart, posts a
// snapshot again whose restore's outcome was lost, and on promotion opens
// its client Service.
func TestAStandbyFormsFollowsEachNewerSnapshotOnceAndOpensWhenPromoted(t *testing.T) {
	rig := newStandbyRig(t, "standby-dr")
	ctx := context.Background()
	first := rig.snapshot(rig.clock.Now().Add(-10*time.Minute), "00000001")
	if _, err := rig.store.Put(ctx, rig.prefix+"99991231T000000Z-ffffffff.snap", strings.NewReader("planted")); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, rig.ns, `
metadata: {name: bao}
spec:
  version: 2.4.0
  replicas: 1
  bootstrap:
    fromBackup:
      sourceCluster: primary
      latest: true
      target: {endpoint: "https://s3.example.com", bucket: dr-store, pathPrefix: site-a}
      unsealKeySecretRef: {name: primary-seal}
      tokenSecretRef: {name: primary-token}
  standby: {pollInterval: 30s}
  backup:
    target: {endpoint: "https://s3.example.com", bucket: dr-store, pathPrefix: site-b}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Status.Initialized, c.Status.IdentityConfigured, c.Status.IdentityRevision = true, true, identity.Revision
	if err := k8s.Status().Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	rig.reconcile()
	activePod(t, rig.ns, "bao-0")
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: rig.ns, Name: "bao"}, sts); err != nil {
		t.Fatal(err)
	}
	sts.Status.Replicas, sts.Status.ReadyReplicas = 1, 1
	if err := k8s.Status().Update(ctx, sts); err != nil {
		t.Fatal(err)
	}
	rig.reconcile()
	if sel := rig.clientSelector(); sel["openbao.org/standby"] != "closed" {
		t.Fatalf("a standby's client Service selects its servers: %v", sel)
	}

	// Forming: the fromBackup path restores the newest proven snapshot.
	rig.runRestore(c.FromBackupRestoreName(), first)
	st := rig.get().Status
	if st.FromBackup == nil || st.FromBackup.CompletedAt == nil || st.Standby == nil || st.Standby.ServedKey != first {
		t.Fatalf("the standby did not form from %s: fromBackup %+v standby %+v", first, st.FromBackup, st.Standby)
	}
	if !st.Standby.Proven() || !slices.Contains(rig.bao.Logins, identity.Mount+"/"+identity.BackupRole) {
		t.Fatalf("the canary of %s was not read from the standby as its backup role: %+v, logins %v", first, st.Standby.Canary, rig.bao.Logins)
	}

	// Following: a newer snapshot is restored through one OpenBaoRestore.
	rig.clock.Step(time.Minute)
	second := rig.snapshot(rig.clock.Now().Add(-5*time.Second), "00000002")
	rig.reconcile()
	st = rig.get().Status
	name := st.Standby.Restore
	if st.Standby.RestoreKey != second || name != c.StandbyRestoreName("00000002") {
		t.Fatalf("the newer snapshot was not recorded before its restore: %+v", st.Standby)
	}
	rs, ok := rig.restores()[name]
	if !ok || rs.Spec.Source.Key != second || !rs.Spec.Source.Standby || rs.WantsPreRestoreSnapshot() {
		t.Fatalf("restore %s: %+v", name, rs.Spec)
	}
	rig.runRestore(name, second)
	st = rig.get().Status
	if st.Standby.ServedKey != second || st.Standby.IdentityBoundKey != second || st.Standby.LagSeconds != 0 ||
		st.Standby.Canary == nil || st.Standby.Canary.Key != second || !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionStandby) {
		t.Fatalf("after following %s: %+v", second, st.Standby)
	}

	// Idle: a poll that finds nothing new lists the store and changes
	// nothing of status.standby or its condition (the fake's unsettled
	// Raft state is written by its own step); a pass before the poll is
	// due does not list.
	rig.reconcile() // settles what the last pass's effects changed
	idle := rig.get().Status
	lists := rig.lists
	rig.reconcile()
	if rig.lists != lists {
		t.Fatalf("a pass before the poll was due listed the store")
	}
	rig.clock.Step(31 * time.Second)
	rig.reconcile()
	if rig.lists != lists+1 {
		t.Fatalf("the due poll listed the store %d times, want once", rig.lists-lists)
	}
	after := rig.get().Status
	if !equality.Semantic.DeepEqual(idle.Standby, after.Standby) || !equality.Semantic.DeepEqual(
		meta.FindStatusCondition(idle.Conditions, v1alpha1.ConditionStandby), meta.FindStatusCondition(after.Conditions, v1alpha1.ConditionStandby)) {
		t.Fatalf("an idle poll changed the standby's status:\n%+v\n%+v", idle.Standby, after.Standby)
	}

	// A third snapshot; the operator restarts mid-restore: nothing twice.
	rig.clock.Step(time.Minute)
	third := rig.snapshot(rig.clock.Now().Add(-5*time.Second), "00000003")
	rig.reconcile()
	thirdName := rig.get().Status.Standby.Restore
	rig.reconcileRestore(thirdName)
	rig.reconcileRestore(thirdName)
	jobName := rig.restores()[thirdName].Status.JobName
	rig.restart()
	rig.clock.Step(time.Minute)
	for range 3 {
		rig.reconcile()
		rig.reconcileRestore(thirdName)
	}
	if got := rig.restores(); len(got) != 2 || got[c.FromBackupRestoreName()].Name == "" || got[thirdName].Name == "" {
		t.Fatalf("restores after the restart: %v, want the forming one and the third's (the second's, ended, deleted)", restoreNames(got))
	}
	if j := rig.restores()[thirdName].Status.JobName; j != jobName {
		t.Fatalf("the restart changed the restore's Job from %s to %s", jobName, j)
	}
	// The fault of the e2e tier's run: the third's Job vanishes before its
	// end was seen (the operator stopped between recording and creating
	// it), so its restore ends OutcomeUnknown. A standby takes no writes:
	// the third is posted again, under a new name, 30 s after the failure,
	// and its identity is bound again in the data that post installed.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: rig.ns, Name: jobName}}
	if err := k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	rig.reconcileRestore(thirdName)
	if rs := rig.restores()[thirdName]; rs.Status.Phase != v1alpha1.RestoreFailed || rs.Status.Reason != restore.ReasonOutcomeUnknown {
		t.Fatalf("the restore whose Job vanished: %+v", rs.Status)
	}
	rig.reconcile()
	st = rig.get().Status
	if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStandby); cond == nil || cond.Reason != standby.ReasonStandbyRestoreFailed ||
		st.Standby.Restore != thirdName || meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDegraded) {
		t.Fatalf("within 30 s of its failure: Standby %+v, status %+v", cond, st.Standby)
	}
	rig.clock.Step(31 * time.Second)
	rig.reconcile()
	st = rig.get().Status
	again := c.StandbyRestoreName("00000003-2")
	if st.Standby.Restore != again || st.Standby.RestoreKey != third || st.Standby.Posts() != 2 {
		t.Fatalf("the third was not posted again as %s: %+v", again, st.Standby)
	}
	if rs, ok := rig.restores()[again]; !ok || rs.Spec.Source.Key != third {
		t.Fatalf("restore %s: %+v", again, rs.Spec)
	}
	rig.runRestore(again, third)
	st = rig.get().Status
	if st.Standby.ServedKey != third || st.Standby.IdentityBoundKey != third || !st.Standby.Proven() ||
		!meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionStandby) {
		t.Fatalf("after the second post of %s: %+v", third, st.Standby)
	}
	rig.reconcile() // deletes the ended first post
	if _, left := rig.restores()[thirdName]; left {
		t.Fatalf("the failed first post %s was not cleaned up: %v", thirdName, restoreNames(rig.restores()))
	}

	// A restore that succeeded, but the data's canary names the earlier
	// snapshot (the data is not the new one's): not current, Degraded.
	rig.clock.Step(time.Minute)
	fourth := rig.snapshot(rig.clock.Now().Add(-5*time.Second), "00000004")
	rig.reconcile()
	rig.canaryNames = second
	rig.runRestore(rig.get().Status.Standby.Restore, fourth)
	st = rig.get().Status
	cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStandby)
	if st.Standby.ServedKey != fourth || st.Standby.Proven() || st.Standby.Canary == nil || st.Standby.Canary.Key != second ||
		cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != standby.ReasonStandbyCanaryMismatch ||
		!strings.Contains(cond.Message, fourth) || !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDegraded) {
		t.Fatalf("a canary naming %s in the data of %s: %+v, Standby %+v", second, fourth, st.Standby, cond)
	}

	rig.mu.Lock()
	for _, a := range rig.addresses {
		if a == c.InternalServiceAddress() {
			t.Fatalf("the operator dialled the client Service of a standby, which has no endpoints: %v", rig.addresses)
		}
	}
	rig.mu.Unlock()

	// Promotion: it stops following and opens the client Service.
	promote(t, c)
	rig.reconcile()
	rig.reconcile() // the chart renders from the status the first wrote
	st = rig.get().Status
	if st.Standby.PromotedAt == nil || !strings.Contains(rig.drainEvents(), standby.ReasonPromoted) {
		t.Fatalf("not promoted: %+v", st.Standby)
	}
	if sel := rig.clientSelector(); sel["openbao.org/standby"] != "" || sel["openbao-sealed"] != "false" {
		t.Fatalf("a promoted standby's client Service stays closed: %v", sel)
	}
	before := len(rig.restores())
	rig.snapshot(rig.clock.Now(), "00000005")
	rig.clock.Step(time.Minute)
	rig.reconcile()
	if got := rig.restores(); len(got) != before {
		t.Fatalf("a promoted standby still follows: %v", restoreNames(got))
	}
}

func promote(t *testing.T, c *v1alpha1.OpenBaoCluster) {
	t.Helper()
	cur := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Standby.Promote = true
	if err := k8s.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
}

func (r *standbyRig) drainEvents() string {
	var out []string
	for {
		select {
		case e := <-r.events.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// TestInvalidStandbysAreRejectedNamingTheField: the API server refuses a
// standby without a source to follow, a poll interval out of bounds, and
// a promotion taken back.
func TestInvalidStandbysAreRejectedNamingTheField(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "invalid-standbys")
	source := `bootstrap: {fromBackup: {sourceCluster: primary, latest: true, target: {endpoint: "https://s3.example.com", bucket: dr-store},
    unsealKeySecretRef: {name: k}, tokenSecretRef: {name: t}}}`
	for i, tc := range []struct{ name, spec, field, phrase string }{
		{"no source", `{version: 2.4.0, standby: {}}`, "spec", "standby follows the source of bootstrap.fromBackup"},
		{"a poll too often", `{version: 2.4.0, standby: {pollInterval: 10s}, ` + source + `}`, "spec.standby.pollInterval", "from 30s to 1h"},
		{"a poll too rare", `{version: 2.4.0, standby: {pollInterval: 2h}, ` + source + `}`, "spec.standby.pollInterval", "from 30s to 1h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := rawCluster(t, "invalid-standbys", "metadata: {name: s-"+itoa(i)+"}\nspec: "+tc.spec)
			err := k8s.Create(ctx, u)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.phrase) {
				t.Fatalf("create: got %v, want Invalid naming %s with %q", err, tc.field, tc.phrase)
			}
		})
	}
	c := newCluster(t, "invalid-standbys", "metadata: {name: promoted}\nspec: {version: 2.4.0, standby: {promote: true}, "+source+"}")
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Spec.Standby.Promote = false
	if err := k8s.Update(ctx, c); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "standby.promote cannot be taken back") {
		t.Fatalf("taking promotion back: %v", err)
	}
}

func restoreNames(m map[string]v1alpha1.OpenBaoRestore) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
