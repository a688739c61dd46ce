package restore_test

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/day2"
	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/restore"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// prover is ns/bao's, with a fixed test key.
var prover = backup.NewProver([]byte("0123456789abcdef0123456789abcdef"), "ns", "bao")

func TestSelectLatestTakesTheNewestOfThisClusterOnly(t *testing.T) {
	prefix := backup.ObjectPrefix("p", "ns", "bao")
	mine := func(age time.Duration, id string) objectstore.Object {
		return objectstore.Object{Key: prover.SignedObjectKey(prefix, t0.Add(-age), id)}
	}
	for _, tc := range []struct {
		name    string
		objects []objectstore.Object
		want    string
	}{
		{"the newest by the time in its name, not LastModified", []objectstore.Object{
			mine(time.Hour, "00000001"), {Key: mine(2*time.Hour, "00000002").Key, LastModified: t0.Add(time.Hour)}},
			mine(time.Hour, "00000001").Key},
		{"never another cluster's whose name starts with this one's", []objectstore.Object{
			mine(time.Hour, "00000001"), {Key: backup.ObjectKey(backup.ObjectPrefix("p", "ns", "bao-2"), t0, "00000003")}},
			mine(time.Hour, "00000001").Key},
		{"never a deeper path or a file the executor did not name", []objectstore.Object{
			mine(time.Hour, "00000001"), {Key: backup.ObjectKey(prefix+"old/", t0, "00000004")}, {Key: prefix + "zzz.snap"}},
			mine(time.Hour, "00000001").Key},
		{"two of the same second: the greater key, stably", []objectstore.Object{mine(0, "0000000b"), mine(0, "0000000a")},
			mine(0, "0000000b").Key},
		{"nothing of this cluster", []objectstore.Object{{Key: backup.ObjectKey(backup.ObjectPrefix("p", "ns", "bao-2"), t0, "00000003")}}, ""},
		{"never a planted far-future name, nor one carrying a real name's tag", []objectstore.Object{
			mine(time.Hour, "00000001"), {Key: prefix + "99991231T000000Z-xxxxxxxx.snap"},
			{Key: prefix + "99991231T000000Z-00000001-" + tagOf(mine(time.Hour, "00000001").Key) + ".snap"}},
			mine(time.Hour, "00000001").Key},
		{"never a name of the executor's form it did not sign", []objectstore.Object{{Key: backup.ObjectKey(prefix, t0, "00000005")}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := restore.SelectLatest(prover, tc.objects, prefix)
			if tc.want == "" {
				if err != restore.ErrNoSnapshot {
					t.Fatalf("got %v, %v; want ErrNoSnapshot", got, err)
				}
				return
			}
			if err != nil || got.Key != tc.want {
				t.Fatalf("got %q, %v; want %q", got.Key, err, tc.want)
			}
		})
	}
}

func runningCluster() *v1alpha1.OpenBaoCluster {
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "ns"}}
	c.Spec.Replicas = 3
	c.Spec.Backup = &v1alpha1.BackupSpec{JWTAuthRole: "backup"}
	c.Status.Phase, c.Status.IdentityConfigured, c.Status.IdentityRevision = v1alpha1.PhaseRunning, true, 2
	return c
}

func TestPreflightHoldsARestoreThatHasNotStarted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutate    func(*v1alpha1.OpenBaoCluster, *restore.PreflightInput)
		reason    string
		permanent bool
	}{
		{"a running cluster with nothing under way", func(*v1alpha1.OpenBaoCluster, *restore.PreflightInput) {}, "", false},
		{"no spec.backup", func(c *v1alpha1.OpenBaoCluster, _ *restore.PreflightInput) { c.Spec.Backup = nil }, backup.ReasonBackupNotConfigured, true},
		{"paused", func(c *v1alpha1.OpenBaoCluster, _ *restore.PreflightInput) { c.Spec.Paused = true }, backup.ReasonClusterPaused, false},
		{"a backup naming neither role nor token starts (the operator's role)", func(c *v1alpha1.OpenBaoCluster, _ *restore.PreflightInput) {
			c.Spec.Backup.JWTAuthRole = ""
		}, "", false},
		{"a backup naming neither role nor token waits for the operator's identity", func(c *v1alpha1.OpenBaoCluster, _ *restore.PreflightInput) {
			c.Spec.Backup.JWTAuthRole, c.Status.IdentityConfigured = "", false
		}, backup.ReasonIdentityPending, false},
		{"a rollout under way", func(c *v1alpha1.OpenBaoCluster, in *restore.PreflightInput) {
			in.Lock = inTheWay(day2.RolloutOp())
		}, backup.ReasonUpgradeInProgress, false},
		{"an operation in the way of a cluster that is not Running", func(c *v1alpha1.OpenBaoCluster, in *restore.PreflightInput) {
			c.Status.Phase, in.Lock = v1alpha1.PhaseDegraded, inTheWay(day2.RolloutOp())
		}, backup.ReasonUpgradeInProgress, false},
		{"a cluster still marked Restoring after the last restore ended, the lock free", func(c *v1alpha1.OpenBaoCluster, _ *restore.PreflightInput) {
			c.Status.Phase = v1alpha1.PhaseRestoring
		}, "", false},
		{"not Running", func(c *v1alpha1.OpenBaoCluster, _ *restore.PreflightInput) {
			c.Status.Phase = v1alpha1.PhaseInitializing
		}, backup.ReasonClusterNotRunning, false},
		{"a backup under way", func(_ *v1alpha1.OpenBaoCluster, in *restore.PreflightInput) {
			in.Lock = inTheWay(day2.Op{Ref: day2.Ref{Kind: day2.Backup, Name: "b1"}})
		}, backup.ReasonBackupInProgress, false},
		{"another restore under way", func(_ *v1alpha1.OpenBaoCluster, in *restore.PreflightInput) {
			in.Lock = inTheWay(day2.Op{Ref: day2.Ref{Kind: day2.Restore, Name: "r0"}})
		}, restore.ReasonRestoreInProgress, false},
		{"an identity of an earlier release without the restore role", func(c *v1alpha1.OpenBaoCluster, _ *restore.PreflightInput) {
			c.Status.IdentityRevision = 1
		}, v1alpha1.ReasonIdentityOutdated, false},
		{"a bootstrap restore of a cluster without fromBackup", func(_ *v1alpha1.OpenBaoCluster, in *restore.PreflightInput) {
			in.Restore = bootstrapRestore()
		}, restore.ReasonNoBootstrapSource, true},
		{"a bootstrap restore of a cluster without spec.backup", func(c *v1alpha1.OpenBaoCluster, in *restore.PreflightInput) {
			c.Spec.Backup, c.Spec.Bootstrap, in.Restore = nil, fromBackup("src"), bootstrapRestore()
		}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := runningCluster()
			in := restore.PreflightInput{Cluster: c}
			tc.mutate(c, &in)
			got := restore.Preflight(in)
			if got.OK != (tc.reason == "") || got.Reason != tc.reason || got.Permanent != tc.permanent {
				t.Fatalf("got %+v, want reason %q permanent %v", got, tc.reason, tc.permanent)
			}
		})
	}
}

