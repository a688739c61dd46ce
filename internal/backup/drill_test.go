package backup_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/config/crd"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/crdschema"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/test/fixtures"
)

var drillStart = time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)

func drillCluster(verifying, last *v1alpha1.BackupVerification) *v1alpha1.OpenBaoCluster {
	return backupCluster(func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.Backup.Verify = &v1alpha1.BackupVerify{Enabled: true}
		c.Status.Backup = &v1alpha1.BackupStatus{LastBackupName: "b2", Verifying: verifying, LastVerified: last}
		c.Status.IdentityConfigured, c.Status.IdentityRevision = true, identity.Revision
	})
}

func succeeded(name, canary string) *v1alpha1.OpenBaoBackup {
	return &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: v1alpha1.OpenBaoBackupStatus{
		Phase: v1alpha1.BackupSucceeded, Key: "prod/ns/bao/" + name + ".snap", SHA256: strings.Repeat("c", 64), Canary: canary}}
}

// drillCopy is the copy as the API would hold it: fb says how far it got.
func drillCopy(c *v1alpha1.OpenBaoCluster, fb *v1alpha1.FromBackupStatus) *v1alpha1.OpenBaoCluster {
	cp := backup.DrillCopyFor(c, succeeded("b2", ""))
	cp.Status.FromBackup = fb
	return cp
}

func underWay(at time.Time) *v1alpha1.BackupVerification {
	start := metav1.NewTime(at)
	return &v1alpha1.BackupVerification{Backup: "b2", Key: "prod/ns/bao/b2.snap", Copy: "bao-drill", StartTime: &start}
}

