package envtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/podstate"
)

const readyBackupSpec = `
tokenSecretRef: {name: backup-token}
target:
  endpoint: "https://s3.example.com"
  bucket: backups
  credentialsSecretRef: {name: store-credentials}
`

// printed is what `kubectl get` shows of one object: the API server's
// table, column name to cell.
func printed(t *testing.T, path string) map[string]string {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	table := metav1.Table{}
	if err := json.Unmarshal(body, &table); err != nil || len(table.Rows) != 1 {
		t.Fatalf("table of %s: %v: %s", path, err, body)
	}
	out := map[string]string{}
	for i, col := range table.ColumnDefinitions {
		out[col.Name] = fmt.Sprint(table.Rows[0].Cells[i])
	}
	return out
}

func readyOf(t *testing.T, conds []metav1.Condition) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(conds, v1alpha1.ConditionReady)
	if c == nil {
		t.Fatalf("no Ready condition in %+v", conds)
	}
	return *c
}

// TestAClusterIsReadyWhileItsServersServeAndNotOnceOneIsSealed: the rig's
// one-server cluster is Ready 1/1 for its generation; a sealed server
// takes Ready away; pausing does too, for the new generation.
func TestAClusterIsReadyWhileItsServersServeAndNotOnceOneIsSealed(t *testing.T) {
	rig := newBackupRig(t, "ready-cluster", readyBackupSpec, at("2025-03-01T08:00:00Z"))
	ctx := context.Background()
	c := rig.get()
	r := readyOf(t, c.Status.Conditions)
	if r.Status != metav1.ConditionTrue || r.Reason != v1alpha1.ReasonClusterReady || r.ObservedGeneration != c.Generation ||
		c.Status.ObservedGeneration != c.Generation || c.Status.ReadyText != "1/1" {
		t.Fatalf("a serving cluster: Ready %+v, readyText %q, observedGeneration %d of %d", r, c.Status.ReadyText,
			c.Status.ObservedGeneration, c.Generation)
	}
	cols := printed(t, "/apis/openbao.org/v1alpha1/namespaces/ready-cluster/openbaoclusters/bao")
	if cols["Ready"] != "1/1" || cols["Phase"] != string(v1alpha1.PhaseRunning) || cols["Leader"] != "bao-0" {
		t.Errorf("kubectl get shows %v", cols)
	}

	pod := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: rig.ns, Name: "bao-0"}, pod); err != nil {
		t.Fatal(err)
	}
	pod.Labels[podstate.LabelSealed] = "true"
	if err := k8s.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	rig.reconcile()
	if r := readyOf(t, rig.get().Status.Conditions); r.Status != metav1.ConditionFalse || r.Reason != v1alpha1.ReasonServersSealed {
		t.Fatalf("a cluster with a sealed server: Ready %+v", r)
	}

	c = rig.get()
	c.Spec.Paused = true
	if err := k8s.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	rig.reconcile()
	c = rig.get()
	if r := readyOf(t, c.Status.Conditions); r.Status != metav1.ConditionFalse || r.Reason != v1alpha1.ReasonPausedBySpec ||
		r.ObservedGeneration != c.Generation {
		t.Fatalf("a paused cluster at generation %d: Ready %+v", c.Generation, r)
	}
}

// TestABackupIsReadyOnceStoredAndStalledOnceFailed: Ready False while the
// Job runs, True with SnapshotStored and a human size once it succeeded;
// a failed one is not Ready and Stalled with the executor's reason.
func TestABackupIsReadyOnceStoredAndStalledOnceFailed(t *testing.T) {
	rig := newBackupRig(t, "ready-backup", readyBackupSpec, at("2025-03-01T08:00:00Z"))
	ctx := context.Background()
	run := func(name string) *batchv1.Job {
		createBackup(t, rig.ns, name)
		rig.reconcileBackup(name)
		b := rig.backup(name)
		if r := readyOf(t, b.Status.Conditions); r.Status != metav1.ConditionFalse || b.Status.Phase != v1alpha1.BackupRunning {
			t.Fatalf("a running backup: phase %s, Ready %+v", b.Status.Phase, r)
		}
		job := &batchv1.Job{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: rig.ns, Name: b.Status.JobName}, job); err != nil {
			t.Fatal(err)
		}
		return job
	}
	job := run("stored")
	rig.clock.Step(5 * time.Second)
	key := provenanceOf(t, rig.ns, "bao").SignedObjectKey(backup.ObjectPrefix("", rig.ns, "bao"), rig.clock.Now(), "abcdef01")
	rig.store.Add(key, []byte("snapshot"), rig.clock.Now())
	endJob(t, job, 0, backup.Report{Key: key, Size: 1288490189, SHA256: strings.Repeat("ab", 32), Duration: "4s", RaftIndex: 7})
	rig.reconcileBackup("stored")
	b := rig.backup("stored")
	if r := readyOf(t, b.Status.Conditions); r.Status != metav1.ConditionTrue || r.Reason != backup.ReasonSnapshotStored ||
		b.Status.SizeText != "1.2 GiB" || b.Status.ObservedGeneration != b.Generation ||
		meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionStalled) != nil {
		t.Fatalf("a stored backup: sizeText %q, conditions %+v", b.Status.SizeText, b.Status.Conditions)
	}
	if cols := printed(t, "/apis/openbao.org/v1alpha1/namespaces/ready-backup/openbaobackups/stored"); cols["Size"] != "1.2 GiB" {
		t.Errorf("kubectl get shows %v", cols)
	}

	job = run("failed")
	endJob(t, job, 1, backup.Report{Reason: "StoreFailed", Error: "object store stat: connection refused", Duration: "2s"})
	rig.reconcileBackup("failed")
	b = rig.backup("failed")
	stalled := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionStalled)
	if r := readyOf(t, b.Status.Conditions); r.Status != metav1.ConditionFalse || r.Reason != "StoreFailed" ||
		stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != "StoreFailed" {
		t.Fatalf("a failed backup: conditions %+v", b.Status.Conditions)
	}
}