// TestAForcedRestoreMustTakeThePreRestoreSnapshot: OpenBao cannot check
// that the seal opens a snapshot before snapshot-force installs it, so a
// forced restore without a way back is refused, by the same rule at
// admission (Configured) and in the controller (Preflight, then Decide).
func TestAForcedRestoreMustTakeThePreRestoreSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name             string
		force, bootstrap bool
		preRestore       *bool
		refused          bool
	}{
		{"force with preRestoreSnapshot: false is refused", true, false, ptr.To(false), true},
		{"force with the default pre-restore snapshot runs", true, false, nil, false},
		{"force with preRestoreSnapshot: true runs", true, false, ptr.To(true), false},
		{"a forced bootstrap restore runs: the cluster holds nothing yet", true, true, ptr.To(false), false},
		{"no force without a pre-restore snapshot runs", false, false, ptr.To(false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := runningCluster()
			r := newRestore(v1alpha1.OpenBaoRestoreStatus{})
			r.Spec.Force, r.Spec.PreRestoreSnapshot = tc.force, tc.preRestore
			if tc.bootstrap {
				r.Spec.Source = v1alpha1.RestoreSource{Bootstrap: true}
				c.Spec.Bootstrap = fromBackup("src")
			}
			rule, conf, pre := restore.ForceNeedsUndo(r), restore.Configured(c, r), restore.Preflight(restore.PreflightInput{Cluster: c, Restore: r})
			if !tc.refused {
				if !rule.OK || !conf.OK || !pre.OK {
					t.Fatalf("refused: rule %+v, configured %+v, preflight %+v", rule, conf, pre)
				}
				return
			}
			for _, got := range []restore.Check{rule, conf, pre} {
				if got.OK || !got.Permanent || got.Reason != restore.ReasonForceWithoutPreRestoreSnapshot || got.Message != restore.ForceWithoutUndoMessage {
					t.Fatalf("got %+v, want the permanent refusal %s", got, restore.ReasonForceWithoutPreRestoreSnapshot)
				}
			}
			for _, field := range []string{"spec.force", "spec.preRestoreSnapshot"} {
				if !strings.Contains(pre.Message, field) {
					t.Errorf("message %q does not name %s", pre.Message, field)
				}
			}
			d := restore.Decide(restore.Observed{Now: t0, Restore: r, Cluster: c, Preflight: pre})
			if d.Status.Phase != v1alpha1.RestoreFailed || d.Status.Reason != restore.ReasonForceWithoutPreRestoreSnapshot || d.CreateJob || d.CreateBackup {
				t.Fatalf("decision %+v: want Failed %s and nothing started", d, restore.ReasonForceWithoutPreRestoreSnapshot)
			}
		})
	}
}

func newRestore(status v1alpha1.OpenBaoRestoreStatus) *v1alpha1.OpenBaoRestore {
	return &v1alpha1.OpenBaoRestore{
		ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: "ns", UID: "0a1b2c3d-0000-4000-8000-000000000001"},
		Spec: v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao", Source: v1alpha1.RestoreSource{Latest: true},
			PreRestoreSnapshot: ptr.To(false)},
		Status: status,
	}
}

func restoring() v1alpha1.OpenBaoRestoreStatus {
	start := metav1.NewTime(t0)
	return v1alpha1.OpenBaoRestoreStatus{Phase: v1alpha1.RestoreRunning, Step: v1alpha1.RestoreStepRestoring,
		JobName: "restore-bao-r1", StartTime: &start}
}

