package day2_test

import (
	"strings"
	"testing"

	"github.com/openbao/operator/internal/day2"
)

func op(k day2.Kind, name string) day2.Op { return day2.Op{Ref: day2.Ref{Kind: k, Name: name}} }

func stepOf(o day2.Op, of day2.Ref) day2.Op { o.Of = &of; return o }

var (
	rollout = day2.RolloutOp()
	backup1 = op(day2.Backup, "b1")
	backup2 = op(day2.Backup, "b2")
	restor1 = op(day2.Restore, "r1")
	restor2 = op(day2.Restore, "r2")
	drill1  = op(day2.Drill, "b0")
	drill2  = op(day2.Drill, "b1")
)

// TestTheMatrix covers every cell of {rollout, backup, restore, drill}
// starting beside {rollout, backup, restore, drill} under way.
func TestTheMatrix(t *testing.T) {
	covered := map[[2]day2.Kind]bool{}
	for _, tc := range []struct {
		name          string
		want, running day2.Op
		reason        string // "" starts
	}{
		{"a rollout waits for another rollout", rollout, day2.Op{Ref: day2.Ref{Kind: day2.Rollout, Name: "other"}}, day2.ReasonUpgradeInProgress},
		{"a rollout waits for a backup: the snapshot would catch servers of two versions", rollout, backup1, day2.ReasonBackupInProgress},
		{"a rollout waits for a restore", rollout, restor1, day2.ReasonRestoreInProgress},
		{"a rollout starts beside a drill, which touches only its copy", rollout, drill1, ""},
		{"a backup waits for a rollout", backup1, rollout, day2.ReasonUpgradeInProgress},
		{"a backup waits for another backup of the cluster", backup2, backup1, day2.ReasonBackupInProgress},
		{"a backup waits for a restore: its snapshot would hold neither state", backup1, restor1, day2.ReasonRestoreInProgress},
		{"a backup starts beside a drill", backup1, drill1, ""},
		{"a restore waits for a rollout", restor1, rollout, day2.ReasonUpgradeInProgress},
		{"a restore waits for a backup", restor1, backup1, day2.ReasonBackupInProgress},
		{"a restore waits for another restore", restor2, restor1, day2.ReasonRestoreInProgress},
		{"a restore starts beside a drill, which reads the backup target only", restor1, drill1, ""},
		{"a drill starts beside a rollout", drill1, rollout, ""},
		{"a drill starts beside a backup", drill1, backup1, ""},
		{"a drill starts beside a restore", drill1, restor1, ""},
		{"a drill waits for another drill: the copy has one name", drill2, drill1, day2.ReasonDrillInProgress},
	} {
		covered[[2]day2.Kind{tc.want.Kind, tc.running.Kind}] = true
		t.Run(tc.name, func(t *testing.T) {
			v := day2.Decide(tc.want, []day2.Op{tc.running})
			if v.Reason != tc.reason || v.OK() != (tc.reason == "") {
				t.Fatalf("verdict %+v, want reason %q", v, tc.reason)
			}
			if !v.OK() && (v.In.Ref != tc.running.Ref || !strings.Contains(v.Message, tc.running.Ref.String()) ||
				!strings.Contains(v.Message, "the "+string(tc.want.Kind)+" starts once")) {
				t.Fatalf("the verdict does not name what is in the way: %+v", v)
			}
			if day2.Waits(tc.want.Kind, tc.running.Kind) != (tc.reason != "") {
				t.Fatalf("Waits(%s, %s) disagrees with Decide", tc.want.Kind, tc.running.Kind)
			}
		})
	}
	for _, want := range day2.Kinds {
		for _, running := range day2.Kinds {
			if !covered[[2]day2.Kind{want, running}] {
				t.Errorf("no case of a %s starting beside a %s", want, running)
			}
		}
	}
}

func TestStepsAndSelves(t *testing.T) {
	preUpgrade := stepOf(backup1, rollout.Ref)
	preRestore := stepOf(backup2, restor1.Ref)
	for _, tc := range []struct {
		name    string
		want    day2.Op
		running []day2.Op
		reason  string
	}{
		{"an operation never waits for itself", backup1, []day2.Op{backup1}, ""},
		{"a rollout's pre-upgrade snapshot starts beside its rollout", preUpgrade, []day2.Op{rollout}, ""},
		{"a rollout is not held by its pre-upgrade snapshot", rollout, []day2.Op{preUpgrade}, ""},
		{"a pre-upgrade snapshot still waits for a restore", preUpgrade, []day2.Op{rollout, restor1}, day2.ReasonRestoreInProgress},
		{"a restore is not held by its pre-restore snapshot", restor1, []day2.Op{preRestore}, ""},
		{"another restore is held by that snapshot", restor2, []day2.Op{preRestore}, day2.ReasonBackupInProgress},
		{"a pre-restore snapshot waits for a rollout", preRestore, []day2.Op{rollout}, day2.ReasonUpgradeInProgress},
		{"a restore is named before a rollout, and a rollout before a backup", backup2,
			[]day2.Op{drill1, backup1, rollout, restor2, restor1}, day2.ReasonRestoreInProgress},
		{"nothing under way: anything starts", restor1, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v := day2.Decide(tc.want, tc.running); v.Reason != tc.reason {
				t.Fatalf("verdict %+v, want reason %q", v, tc.reason)
			}
		})
	}
}

func TestTheVerdictNamesEveryOperationOfTheKindInTheWay(t *testing.T) {
	v := day2.Decide(restor1, []day2.Op{backup2, backup1, drill1})
	if v.In.Name != "b1" || v.Message != "backup b1, b2 of this cluster is under way; the restore starts once it has finished" {
		t.Fatalf("verdict %+v", v)
	}
	if v := day2.Decide(backup1, []day2.Op{rollout}); v.Message != "a rollout of this cluster is under way; the backup starts once it has finished" {
		t.Fatalf("verdict %+v", v)
	}
}
