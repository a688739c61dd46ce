package day2_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/day2"
)

var bao = day2.Cluster{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "bao"}, UID: "uid-1"}

// queued and running are what the cache shows of one backup or restore.
func queued(ops ...day2.Op) day2.Observation  { return day2.Observation{Queued: ops} }
func running(ops ...day2.Op) day2.Observation { return day2.Observation{Running: ops} }

func TestARestoreStartedInMemoryHoldsABackupUntilTheCacheShowsIt(t *testing.T) {
	reg := &day2.Registry{}
	if v := reg.Start(bao, restor1, queued(restor1, backup1)); !v.OK() {
		t.Fatalf("the restore did not start: %+v", v)
	}
	// The cache still shows the restore queued: its status write is not seen.
	if v := reg.Start(bao, backup1, queued(restor1, backup1)); v.Reason != day2.ReasonRestoreInProgress || v.In.Name != "r1" {
		t.Fatalf("a backup in the cache-lag window: %+v", v)
	}
	// The cache shows it running: the object holds, the entry goes.
	if v := reg.Check(bao, backup1, running(restor1)); v.Reason != day2.ReasonRestoreInProgress {
		t.Fatalf("a backup beside a running restore: %+v", v)
	}
	if v := reg.Check(bao, backup1, day2.Observation{Queued: []day2.Op{restor1}}); !v.OK() {
		t.Fatalf("the entry outlived the cache showing the restore: %+v", v)
	}
}

func TestABackupStartedInMemoryHoldsARestoreUntilTheCacheShowsIt(t *testing.T) {
	reg := &day2.Registry{}
	reg.Start(bao, backup1, queued(backup1))
	if v := reg.Start(bao, restor1, queued(backup1, restor1)); v.Reason != day2.ReasonBackupInProgress {
		t.Fatalf("a restore in the cache-lag window: %+v", v)
	}
	// Refused, the restore was not recorded: the backup's end frees it.
	if v := reg.Start(bao, restor1, queued(restor1)); !v.OK() {
		t.Fatalf("the backup, gone from the cache, still holds: %+v", v)
	}
}