func verifying(restoredAgo time.Duration, restarted ...string) v1alpha1.OpenBaoRestoreStatus {
	s := restoring()
	at := metav1.NewTime(t0.Add(-restoredAgo))
	s.Step, s.RestoredAt, s.Key, s.RestartedPods = v1alpha1.RestoreStepVerifying, &at, "ns/bao/x.snap", restarted
	return s
}

func servers(lag ...uint64) *restore.Servers {
	out := &restore.Servers{Replicas: len(lag), AutopilotHealthy: true}
	for i, l := range lag {
		out.Servers = append(out.Servers, restore.Server{Pod: "bao-" + string(rune('0'+i)), Answered: true, Initialized: true, Ready: true, Lag: l, LagKnown: true})
	}
	return out
}

// TestDecideTakesARestoreFromPendingToItsOutcome walks the state machine
// over observed states; each row starts from a status alone, as an
// operator that restarted does.
func TestDecideTakesARestoreFromPendingToItsOutcome(t *testing.T) {
	ok := backup.Report{Key: "ns/bao/x.snap", Size: 10, SHA256: strings.Repeat("a", 64), RaftIndex: 42}
	for _, tc := range []struct {
		name      string
		o         restore.Observed
		phase     v1alpha1.RestorePhase
		step      v1alpha1.RestoreStep
		reason    string
		createJob bool
		restart   []string
	}{
		{"held by the preflight: Pending, looks again", restore.Observed{Restore: newRestore(v1alpha1.OpenBaoRestoreStatus{}),
			Preflight: restore.Check{Reason: backup.ReasonClusterPaused}}, v1alpha1.RestorePending, "", backup.ReasonClusterPaused, false, nil},
		{"refused for good: Failed, nothing changed", restore.Observed{Restore: newRestore(v1alpha1.OpenBaoRestoreStatus{}),
			Preflight: restore.Check{Permanent: true, Reason: backup.ReasonBackupNotConfigured}}, v1alpha1.RestoreFailed, "", backup.ReasonBackupNotConfigured, false, nil},
		{"preflight passes: the Job is named, then created", restore.Observed{Restore: newRestore(v1alpha1.OpenBaoRestoreStatus{}),
			Preflight: restore.Check{OK: true}}, v1alpha1.RestoreRunning, v1alpha1.RestoreStepRestoring, restore.ReasonJobCreated, true, nil},
		{"the recorded Job is gone and its end was never seen: Failed, outcome unknown, never created again", restore.Observed{
			Restore: newRestore(restoring()), Job: &restore.Job{}}, v1alpha1.RestoreFailed, "", restore.ReasonOutcomeUnknown, false, nil},
		{"the recorded Job is gone but its pod still runs: wait for the pod, create nothing", restore.Observed{
			Restore: newRestore(restoring()), Job: &restore.Job{PodsLeft: []string{"restore-bao-r1-x1"}}},
			v1alpha1.RestoreRunning, v1alpha1.RestoreStepRestoring, "", false, nil},
		{"the Job failed without a report (a disrupted pod): Failed, saying the snapshot may have reached OpenBao, no new Job",
			restore.Observed{Restore: newRestore(restoring()), Job: &restore.Job{Found: true, Owned: true, Failed: true, ReportRead: true,
				FailureMessage: "PodFailurePolicy: pod disrupted"}}, v1alpha1.RestoreFailed, "", restore.ReasonJobFailed, false, nil},
		{"a Job of someone else's", restore.Observed{Restore: newRestore(restoring()), Job: &restore.Job{Found: true}},
			v1alpha1.RestoreFailed, "", restore.ReasonJobNameTaken, false, nil},
		{"the Job runs", restore.Observed{Restore: newRestore(restoring()), Job: &restore.Job{Found: true, Owned: true}},
			v1alpha1.RestoreRunning, v1alpha1.RestoreStepRestoring, "", false, nil},
		{"the executor refused another seal's snapshot", restore.Observed{Restore: newRestore(restoring()), Job: &restore.Job{Found: true, Owned: true,
			Failed: true, ReportRead: true, Report: backup.Report{Reason: restore.ReasonSealMismatch, Error: restore.SealMismatchMessage}}},
			v1alpha1.RestoreFailed, "", restore.ReasonSealMismatch, false, nil},
		{"the snapshot is installed: verify", restore.Observed{Restore: newRestore(restoring()), Job: &restore.Job{Found: true, Owned: true,
			Succeeded: true, ReportRead: true, Report: ok}}, v1alpha1.RestoreRunning, v1alpha1.RestoreStepVerifying, restore.ReasonSnapshotInstalled, false, nil},
		{"a server trails within the grace: wait", restore.Observed{Restore: newRestore(verifying(time.Second)), Servers: servers(0, 5, 0)},
			v1alpha1.RestoreRunning, v1alpha1.RestoreStepVerifying, restore.ReasonSnapshotInstalled, false, nil},
		{"a server trails after the grace: restart it", restore.Observed{Restore: newRestore(verifying(time.Minute)), Servers: servers(0, 5, 0)},
			v1alpha1.RestoreRunning, v1alpha1.RestoreStepVerifying, restore.ReasonRestartingServers, false, []string{"bao-1"}},
		{"a server restarted once is not restarted again", restore.Observed{Restore: newRestore(verifying(time.Minute, "bao-1")), Servers: servers(0, 5, 0)},
			v1alpha1.RestoreRunning, v1alpha1.RestoreStepVerifying, restore.ReasonSnapshotInstalled, false, nil},
		{"a sealed server is waited for, not restarted", restore.Observed{Restore: newRestore(verifying(time.Minute)), Servers: func() *restore.Servers {
			s := servers(0, 0)
			s.Servers[1].Sealed = true
			return s
		}()}, v1alpha1.RestoreRunning, v1alpha1.RestoreStepVerifying, restore.ReasonSnapshotInstalled, false, nil},
		{"a caught-up server whose pod is not Ready again keeps it waiting", restore.Observed{Restore: newRestore(verifying(time.Minute)),
			Servers: func() *restore.Servers { s := servers(0, 0, 0); s.Servers[2].Ready = false; return s }()},
			v1alpha1.RestoreRunning, v1alpha1.RestoreStepVerifying, restore.ReasonSnapshotInstalled, false, nil},
		{"every server healthy and caught up: Succeeded", restore.Observed{Restore: newRestore(verifying(time.Minute, "bao-1")), Servers: servers(0, 0, 0)},
			v1alpha1.RestoreSucceeded, "", restore.ReasonRestored, false, nil},
		{"still trailing after the timeout: Failed, saying what state the cluster is in", restore.Observed{Restore: newRestore(verifying(time.Hour, "bao-1")),
			Servers: servers(0, 5, 0)}, v1alpha1.RestoreFailed, "", restore.ReasonVerificationTimedOut, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Now = t0
			if tc.o.Cluster == nil {
				tc.o.Cluster = runningCluster()
			}
			d := restore.Decide(tc.o)
			s := d.Status
			if s.Phase != tc.phase || s.Step != tc.step || (tc.reason != "" && s.Reason != tc.reason) || d.CreateJob != tc.createJob ||
				strings.Join(d.RestartPods, ",") != strings.Join(tc.restart, ",") {
				t.Fatalf("got phase %s step %s reason %s (%s) createJob %v restart %v", s.Phase, s.Step, s.Reason, s.Message, d.CreateJob, d.RestartPods)
			}
			if s.Phase.Done() && s.CompletionTime == nil {
				t.Error("a finished restore has no completion time")
			}
		})
	}
}