func TestADrillRestoresEachNewBackupOnceAndReadsItsCanaryBack(t *testing.T) {
	const canary = "2026-11-23T02:59:59.5Z"
	done := &metav1.Time{Time: drillStart}
	restored := &v1alpha1.FromBackupStatus{Restore: "bao-drill-from-backup", CompletedAt: done}
	for _, tc := range []struct {
		name string
		o    func() backup.DrillObserved
		// want: the drill's state afterwards ("", "verifying", or a result
		// reason), and what happens to the copy.
		want           string
		create, delete bool
	}{
		{"a new successful backup starts a drill", func() backup.DrillObserved {
			return backup.DrillObserved{Cluster: drillCluster(nil, nil), Backup: succeeded("b2", canary)}
		}, "verifying", true, false},
		{"an identity without the drill role fails the drill and makes no copy", func() backup.DrillObserved {
			c := drillCluster(nil, nil)
			c.Status.IdentityRevision = 2
			return backup.DrillObserved{Cluster: c, Backup: succeeded("b2", canary), Now: drillStart}
		}, backup.ReasonDrillIdentityOutdated, false, false},
		{"a drilled backup is not drilled again", func() backup.DrillObserved {
			return backup.DrillObserved{Cluster: drillCluster(nil, &v1alpha1.BackupVerification{Backup: "b2"}), Backup: succeeded("b2", canary)}
		}, "", false, false},
		{"a failed backup is not drilled", func() backup.DrillObserved {
			b := succeeded("b2", canary)
			b.Status.Phase = v1alpha1.BackupFailed
			return backup.DrillObserved{Cluster: drillCluster(nil, nil), Backup: b}
		}, "", false, false},
		{"a copy left over goes before the next drill", func() backup.DrillObserved {
			c := drillCluster(nil, nil)
			return backup.DrillObserved{Cluster: c, Backup: succeeded("b2", canary), Copy: drillCopy(c, nil)}
		}, "", false, true},
		{"a copy still forming is waited for", func() backup.DrillObserved {
			c := drillCluster(underWay(drillStart), nil)
			return backup.DrillObserved{Cluster: c, Backup: succeeded("b2", canary), Copy: drillCopy(c, nil), Now: drillStart.Add(time.Minute)}
		}, "verifying", false, false},
		{"the canary read back passes", func() backup.DrillObserved {
			c := drillCluster(underWay(drillStart), nil)
			return backup.DrillObserved{Cluster: c, Backup: succeeded("b2", canary), Copy: drillCopy(c, restored), Now: drillStart.Add(time.Minute),
				CanaryRead: true, Canary: map[string]any{"backup": "b2", "writtenAt": canary}}
		}, backup.ReasonDrillCanaryMatched, false, true},
		{"another canary fails", func() backup.DrillObserved {
			c := drillCluster(underWay(drillStart), nil)
			return backup.DrillObserved{Cluster: c, Backup: succeeded("b2", canary), Copy: drillCopy(c, restored), Now: drillStart.Add(time.Minute),
				CanaryRead: true, Canary: map[string]any{"backup": "b1", "writtenAt": "2026-11-22T02:59:59Z"}}
		}, backup.ReasonDrillCanaryMismatch, false, true},
		{"an unreadable canary is retried", func() backup.DrillObserved {
			c := drillCluster(underWay(drillStart), nil)
			return backup.DrillObserved{Cluster: c, Backup: succeeded("b2", canary), Copy: drillCopy(c, restored), Now: drillStart.Add(time.Minute),
				CanaryRead: true, CanaryErr: errors.New("permission denied")}
		}, "verifying", false, false},
		{"a failed restore fails the drill", func() backup.DrillObserved {
			c := drillCluster(underWay(drillStart), nil)
			return backup.DrillObserved{Cluster: c, Backup: succeeded("b2", canary), Now: drillStart.Add(time.Minute),
				Copy: drillCopy(c, &v1alpha1.FromBackupStatus{Restore: "x", Failed: "ChecksumMismatch"})}
		}, backup.ReasonDrillRestoreFailed, false, true},
		{"a drill past its timeout fails", func() backup.DrillObserved {
			c := drillCluster(underWay(drillStart), nil)
			return backup.DrillObserved{Cluster: c, Backup: succeeded("b2", canary), Copy: drillCopy(c, nil), Now: drillStart.Add(backup.DefaultDrillTimeout)}
		}, backup.ReasonDrillTimedOut, false, true},
		{"a cluster of that name that is not the copy is never deleted", func() backup.DrillObserved {
			c := drillCluster(underWay(drillStart), nil)
			other := drillCopy(c, restored)
			other.Labels = nil
			return backup.DrillObserved{Cluster: c, Backup: succeeded("b2", canary), Copy: other, Now: drillStart.Add(time.Minute)}
		}, backup.ReasonDrillCopyNameTaken, false, false},
		{"a missing copy is created again", func() backup.DrillObserved {
			return backup.DrillObserved{Cluster: drillCluster(underWay(drillStart), nil), Backup: succeeded("b2", canary), Now: drillStart.Add(time.Minute)}
		}, "verifying", true, false},
		{"verify turned off drops the drill and its copy", func() backup.DrillObserved {
			c := drillCluster(underWay(drillStart), nil)
			c.Spec.Backup.Verify.Enabled = false
			return backup.DrillObserved{Cluster: c, Backup: succeeded("b2", canary), Copy: drillCopy(c, nil)}
		}, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := backup.DecideDrill(tc.o())
			got := ""
			switch {
			case d.Verifying != nil:
				got = "verifying"
			case d.Ended != nil:
				got = d.Ended.Reason
			}
			if got != tc.want || (d.CreateCopy != nil) != tc.create || d.DeleteCopy != tc.delete {
				t.Fatalf("got %q create %v delete %v, want %q %v %v (%+v)", got, d.CreateCopy != nil, d.DeleteCopy, tc.want, tc.create, tc.delete, d)
			}
			if d.Ended != nil && (d.Ended.Result == v1alpha1.DrillPassed) != (d.LastSuccess != nil) {
				t.Fatalf("result %s, last success %v", d.Ended.Result, d.LastSuccess)
			}
		})
	}
}

// The copy restores the backup's object with its digest into one server
// of the same version, storage and seal, keeps the source's identity, and
// goes whole with its data.
func TestADrillCopyIsOneServerOfTheSameClusterFormedFromTheBackup(t *testing.T) {
	c := backupCluster()
	cp := backup.DrillCopyFor(c, succeeded("b2", ""))
	fb := cp.Spec.Bootstrap.FromBackup
	switch {
	case cp.Name != "bao-drill" || cp.Spec.Replicas != 1 || cp.Spec.Version != c.Spec.Version || cp.Spec.DeletionPolicy != v1alpha1.DeletionPolicyDeleteAll:
		t.Fatalf("copy %s: %+v", cp.Name, cp.Spec)
	case fb.Key != "prod/ns/bao/b2.snap" || fb.ExpectedSHA256 != strings.Repeat("c", 64) || fb.SourceCluster != "bao" || !fb.KeepSourceIdentity:
		t.Fatalf("fromBackup %+v", fb)
	case fb.UnsealKeySecretRef == nil || fb.UnsealKeySecretRef.Name != "bao-unseal-key" || fb.Target.Bucket != "backups":
		t.Fatalf("seal and store %+v", fb)
	case len(cp.OwnerReferences) != 1 || cp.OwnerReferences[0].UID != c.UID || cp.Labels[v1alpha1.LabelDrillOf] != "bao":
		t.Fatalf("owner %+v labels %v", cp.OwnerReferences, cp.Labels)
	}
	long := backupCluster(func(c *v1alpha1.OpenBaoCluster) { c.Name = strings.Repeat("a", 40) })
	if n := long.DrillCopyName(); len(n) > 40 {
		t.Fatalf("copy name %s is longer than a cluster name may be", n)
	}
}