func TestEntriesGo(t *testing.T) {
	for _, tc := range []struct {
		name string
		then func(*day2.Registry) day2.Verdict
	}{
		{"when the cache shows the object gone", func(r *day2.Registry) day2.Verdict {
			return r.Check(bao, backup2, day2.Observation{})
		}},
		{"when the cache shows another object of the name", func(r *day2.Registry) day2.Verdict {
			again := backup1
			again.UID = "other"
			return r.Check(bao, backup2, queued(again))
		}},
		{"when the starter releases a start that did not happen", func(r *day2.Registry) day2.Verdict {
			r.Release(bao, backup1.Ref)
			return r.Check(bao, backup2, queued(backup1))
		}},
		{"when its starter decides afresh that nothing of its kind starts", func(r *day2.Registry) day2.Verdict {
			r.ReleaseKind(bao, day2.Backup)
			return r.Check(bao, backup2, queued(backup1))
		}},
		{"when the cluster is forgotten", func(r *day2.Registry) day2.Verdict {
			r.Forget(bao.NamespacedName)
			if r.Remembers(bao.NamespacedName) {
				t.Fatal("the cluster is remembered after Forget")
			}
			return r.Check(bao, backup2, queued(backup1))
		}},
		{"when a cluster of another UID takes the name", func(r *day2.Registry) day2.Verdict {
			again := bao
			again.UID = "uid-2"
			return r.Check(again, backup2, queued(backup1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := &day2.Registry{}
			b := backup1
			b.UID = "b1-uid"
			if v := reg.Start(bao, b, queued(b)); !v.OK() {
				t.Fatal(v)
			}
			if v := reg.Check(bao, backup2, queued(b)); v.OK() {
				t.Fatal("the start was not recorded")
			}
			if v := tc.then(reg); !v.OK() {
				t.Fatalf("the entry stayed: %+v", v)
			}
		})
	}
}

func TestARolloutStartedInMemoryHoldsUntilTheStatusShowsIt(t *testing.T) {
	reg := &day2.Registry{}
	reg.Start(bao, rollout, day2.Observation{})
	if v := reg.Check(bao, restor1, queued(restor1)); v.Reason != day2.ReasonUpgradeInProgress {
		t.Fatalf("a restore before the cache shows the rollout: %+v", v)
	}
	if v := reg.Check(bao, restor1, day2.Observation{Running: []day2.Op{rollout}}); v.Reason != day2.ReasonUpgradeInProgress {
		t.Fatalf("a restore beside the rollout: %+v", v)
	}
	if v := reg.Check(bao, restor1, queued(restor1)); !v.OK() {
		t.Fatalf("the rollout's entry outlived the status showing it: %+v", v)
	}
}

func TestTheNilRegistryDecidesFromTheCache(t *testing.T) {
	var reg *day2.Registry
	reg.Start(bao, restor1, queued(restor1))
	if v := reg.Check(bao, backup1, queued(restor1)); !v.OK() {
		t.Fatalf("verdict %+v", v)
	}
	reg.Release(bao, restor1.Ref)
	reg.Forget(bao.NamespacedName)
}

func TestObserve(t *testing.T) {
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "ns"}}
	gone := metav1.NewTime(time.Unix(1, 0))
	backup := func(name, job string, phase v1alpha1.BackupPhase, labels map[string]string, deleting bool) v1alpha1.OpenBaoBackup {
		b := v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: "bao"}}
		b.Status.JobName, b.Status.Phase = job, phase
		if deleting {
			b.DeletionTimestamp = &gone
		}
		return b
	}
	backups := []v1alpha1.OpenBaoBackup{
		backup("queued", "", v1alpha1.BackupPending, nil, false),
		backup("deleted-before-start", "", "", nil, true),
		backup("running", "job", v1alpha1.BackupRunning, nil, false),
		backup("deleted-while-running", "job", v1alpha1.BackupRunning, nil, true),
		backup("done", "job", v1alpha1.BackupSucceeded, nil, false),
		backup("pre-upgrade", "job", v1alpha1.BackupRunning, map[string]string{v1alpha1.LabelBackupTrigger: v1alpha1.BackupTriggerPreUpgrade}, false),
		backup("pre-restore", "", "", map[string]string{v1alpha1.LabelBackupTrigger: v1alpha1.BackupTriggerPreRestore, v1alpha1.LabelRestore: "r1"}, false),
	}
	other := backup("of-another-cluster", "job", v1alpha1.BackupRunning, nil, false)
	other.Spec.ClusterName = "other"
	backups = append(backups, other)
	restores := []v1alpha1.OpenBaoRestore{{ObjectMeta: metav1.ObjectMeta{Name: "r1"}, Spec: v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao"}}}
	restores[0].Status.JobName, restores[0].Status.Phase = "job", v1alpha1.RestoreRunning
	// Being deleted does not end a restore's hold; only its end does.
	deleted := restores[0].DeepCopy()
	deleted.Name, deleted.DeletionTimestamp, deleted.Finalizers = "r2-deleted-mid-restore", &gone, []string{v1alpha1.RestoreFinalizer}
	restores = append(restores, *deleted)
	status := &v1alpha1.OpenBaoClusterStatus{Upgrade: &v1alpha1.UpgradeStatus{}, Backup: &v1alpha1.BackupStatus{
		Verifying: &v1alpha1.BackupVerification{Backup: "done"}, LastVerified: &v1alpha1.BackupVerification{Backup: "older"}}}

	o := day2.Observe(c, status, backups, restores)
	if got := day2.Names(o.Running, day2.Backup); join(got) != "deleted-while-running,pre-upgrade,running" {
		t.Errorf("running backups %v", got)
	}
	if got := o.Unfinished(day2.Backup); join(got) != "deleted-while-running,pre-upgrade,running,pre-restore,queued" {
		t.Errorf("unfinished backups %v", got)
	}
	if join(day2.Names(o.Running, day2.Restore)) != "r1,r2-deleted-mid-restore" || join(day2.Names(o.Running, day2.Rollout)) != "" ||
		len(day2.Names(o.Running, day2.Rollout)) != 1 || join(day2.Names(o.Running, day2.Drill)) != "done" ||
		join(day2.Names(o.Ended, day2.Drill)) != "older" {
		t.Errorf("observation %+v", o)
	}
	for _, op := range o.Running {
		if op.Name == "pre-upgrade" && (op.Of == nil || op.Of.Kind != day2.Rollout) {
			t.Errorf("the pre-upgrade snapshot is not the rollout's step: %+v", op)
		}
	}
	for _, op := range o.Queued {
		if op.Name == "pre-restore" && (op.Of == nil || *op.Of != restor1.Ref) {
			t.Errorf("the pre-restore snapshot is not r1's step: %+v", op)
		}
	}
	c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionUpgrading, Status: metav1.ConditionTrue}}
	if o := day2.Observe(c, nil, nil, nil); len(o.Running) != 1 || o.Running[0].Kind != day2.Rollout {
		t.Errorf("Upgrading True is a rollout under way (the pre-upgrade snapshot is taken): %+v", o)
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}