// TestVerificationLooksEverySecondUntilTheRestartGrace: the servers
// usually serve the restored data within seconds of the install, so the
// first check is a second after it and the next ones too, until the grace
// after which trailing servers are restarted; then every VerifyPoll.
func TestVerificationLooksEverySecondUntilTheRestartGrace(t *testing.T) {
	ok := backup.Report{Key: "ns/bao/x.snap", Size: 10, SHA256: strings.Repeat("a", 64), RaftIndex: 42}
	for _, tc := range []struct {
		name string
		o    restore.Observed
		want time.Duration
	}{
		{"the install is seen: the first check a second later", restore.Observed{Restore: newRestore(restoring()),
			Job: &restore.Job{Found: true, Owned: true, Succeeded: true, ReportRead: true, Report: ok}}, restore.VerifyPollEarly},
		{"a server trails a second after the install: again a second later", restore.Observed{Restore: newRestore(verifying(time.Second)),
			Servers: servers(0, 5, 0)}, restore.VerifyPollEarly},
		{"a server still trails past the grace (restarted once): every VerifyPoll", restore.Observed{
			Restore: newRestore(verifying(time.Minute, "bao-1")), Servers: servers(0, 5, 0)}, restore.VerifyPoll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Now, tc.o.Cluster = t0, runningCluster()
			if d := restore.Decide(tc.o); d.Requeue != tc.want {
				t.Fatalf("requeue after %s, want %s (%s: %s)", d.Requeue, tc.want, d.Status.Step, d.Status.Message)
			}
		})
	}
}

func TestDecideFailsARestoreOfAClusterThatDoesNotExist(t *testing.T) {
	d := restore.Decide(restore.Observed{Now: t0, Restore: newRestore(v1alpha1.OpenBaoRestoreStatus{})})
	if d.Status.Phase != v1alpha1.RestoreFailed || d.Status.Reason != restore.ReasonClusterNotFound || !strings.Contains(d.Status.Message, "nothing was changed") {
		t.Fatalf("%+v", d.Status)
	}
	d = restore.Decide(restore.Observed{Now: t0, Restore: newRestore(restoring())})
	if d.Status.Phase != v1alpha1.RestoreFailed || strings.Contains(d.Status.Message, "nothing was changed") || d.CreateJob {
		t.Fatalf("a cluster deleted mid-restore: %+v", d.Status)
	}
}

func TestTheJobRunsTheRestoreSubcommandUnderTheBackupIdentity(t *testing.T) {
	c := runningCluster()
	c.Spec.Backup.Target = v1alpha1.BackupTarget{Endpoint: "https://s3.example.com", Bucket: "b"}
	r := newRestore(restoring())
	r.Spec.ExpectedSHA256, r.Spec.Force = strings.Repeat("a", 64), true
	job := restore.JobFor(c, r, "operator:1", nil)
	pod := job.Spec.Template.Spec
	args := strings.Join(pod.Containers[0].Args, " ")
	for _, want := range []string{"restore ", "--latest=true", "--force=true", "--jwt-role=restore", "--expected-sha256=" + r.Spec.ExpectedSHA256} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if pod.ServiceAccountName != c.BackupServiceAccountName() || job.Name != "restore-bao-r1" || job.OwnerReferences[0].Kind != v1alpha1.RestoreKind ||
		job.Labels[v1alpha1.LabelRestore] != "r1" || *pod.Containers[0].SecurityContext.ReadOnlyRootFilesystem != true {
		t.Errorf("job %+v", job)
	}
	cfg, err := restore.ParseExecutorArgs(pod.Containers[0].Args[1:], nil)
	if err != nil || !cfg.Latest || !cfg.Force || cfg.JWTRole != "restore" {
		t.Errorf("the executor reads back %+v, %v", cfg, err)
	}
}

