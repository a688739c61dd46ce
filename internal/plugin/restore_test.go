package plugin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/openbao/operator/api/v1alpha1"
)

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}

const testSHA = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"

func restoreFixtures() (*v1alpha1.OpenBaoCluster, *v1alpha1.OpenBaoBackup, *v1alpha1.OpenBaoBackup) {
	cluster := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "bao"}}
	done := metav1.NewMicroTime(time.Date(2026, 3, 1, 2, 0, 4, 0, time.UTC))
	nightly := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "nightly-1"},
		Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: "bao"},
		Status: v1alpha1.OpenBaoBackupStatus{Phase: v1alpha1.BackupSucceeded, Key: "prod/bao/20260301T020000Z-0a1b2c3d.snap",
			Size: 4096, SizeText: "4.0 KiB", SHA256: testSHA, CompletionTime: &done}}
	other := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "other-1"},
		Spec:   v1alpha1.OpenBaoBackupSpec{ClusterName: "other"},
		Status: v1alpha1.OpenBaoBackupStatus{Phase: v1alpha1.BackupSucceeded, Key: "prod/other/x.snap"}}
	return cluster, nightly, other
}

// runRestore runs `kubectl openbao restore` against a fake API server
// holding the fixtures, with stdin a terminal or not.
func runRestore(t *testing.T, terminal bool, stdin string, args ...string) (client.Client, string, string, error) {
	t.Helper()
	cluster, nightly, other := restoreFixtures()
	cl := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(cluster, nightly, other).Build()
	var out, errOut bytes.Buffer
	c := &cli{streams: genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut},
		kube: genericclioptions.NewConfigFlags(true), isTerminal: func(io.Reader) bool { return terminal },
		clients: func() (*Commands, error) {
			return &Commands{Client: cl, Namespace: "prod", Now: time.Now}, nil
		}}
	root := newRoot(c)
	root.SetArgs(append([]string{"restore", "bao"}, args...))
	err := root.Execute()
	return cl, out.String(), errOut.String(), err
}