// TestADrillCopyInheritsEveryProtectionOfItsSource: the copy receives the
// source's seal key and snapshot, so it runs under the same image
// verification, network policy (and API clients), scheduling constraints,
// config and values. Over sources filled at random, every spec field is
// the source's except the overrides DrillCopyFor names; a field added to
// the spec later is inherited unless it is named there.
func TestADrillCopyInheritsEveryProtectionOfItsSource(t *testing.T) {
	overrides := map[string]bool{}
	for _, f := range backup.DrillCopyOverrides {
		overrides[f] = true
	}
	specType := reflect.TypeOf(v1alpha1.OpenBaoClusterSpec{})
	for name := range overrides {
		if _, ok := specType.FieldByName(name); !ok {
			t.Errorf("DrillCopyOverrides names %s, which OpenBaoClusterSpec does not have", name)
		}
	}
	filler := randfill.NewWithSeed(1).NilChance(0).NumElements(1, 2).Funcs(
		func(j *apiextensionsv1.JSON, c randfill.Continue) { j.Raw = []byte(`{"k":"` + c.String(8) + `"}`) },
		func(q *resource.Quantity, c randfill.Continue) { *q = resource.MustParse("1Gi") },
	)
	for i := range 20 {
		c := backupCluster(func(c *v1alpha1.OpenBaoCluster) {})
		filler.Fill(&c.Spec)
		cp := backup.DrillCopyFor(c, succeeded("b2", ""))
		src, got := reflect.ValueOf(c.Spec), reflect.ValueOf(cp.Spec)
		for f := range specType.NumField() {
			name := specType.Field(f).Name
			if overrides[name] {
				continue
			}
			if !apiequality.Semantic.DeepEqual(src.Field(f).Interface(), got.Field(f).Interface()) {
				t.Errorf("run %d: the drill copy's spec.%s differs from its source's: a protection dropped", i, name)
			}
		}
	}
	src := backupCluster(func(c *v1alpha1.OpenBaoCluster) {})
	cp := backup.DrillCopyFor(src, succeeded("b2", ""))
	src.Spec.Upgrade.TokenSecretRef = &v1alpha1.SecretKeyRef{Name: "prod-upgrade-token"}
	src.Spec.Upgrade.JWTAuthRole = "ops"
	cp = backup.DrillCopyFor(src, succeeded("b2", ""))
	if cp.Spec.Upgrade.TokenSecretRef != nil || cp.Spec.Upgrade.JWTAuthRole != "" {
		t.Errorf("the copy would log in with the source's own upgrade credential: %+v", cp.Spec.Upgrade)
	}
	if cp.Spec.Backup != nil || cp.Spec.Ingress != nil || cp.Spec.Replicas != 1 ||
		cp.Spec.DeletionPolicy != v1alpha1.DeletionPolicyDeleteAll || cp.Spec.Bootstrap.FromBackup.SourceCluster != src.Name {
		t.Errorf("the copy's own fields: %+v", cp.Spec)
	}
}

// TestADrillCopyOfEverySampleIsAdmitted: the copy is created through the
// API server, so the CRD's rules apply to it as to any cluster. For every
// sample and fixture with backups (the production sample revokes its root
// token with recovery keys), the copy of its backup passes them: a copy
// the API refuses is a drill that never runs.
func TestADrillCopyOfEverySampleIsAdmitted(t *testing.T) {
	schema, err := crdschema.Load(crd.OpenBaoClusters, v1alpha1.GroupVersion.Version)
	if err != nil {
		t.Fatal(err)
	}
	files := fixtures.Files(t)
	drilled := 0
	for _, name := range fixtures.Names(files) {
		c := fixtures.Load(t, files[name])
		if c.Spec.Backup == nil || c.Spec.Bootstrap != nil {
			continue
		}
		drilled++
		cp := backup.DrillCopyFor(c, succeeded("b2", ""))
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cp)
		if err != nil {
			t.Fatal(err)
		}
		delete(obj, "status")
		if errs := schema.Admit(context.Background(), obj, nil); len(errs) > 0 {
			t.Errorf("%s: the API refuses the drill copy: %v", name, errs.ToAggregate())
		}
	}
	if drilled == 0 {
		t.Fatal("no sample or fixture has backups to drill")
	}
}