// TestFromRevision3BackupAndRestoreJobsRunUnderTheirOwnAccountAndAudience:
// a backup Job's projected token is of the backup account for the backup
// role's audience, a restore Job's of the restore account for the restore
// role's: neither logs in to the other's role. Before revision 3 both keep
// the shared account and audience the cluster's roles are bound to.
func TestFromRevision3BackupAndRestoreJobsRunUnderTheirOwnAccountAndAudience(t *testing.T) {
	for _, tc := range []struct {
		rev                   int32
		backupSA, backupAud   string
		restoreSA, restoreAud string
	}{
		{2, "bao-backup-serviceaccount", "openbao-operator:ns/bao", "bao-backup-serviceaccount", "openbao-operator:ns/bao"},
		{3, "bao-backup-serviceaccount", "openbao-operator:ns/bao:backup", "bao-restore-serviceaccount", "openbao-operator:ns/bao:restore"},
	} {
		c := runningCluster()
		c.Spec.Backup.Target = v1alpha1.BackupTarget{Endpoint: "https://s3.example.com", Bucket: "b"}
		c.Spec.Backup.JWTAuthRole = "backup"
		c.Status.IdentityConfigured, c.Status.IdentityRevision = true, tc.rev
		b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: "ns"}}
		for _, job := range []struct {
			name    string
			pod     corev1.PodSpec
			sa, aud string
		}{
			{"backup", backup.JobFor(backup.JobInput{Cluster: c, Backup: b, Name: "j"}).Spec.Template.Spec, tc.backupSA, tc.backupAud},
			{"restore", restore.JobFor(c, newRestore(restoring()), "operator:1", nil).Spec.Template.Spec, tc.restoreSA, tc.restoreAud},
		} {
			aud := ""
			for _, v := range job.pod.Volumes {
				if v.Projected != nil {
					aud = v.Projected.Sources[0].ServiceAccountToken.Audience
				}
			}
			if job.pod.ServiceAccountName != job.sa || aud != job.aud {
				t.Errorf("revision %d, %s Job: account %s audience %s, want %s %s", tc.rev, job.name, job.pod.ServiceAccountName, aud, job.sa, job.aud)
			}
		}
	}
}

func bootstrapRestore() *v1alpha1.OpenBaoRestore {
	return &v1alpha1.OpenBaoRestore{ObjectMeta: metav1.ObjectMeta{Name: "bao-from-backup", Namespace: "ns"},
		Spec: v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao", Source: v1alpha1.RestoreSource{Bootstrap: true}}}
}

func fromBackup(source string) *v1alpha1.BootstrapSpec {
	return &v1alpha1.BootstrapSpec{FromBackup: &v1alpha1.BackupBootstrap{
		Target:        v1alpha1.BackupTarget{Endpoint: "https://source.example", Bucket: "old-bucket", PathPrefix: "p"},
		SourceCluster: source, Latest: true, ExpectedSHA256: strings.Repeat("ab", 32),
	}}
}

// A bootstrap restore reads fromBackup's store under the source's prefix
// with the restore role, and ignores spec.backup's store and token.
func TestABootstrapRestoreReadsTheSourcesStore(t *testing.T) {
	c := runningCluster()
	c.Spec.Backup.TokenSecretRef = &v1alpha1.SecretKeyRef{Name: "backup-token"}
	c.Spec.Bootstrap = fromBackup("src")
	args := strings.Join(restore.ExecutorConfigFor(c, bootstrapRestore()).Args(), " ")
	for _, want := range []string{"--endpoint=https://source.example", "--bucket=old-bucket", "--path-prefix=p", "--auth=jwt",
		"--jwt-role=restore", "--latest=true", "--source-cluster=src", "--expected-sha256=" + strings.Repeat("ab", 32)} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %s", args, want)
		}
	}
	if strings.Contains(args, "token-file") {
		t.Errorf("args %q use spec.backup's token", args)
	}
	c.Spec.Bootstrap.FromBackup.SourceNamespace = "prod"
	if args := strings.Join(restore.ExecutorConfigFor(c, bootstrapRestore()).Args(), " "); !strings.Contains(args, "--source-namespace=prod") {
		t.Errorf("a restore of a source in another namespace does not name it: %q", args)
	}
	c.Spec.Bootstrap.FromBackup.SourceCluster, c.Spec.Bootstrap.FromBackup.SourceNamespace = "", ""
	if args := strings.Join(restore.ExecutorConfigFor(c, bootstrapRestore()).Args(), " "); strings.Contains(args, "--source-") {
		t.Errorf("a restore of the cluster's own snapshot names a source: %q", args)
	}
	job := restore.JobFor(c, bootstrapRestore(), "operator:dev", nil)
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "backup-token" {
			t.Errorf("the Job mounts spec.backup's token Secret")
		}
	}
}