func restoresOf(t *testing.T, cl client.Client) []v1alpha1.OpenBaoRestore {
	t.Helper()
	list := &v1alpha1.OpenBaoRestoreList{}
	if err := cl.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestRestoreOffATerminalNeedsYes: a script or a pipe cannot answer the
// question, so without --yes nothing is created; with it, exactly one
// OpenBaoRestore with the asked source.
func TestRestoreOffATerminalNeedsYes(t *testing.T) {
	for _, args := range [][]string{{"--latest"}, {"--backup", "nightly-1"}} {
		cl, out, _, err := runRestore(t, false, "y\n", args...)
		if !errors.Is(err, ErrNotConfirmed) || !strings.Contains(err.Error(), "--yes") {
			t.Errorf("%v off a terminal without --yes: got %v, want a refusal naming --yes", args, err)
		}
		if n := len(restoresOf(t, cl)); n != 0 || out != "" {
			t.Errorf("%v without --yes: %d OpenBaoRestores created, printed %q", args, n, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want v1alpha1.RestoreSource
		sha  string
	}{
		{[]string{"--latest", "--yes"}, v1alpha1.RestoreSource{Latest: true}, ""},
		{[]string{"--backup", "nightly-1", "--yes"}, v1alpha1.RestoreSource{Key: "prod/bao/20260301T020000Z-0a1b2c3d.snap"}, testSHA},
	} {
		cl, out, _, err := runRestore(t, false, "", tc.args...)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		got := restoresOf(t, cl)
		if len(got) != 1 {
			t.Fatalf("%v: %d OpenBaoRestores, want 1", tc.args, len(got))
		}
		r := got[0]
		if r.Spec.ClusterName != "bao" || r.Spec.Source != tc.want || r.Spec.ExpectedSHA256 != tc.sha || r.Spec.Force ||
			r.Spec.PreRestoreSnapshot != nil || !strings.HasPrefix(r.Name, "bao-restore-") {
			t.Errorf("%v: created %s %+v", tc.args, r.Name, r.Spec)
		}
		if !strings.Contains(out, "kubectl get openbaorestore -n prod "+r.Name+" -w") {
			t.Errorf("%v: output does not say how to follow %s: %q", tc.args, r.Name, out)
		}
	}
}

// TestRestoreAsksOnATerminal: on a terminal the answer decides; anything
// but y or yes creates nothing.
func TestRestoreAsksOnATerminal(t *testing.T) {
	for answer, created := range map[string]int{"y\n": 1, "YES\n": 1, "\n": 0, "n\n": 0, "yep\n": 0, "": 0} {
		cl, _, prompt, err := runRestore(t, true, answer, "--latest", "--name", "undo")
		if n := len(restoresOf(t, cl)); n != created || (created == 1) != (err == nil) {
			t.Errorf("answer %q: %d created, error %v; want %d", answer, n, err, created)
		}
		if !strings.Contains(prompt, "[y/N]") {
			t.Errorf("answer %q: no y/N question in %q", answer, prompt)
		}
	}
}

// TestRestoreConfirmationNamesWhatIsLost: the question names the cluster,
// the snapshot (a backup's key, time and size; for --latest that the
// operator chooses it when it runs) and that later writes are lost.
func TestRestoreConfirmationNamesWhatIsLost(t *testing.T) {
	_, _, prompt, err := runRestore(t, false, "", "--backup", "nightly-1")
	if !errors.Is(err, ErrNotConfirmed) {
		t.Fatal(err)
	}
	for _, want := range []string{"prod/bao", "prod/bao/20260301T020000Z-0a1b2c3d.snap", "2026-03-01T02:00:04Z",
		"4096 bytes (4.0 KiB)", "sha256 " + testSHA, "since that snapshot is LOST"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("--backup confirmation lacks %q:\n%s", want, prompt)
		}
	}
	_, _, prompt, _ = runRestore(t, false, "", "--latest", "--force")
	for _, want := range []string{"prod/bao", "chosen by the operator when the restore runs", "since that snapshot is LOST", "SKIPPED"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("--latest --force confirmation lacks %q:\n%s", want, prompt)
		}
	}
}

// TestRestoreRefusesWhatItCannotRestore: another cluster's backup, an
// unknown one, both sources or none are refused before anything is
// created; --force alone sets spec.force.
func TestRestoreRefusesWhatItCannotRestore(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backup", "other-1", "--yes"}, "is a backup of cluster other, not of bao"},
		{[]string{"--backup", "gone", "--yes"}, "no such OpenBaoBackup"},
		{[]string{"--latest", "--backup", "nightly-1", "--yes"}, "none of the others can be"},
		{[]string{"--yes"}, "at least one of the flags in the group [latest backup] is required"},
	} {
		cl, _, _, err := runRestore(t, false, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || len(restoresOf(t, cl)) != 0 {
			t.Errorf("%v: got %v, want %q and nothing created", tc.args, err, tc.want)
		}
	}
	cl, _, _, err := runRestore(t, false, "", "--latest", "--yes", "--force")
	if got := restoresOf(t, cl); err != nil || len(got) != 1 || !got[0].Spec.Force {
		t.Errorf("--force: %v, %+v", err, got)
	}
}

// FuzzPlanRestore: whatever is asked, a plan restores this cluster, from
// exactly one of key and latest (never bootstrap), sets force only when
// asked, and its confirmation names the cluster and the loss.
func FuzzPlanRestore(f *testing.F) {
	f.Add(true, "", false, "", "Succeeded", "k", "bao")
	f.Add(false, "nightly-1", true, "r", "Failed", "", "bao")
	f.Add(false, "x", false, "", "Succeeded", "prod/bao/a.snap", "other")
	f.Fuzz(func(t *testing.T, latest bool, backupName string, force bool, name, phase, key, owner string) {
		cluster, _, _ := restoreFixtures()
		b := &v1alpha1.OpenBaoBackup{Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: owner},
			Status: v1alpha1.OpenBaoBackupStatus{Phase: v1alpha1.BackupPhase(phase), Key: key}}
		plan, err := PlanRestore(cluster, b, RestoreRequest{Latest: latest, Backup: backupName, Force: force, Name: name})
		if err != nil {
			return
		}
		r := plan.Restore
		src := r.Spec.Source
		if r.Spec.ClusterName != "bao" || r.Namespace != "prod" || src.Bootstrap || (src.Key != "") == src.Latest ||
			r.Spec.Force != force || src.Latest != latest || (!latest && (owner != "bao" || src.Key != key)) {
			t.Fatalf("plan %+v for latest=%v backup=%q owner=%q key=%q force=%v", r.Spec, latest, backupName, owner, key, force)
		}
		if !strings.Contains(plan.Confirmation, "prod/bao") || !strings.Contains(plan.Confirmation, "LOST") ||
			(!latest && !strings.Contains(plan.Confirmation, key)) {
			t.Fatalf("confirmation %q", plan.Confirmation)
		}
	})
}

// FuzzConfirm: a destructive command goes ahead only with --yes, or on a
// terminal whose first line is y or yes; never off a terminal without
// --yes, whatever stdin holds.
func FuzzConfirm(f *testing.F) {
	f.Add(false, true, "y\n")
	f.Add(false, false, "yes\n")
	f.Add(false, true, " Yes \nno\n")
	f.Add(false, true, "\ny\n")
	f.Fuzz(func(t *testing.T, yes, terminal bool, stdin string) {
		err := Confirm(yes, terminal, strings.NewReader(stdin), io.Discard)
		first, _, _ := strings.Cut(stdin, "\n")
		answer := strings.ToLower(strings.TrimSpace(first))
		allowed := yes || (terminal && (answer == "y" || answer == "yes"))
		if (err == nil) != allowed {
			t.Fatalf("Confirm(yes=%v, terminal=%v, %q) = %v", yes, terminal, stdin, err)
		}
		if err != nil && !errors.Is(err, ErrNotConfirmed) {
			t.Fatalf("refusal %v is not ErrNotConfirmed", err)
		}
	})
}