// TestDecideLetsADeletedRestoreGoOnlyOnceItsOutcomeIsKnown: a restore
// being deleted starts nothing, keeps its holds (no Release) while its Job
// may be posting the snapshot, and is released once the Job has ended or
// nothing was ever started.
func TestDecideLetsADeletedRestoreGoOnlyOnceItsOutcomeIsKnown(t *testing.T) {
	ok := backup.Report{Key: "ns/bao/x.snap", Size: 10, SHA256: strings.Repeat("a", 64), RaftIndex: 42}
	for _, tc := range []struct {
		name    string
		o       restore.Observed
		release bool
		reason  string
	}{
		{"deleted before it started: released, no Job", restore.Observed{Restore: newRestore(v1alpha1.OpenBaoRestoreStatus{}),
			Preflight: restore.Check{OK: true}}, true, restore.ReasonDeleted},
		{"deleted while held by the preflight: released", restore.Observed{Restore: newRestore(v1alpha1.OpenBaoRestoreStatus{Phase: v1alpha1.RestorePending}),
			Preflight: restore.Check{Reason: backup.ReasonClusterPaused}}, true, restore.ReasonDeleted},
		{"deleted while the Job runs: held, saying why", restore.Observed{Restore: newRestore(restoring()),
			Job: &restore.Job{Found: true, Owned: true}}, false, restore.ReasonAwaitingOutcome},
		{"deleted when the Job ended but its pod's report is not read yet: held", restore.Observed{Restore: newRestore(restoring()),
			Job: &restore.Job{Found: true, Owned: true, Succeeded: true}}, false, restore.ReasonAwaitingOutcome},
		{"deleted and the Job failed: released with the executor's reason", restore.Observed{Restore: newRestore(restoring()),
			Job: &restore.Job{Found: true, Owned: true, Failed: true, ReportRead: true,
				Report: backup.Report{Reason: restore.ReasonSealMismatch, Error: restore.SealMismatchMessage}}}, true, restore.ReasonSealMismatch},
		{"deleted and the Job installed the snapshot: released, saying the servers are not checked", restore.Observed{Restore: newRestore(restoring()),
			Job: &restore.Job{Found: true, Owned: true, Succeeded: true, ReportRead: true, Report: ok}}, true, restore.ReasonDeleted},
		{"deleted while verifying: released, no restart", restore.Observed{Restore: newRestore(verifying(time.Minute)),
			Servers: servers(0, 5, 0)}, true, restore.ReasonDeleted},
		{"deleted and the Job is gone: released, the outcome unknown, no new Job", restore.Observed{Restore: newRestore(restoring()),
			Job: &restore.Job{}}, true, restore.ReasonOutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Now, tc.o.Cluster, tc.o.Deleting = t0, runningCluster(), true
			d := restore.Decide(tc.o)
			if d.Release != tc.release || d.Status.Reason != tc.reason || d.CreateJob || len(d.RestartPods) > 0 {
				t.Fatalf("got release %v reason %s (%s) createJob %v restart %v", d.Release, d.Status.Reason, d.Status.Message, d.CreateJob, d.RestartPods)
			}
			if d.Release != d.Status.Phase.Done() {
				t.Errorf("released %v with phase %s", d.Release, d.Status.Phase)
			}
		})
	}
}

func inTheWay(running day2.Op) day2.Verdict {
	return day2.Decide(day2.Op{Ref: day2.Ref{Kind: day2.Restore, Name: "r1"}}, []day2.Op{running})
}

func TestARefusedJobTakesTheDecisionBack(t *testing.T) {
	d := restore.JobNotCreated(restoring(), "Forbidden: exceeded quota")
	s := d.Status
	if s.Phase != v1alpha1.RestorePending || s.JobName != "" || s.StartTime != nil || s.Step != "" || s.Reason != restore.ReasonJobNotCreated ||
		!strings.Contains(s.Message, "restore-bao-r1") || !strings.Contains(s.Message, "exceeded quota") || d.CreateJob || d.Requeue == 0 {
		t.Fatalf("%+v", d)
	}
	// The next pass decides afresh, recording the name before asking for the Job.
	next := restore.Decide(restore.Observed{Now: t0, Restore: newRestore(s), Cluster: runningCluster(), Preflight: restore.Check{OK: true}})
	if !next.CreateJob || next.Status.JobName != "restore-bao-r1" {
		t.Fatalf("%+v", next)
	}
}

// TestTheRestoreJobRunsOnePodOnce: the Job never runs a second pod, which
// would post the snapshot again: no retry, a disruption fails it, and no
// replacement starts beside a terminating pod.
func TestTheRestoreJobRunsOnePodOnce(t *testing.T) {
	c := runningCluster()
	c.Spec.Backup.Target = v1alpha1.BackupTarget{Endpoint: "https://s3.example.com", Bucket: "b"}
	job := restore.JobFor(c, newRestore(restoring()), "operator:1", nil)
	spec := job.Spec
	if spec.BackoffLimit == nil || *spec.BackoffLimit != 0 {
		t.Errorf("backoffLimit %d, want 0", ptr.Deref(spec.BackoffLimit, -1))
	}
	if spec.PodReplacementPolicy == nil || *spec.PodReplacementPolicy != batchv1.Failed {
		t.Errorf("podReplacementPolicy %v, want Failed", spec.PodReplacementPolicy)
	}
	if spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %s", spec.Template.Spec.RestartPolicy)
	}
	disruption := false
	for _, rule := range spec.PodFailurePolicy.Rules {
		if rule.Action != batchv1.PodFailurePolicyActionFailJob {
			t.Errorf("rule %+v does not fail the Job: a pod failure it matches would be retried", rule)
		}
		for _, p := range rule.OnPodConditions {
			disruption = disruption || (p.Type == corev1.DisruptionTarget && p.Status == corev1.ConditionTrue)
		}
	}
	if !disruption {
		t.Error("no rule fails the Job on a disrupted pod")
	}
}

// TestARestoreStartsOnlyOnceItsPreRestoreSnapshotIsStored walks
// spec.preRestoreSnapshot (the default): the OpenBaoBackup is named and
// asked for once the preflight passes, the restore waits for it, fails
// without touching OpenBao when it fails, and begins, with the key in its
// status, in the pass that sees it stored.
func TestARestoreStartsOnlyOnceItsPreRestoreSnapshotIsStored(t *testing.T) {
	pending := v1alpha1.OpenBaoRestoreStatus{Phase: v1alpha1.RestorePending, PreRestoreBackup: "r1-pre-restore-0a1b2c3d"}
	for _, tc := range []struct {
		name         string
		status       v1alpha1.OpenBaoRestoreStatus
		preflight    restore.Check
		backup       *restore.Backup
		phase        v1alpha1.RestorePhase
		reason       string
		createBackup bool
		createJob    bool
	}{
		{"held by the preflight: no snapshot yet", v1alpha1.OpenBaoRestoreStatus{}, restore.Check{Reason: backup.ReasonUpgradeInProgress},
			nil, v1alpha1.RestorePending, backup.ReasonUpgradeInProgress, false, false},
		{"the preflight passes: the backup is named and asked for, no Job", v1alpha1.OpenBaoRestoreStatus{}, restore.Check{OK: true},
			nil, v1alpha1.RestorePending, restore.ReasonTakingPreRestoreSnapshot, true, false},
		{"the backup runs: wait", pending, restore.Check{OK: true}, &restore.Backup{Found: true, Ours: true, Phase: v1alpha1.BackupRunning},
			v1alpha1.RestorePending, restore.ReasonTakingPreRestoreSnapshot, false, false},
		{"the backup is held: wait, saying why", pending, restore.Check{OK: true}, &restore.Backup{Found: true, Ours: true,
			Phase: v1alpha1.BackupPending, Reason: "Waiting", Message: "a rollout is under way"},
			v1alpha1.RestorePending, restore.ReasonTakingPreRestoreSnapshot, false, false},
		{"the backup succeeded: the Job is asked for, the key recorded", pending, restore.Check{OK: true},
			&restore.Backup{Found: true, Ours: true, Phase: v1alpha1.BackupSucceeded, Key: "ns/bao/20261123T115900Z-00000009.snap"},
			v1alpha1.RestoreRunning, restore.ReasonJobCreated, false, true},
		{"the backup succeeded but a rollout began since: held, nothing posted", pending, restore.Check{Reason: backup.ReasonUpgradeInProgress},
			&restore.Backup{Found: true, Ours: true, Phase: v1alpha1.BackupSucceeded, Key: "k"}, v1alpha1.RestorePending, backup.ReasonUpgradeInProgress, false, false},
		{"the backup failed: Failed, nothing changed", pending, restore.Check{OK: true},
			&restore.Backup{Found: true, Ours: true, Phase: v1alpha1.BackupFailed, Reason: "StoreFailed", Message: "access denied"},
			v1alpha1.RestoreFailed, restore.ReasonPreRestoreSnapshotFailed, false, false},
		{"a backup of that name is someone else's: Failed, nothing changed", v1alpha1.OpenBaoRestoreStatus{}, restore.Check{OK: true},
			&restore.Backup{Found: true, Phase: v1alpha1.BackupSucceeded, Key: "k"}, v1alpha1.RestoreFailed, restore.ReasonBackupNameTaken, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRestore(tc.status)
			r.Spec.PreRestoreSnapshot = nil // the default
			d := restore.Decide(restore.Observed{Now: t0, Restore: r, Cluster: runningCluster(), Preflight: tc.preflight, PreRestore: tc.backup})
			s := d.Status
			if s.Phase != tc.phase || s.Reason != tc.reason || d.CreateBackup != tc.createBackup || d.CreateJob != tc.createJob {
				t.Fatalf("got phase %s reason %s (%s) createBackup %v createJob %v", s.Phase, s.Reason, s.Message, d.CreateBackup, d.CreateJob)
			}
			if d.CreateBackup && s.PreRestoreBackup != r.PreRestoreBackupName() {
				t.Errorf("asks for backup %q without recording it", s.PreRestoreBackup)
			}
			if d.CreateJob && (s.PreRestoreKey != tc.backup.Key || !strings.Contains(s.Message, tc.backup.Key)) {
				t.Errorf("began without recording the pre-restore key: %+v", s)
			}
			if tc.backup != nil && tc.backup.Message != "" && !strings.Contains(s.Message, tc.backup.Message) {
				t.Errorf("the message does not say why the backup waits or failed: %s", s.Message)
			}
			if s.Phase.Done() && !strings.Contains(s.Message, "nothing was changed") {
				t.Errorf("a restore that failed before posting does not say nothing changed: %s", s.Message)
			}
		})
	}
}

func TestNoPreRestoreSnapshotWhenTurnedOffOrForABootstrapRestore(t *testing.T) {
	r := newRestore(v1alpha1.OpenBaoRestoreStatus{})
	if r.WantsPreRestoreSnapshot() {
		t.Error("preRestoreSnapshot: false takes one")
	}
	r.Spec.PreRestoreSnapshot = nil
	if !r.WantsPreRestoreSnapshot() {
		t.Error("the default takes none")
	}
	if b := bootstrapRestore(); b.WantsPreRestoreSnapshot() {
		t.Error("a bootstrap restore, of a cluster holding nothing yet, takes one")
	}
	if name := r.PreRestoreBackupName(); name != "r1-pre-restore-0a1b2c3d" {
		t.Errorf("name %q", name)
	}
}

// TestLatestAfterAPreRestoreSnapshotIsTheNewestBeforeIt: source.latest
// with a pre-restore snapshot restores the newest snapshot older than it,
// never that copy of the data the restore replaces (nor anything newer).
func TestLatestAfterAPreRestoreSnapshotIsTheNewestBeforeIt(t *testing.T) {
	prefix := backup.ObjectPrefix("p", "ns", "bao")
	key := func(age time.Duration, id string) string { return prover.SignedObjectKey(prefix, t0.Add(-age), id) }
	pre := key(time.Minute, "0000000f")
	objects := []objectstore.Object{{Key: key(time.Hour, "00000001")}, {Key: key(2*time.Hour, "00000002")}, {Key: pre},
		{Key: key(0, "00000003")}, {Key: key(time.Minute, "00000000")}}
	for _, tc := range []struct{ name, before, want string }{
		{"no bound: the newest", "", key(0, "00000003")},
		{"bounded by the pre-restore snapshot: the newest before it, same second ordered by key", pre, key(time.Minute, "00000000")},
		{"a bound that is not a snapshot of this cluster: none", "elsewhere/x.snap", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := restore.SelectLatestBefore(prover, objects, prefix, tc.before)
			if tc.want == "" {
				if err != restore.ErrNoSnapshot {
					t.Fatalf("got %v, %v", got, err)
				}
				return
			}
			if err != nil || got.Key != tc.want {
				t.Fatalf("got %q, %v; want %q", got.Key, err, tc.want)
			}
		})
	}
	c := runningCluster()
	c.Spec.Backup.Target = v1alpha1.BackupTarget{Endpoint: "https://s3.example.com", Bucket: "b"}
	r := newRestore(restoring())
	r.Status.PreRestoreKey = pre
	cfg, err := restore.ParseExecutorArgs(restore.ExecutorConfigFor(c, r).Args()[1:], nil)
	if err != nil || !cfg.Latest || cfg.LatestBefore != pre {
		t.Fatalf("the executor reads back %+v, %v", cfg, err)
	}
}

func tagOf(key string) string {
	return strings.TrimSuffix(key[strings.LastIndex(key, "-")+1:], ".snap")
}

// FuzzLatestIsNeverAnUnprovenObject: whatever else the prefix holds
// (names planted in the executor's form at any time, real tags on other
// times, foreign files), latest is a name the cluster's key proves, and the
// same one it would be were the unproven objects absent; every unproven
// object directly under the prefix is counted as ignored.
func FuzzLatestIsNeverAnUnprovenObject(f *testing.F) {
	f.Add([]byte{1, 2, 160, 210, 240})
	f.Add([]byte{199, 3})
	f.Fuzz(func(t *testing.T, plan []byte) {
		prefix := backup.ObjectPrefix("p", "ns", "bao")
		var all, real []objectstore.Object
		unproven := 0
		for i, b := range plan {
			id := strings.Repeat(string("0123456789abcdef"[i%16]), 8)
			at := t0.Add(-time.Duration(b%100) * time.Hour)
			var o objectstore.Object
			switch {
			case b < 150:
				o = objectstore.Object{Key: prover.SignedObjectKey(prefix, at, id)}
				real = append(real, o)
			case b < 200:
				o, unproven = objectstore.Object{Key: backup.ObjectKey(prefix, t0.Add(time.Duration(b)*24*time.Hour), id)}, unproven+1
			case b < 230:
				k := prover.SignedObjectKey(prefix, at, id)
				o, unproven = objectstore.Object{Key: prefix + "99991231T000000Z" + strings.TrimPrefix(k, prefix)[16:]}, unproven+1
			default:
				o, unproven = objectstore.Object{Key: prefix + "x-" + id + ".snap"}, unproven+1
			}
			all = append(all, o)
		}
		got, ignored, err := restore.SelectLatest(prover, all, prefix)
		alone, _, errAlone := restore.SelectLatest(prover, real, prefix)
		if got.Key != alone.Key || (err == nil) != (errAlone == nil) {
			t.Fatalf("latest %q (%v) with planted objects, %q (%v) without", got.Key, err, alone.Key, errAlone)
		}
		if err == nil {
			if _, ok := prover.Prove(prefix, got.Key); !ok {
				t.Fatalf("latest %q is not proven", got.Key)
			}
		}
		if n := 0; ignored != nil {
			n = ignored.Count
			if n != unproven {
				t.Fatalf("ignored %d, want %d", n, unproven)
			}
		} else if unproven != 0 {
			t.Fatalf("ignored nothing, want %d", unproven)
		}
	})
}
