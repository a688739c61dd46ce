package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
)

// deletionCase is one deletion policy carried out on the node: the policy
// the cluster is created with ("" leaves the default), the one it holds
// when it is deleted, and what must be gone afterwards.
type deletionCase struct {
	name, created, atDeletion   string
	volumeGoes, caGoes, keyGoes bool
	// comesBack creates the cluster again under the same name, which must
	// adopt what was retained.
	comesBack bool
}

// TestDeletionPolicyOnTheNode deletes a one-server cluster under each
// policy, and under a policy switched just before deletion, and checks on
// the node what outlived it: the volume claim and its volume, the CA, the
// seal key and the root token. While the finalizer runs, no claim may be
// deleted before every server pod is gone, and the seal key and root token
// never go before the claims. A retained cluster comes back under a new
// resource of the same name on its volume and key, adopted: the old root
// token still works and the data written before is there.
func TestDeletionPolicyOnTheNode(t *testing.T) {
	installOperator(t)
	t.Parallel()
	for _, tc := range []deletionCase{
		{name: "Retain", atDeletion: "Retain", comesBack: true},
		{name: "DeletePVCs", created: "DeletePVCs", atDeletion: "DeletePVCs", volumeGoes: true, caGoes: true},
		{name: "DeleteAll", created: "DeleteAll", atDeletion: "DeleteAll", volumeGoes: true, caGoes: true, keyGoes: true},
		{name: "DeleteAll switched to Retain", created: "DeleteAll", atDeletion: "Retain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runDeletionCase(t, tc)
		})
	}
}

func runDeletionCase(t *testing.T, tc deletionCase) {
	ctx := context.Background()
	cl := backupClient(t)
	start := time.Now()
	ns := createNamespace(ctx, t, cl, "e2e-del-"+strings.ToLower(strings.ReplaceAll(tc.name, " ", "-")))
	createDeletionCluster(ctx, t, cl, ns, tc.created)
	before := readClusterData(ctx, t, cl, ns)
	if tc.comesBack {
		bao := newBaoAPI(ctx, t, cl, ns, before.token)
		bao.call(t, http.MethodPost, "sys/mounts/kv", map[string]any{"type": "kv"})
		bao.call(t, http.MethodPost, "kv/kept", map[string]any{"value": "written before the deletion"})
	}
	if tc.atDeletion != tc.created {
		patchDeletionPolicy(ctx, t, cl, ns, tc.atDeletion)
	}
	deleteStart := time.Now()
	deleteClusterInOrder(ctx, t, cl, ns)
	logf("%s: cluster gone %s after its deletion", tc.name, time.Since(deleteStart).Round(100*time.Millisecond))

	checkOutlived(ctx, t, cl, ns, before, tc)
	checkFinalizerAudit(ctx, t, cl, ns, tc)
	if tc.comesBack {
		comeBackAdopted(ctx, t, cl, ns, before)
	}
	assertNoLeaks(ctx, t, cl, ns, map[string]string{
		"the root token": before.token, "the static seal key": string(before.key)})
	logf("%s: case took %s", tc.name, time.Since(start).Round(100*time.Millisecond))
}

// createDeletionCluster creates a one-server cluster with the given
// deletion policy and waits until it runs.
func createDeletionCluster(ctx context.Context, t *testing.T, cl client.Client, ns, policy string) {
	t.Helper()
	obj := clusterObject(t, ns, "bao", nil)
	spec := obj.Object["spec"].(map[string]any)
	spec["replicas"] = int64(1)
	if policy != "" {
		spec["deletionPolicy"] = policy
	}
	if err := cl.Create(ctx, obj); err != nil {
		t.Fatalf("create OpenBaoCluster: %v", err)
	}
	waitFor(ctx, t, 3*time.Minute, "phase Running with 1 ready server", func() (bool, string) {
		st := clusterStatus(ctx, t, cl, ns, "bao")
		return st["phase"] == "Running" && fmt.Sprint(st["readyReplicas"]) == "1", fmt.Sprint(st)
	})
}

// clusterData is what a deletion policy keeps or deletes, as it was
// before the deletion.
type clusterData struct {
	token      string
	key, caPEM []byte
	secretUIDs map[string]types.UID
	claimUID   types.UID
	volume     string
}

func readClusterData(ctx context.Context, t *testing.T, cl client.Client, ns string) clusterData {
	t.Helper()
	d := clusterData{secretUIDs: map[string]types.UID{}}
	for _, name := range dataSecrets {
		s := &corev1.Secret{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			t.Fatalf("Secret %s of a running cluster: %v", name, err)
		}
		d.secretUIDs[name] = s.UID
	}
	d.token = string(secretData(ctx, t, cl, ns, "bao-root-token", "token"))
	d.key = secretData(ctx, t, cl, ns, "bao-unseal-key", "key")
	d.caPEM = secretData(ctx, t, cl, ns, "bao-tls-ca", "ca.crt")
	if d.token == "" || len(d.key) == 0 || len(d.caPEM) == 0 {
		t.Fatal("the root token, the seal key or the CA is empty")
	}
	claim := &corev1.PersistentVolumeClaim{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-bao-0"}, claim); err != nil {
		t.Fatal(err)
	}
	if claim.Status.Phase != corev1.ClaimBound || claim.Spec.VolumeName == "" {
		t.Fatalf("claim data-bao-0 is %s, want Bound", claim.Status.Phase)
	}
	d.claimUID, d.volume = claim.UID, claim.Spec.VolumeName
	return d
}

// dataSecrets are the Secrets that go with the data, by the policy.
var dataSecrets = []string{"bao-unseal-key", "bao-root-token", "bao-tls-ca"}

func patchDeletionPolicy(ctx context.Context, t testing.TB, cl client.Client, ns, policy string) {
	t.Helper()
	c := &v1alpha1.OpenBaoCluster{}
	c.Name, c.Namespace = "bao", ns
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"deletionPolicy":%q}}`, policy))
	if err := cl.Patch(ctx, c, patch); err != nil {
		t.Fatalf("switch deletionPolicy to %s: %v", policy, err)
	}
}

// deleteClusterInOrder deletes the cluster and watches the finalizer
// carry out its policy until the cluster is gone. Each look reads the
// Secrets, then the claims, then the pods: a claim seen deleted before a
// pod seen still there was deleted while that server ran, and a seal key
// or root token seen gone before a claim seen intact went first.
func deleteClusterInOrder(ctx context.Context, t *testing.T, cl client.Client, ns string) {
	t.Helper()
	kept := keepLogsOf(ctx, t, &serverPods(ctx, t, cl, ns, 1)[0])
	c := &v1alpha1.OpenBaoCluster{}
	c.Name, c.Namespace = "bao", ns
	if err := cl.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	waitEvery(ctx, t, 100*time.Millisecond, 2*time.Minute, "the finalizer to let the cluster go", func() (bool, string) {
		if problem := deletionOrderProblem(ctx, t, cl, ns); problem != "" {
			t.Fatal(problem)
		}
		err := cl.Get(ctx, client.ObjectKeyFromObject(c), c)
		return apierrors.IsNotFound(err), fmt.Sprintf("finalizers %v (%v)", c.Finalizers, err)
	})
	if problem := deletionOrderProblem(ctx, t, cl, ns); problem != "" {
		t.Fatal(problem)
	}
	if n := len(serverPodsLeft(ctx, t, cl, ns)); n > 0 {
		t.Fatalf("the cluster is gone and %d server pods are left", n)
	}
	kept() // the server's log, for the leak scan, up to its last line
}

// deletionOrderProblem says what one look at ns shows done out of order.
func deletionOrderProblem(ctx context.Context, t *testing.T, cl client.Client, ns string) string {
	t.Helper()
	var goneSecrets []string
	for _, name := range []string{"bao-unseal-key", "bao-root-token"} {
		err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			goneSecrets = append(goneSecrets, name)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := cl.List(ctx, claims, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var deleted, intact []string
	for _, c := range claims.Items {
		if c.DeletionTimestamp != nil {
			deleted = append(deleted, c.Name)
		} else {
			intact = append(intact, c.Name)
		}
	}
	pods := serverPodsLeft(ctx, t, cl, ns)
	switch {
	case len(goneSecrets) > 0 && len(intact) > 0:
		return fmt.Sprintf("Secrets %v were deleted while claims %v were intact", goneSecrets, intact)
	case len(goneSecrets) > 0 && len(pods) > 0:
		return fmt.Sprintf("Secrets %v were deleted while server pods %v were there", goneSecrets, pods)
	case len(deleted) > 0 && len(pods) > 0:
		return fmt.Sprintf("claims %v were deleted while server pods %v were there", deleted, pods)
	}
	return ""
}

func serverPodsLeft(ctx context.Context, t *testing.T, cl client.Client, ns string) []string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{
		v1alpha1.LabelAppName: v1alpha1.AppName, v1alpha1.LabelAppInstance: "bao"}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	return names
}

// checkOutlived checks what is left once the cluster is gone: the claim
// and its volume, and each Secret that goes with the data, unchanged when
// kept (same object, same content).
func checkOutlived(ctx context.Context, t *testing.T, cl client.Client, ns string, before clusterData, tc deletionCase) {
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{}
	err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-bao-0"}, claim)
	switch {
	case tc.volumeGoes && !apierrors.IsNotFound(err):
		// The claim has no finalizer left once its pod is gone: it goes at once.
		t.Errorf("claim data-bao-0 outlived the cluster under %s (%v)", tc.atDeletion, err)
	case tc.volumeGoes:
		waitFor(ctx, t, time.Minute, "volume "+before.volume+" to be deleted with its claim", func() (bool, string) {
			err := cl.Get(ctx, client.ObjectKey{Name: before.volume}, &corev1.PersistentVolume{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	case err != nil || claim.UID != before.claimUID || claim.DeletionTimestamp != nil:
		t.Errorf("claim data-bao-0 did not outlive the cluster under %s (%v)", tc.atDeletion, err)
	default:
		pv := &corev1.PersistentVolume{}
		if err := cl.Get(ctx, client.ObjectKey{Name: before.volume}, pv); err != nil || pv.Status.Phase != corev1.VolumeBound {
			t.Errorf("volume %s of the kept claim: %s (%v), want Bound", before.volume, pv.Status.Phase, err)
		}
	}
	goes := map[string]bool{"bao-unseal-key": tc.keyGoes, "bao-root-token": tc.keyGoes, "bao-tls-ca": tc.caGoes}
	for _, name := range dataSecrets {
		s := &corev1.Secret{}
		err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)
		switch {
		case goes[name] && !apierrors.IsNotFound(err):
			t.Errorf("Secret %s outlived the cluster under %s (%v)", name, tc.atDeletion, err)
		case !goes[name] && (err != nil || s.UID != before.secretUIDs[name] || s.DeletionTimestamp != nil):
			t.Errorf("Secret %s did not outlive the cluster under %s (%v)", name, tc.atDeletion, err)
		case !goes[name] && len(s.OwnerReferences) > 0:
			t.Errorf("the kept Secret %s still has owners %v", name, s.OwnerReferences)
		}
	}
}

// comeBackAdopted creates the cluster again under the same name: it must
// run on the kept volume and key, adopted and never initialized again, so
// that the old root token reads what was written before.
func comeBackAdopted(ctx context.Context, t *testing.T, cl client.Client, ns string, before clusterData) {
	t.Helper()
	start := time.Now()
	createDeletionCluster(ctx, t, cl, ns, "")
	logf("retained cluster Running again %s after its new resource was created", time.Since(start).Round(100*time.Millisecond))
	c := &v1alpha1.OpenBaoCluster{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bao"}, c); err != nil {
		t.Fatal(err)
	}
	if c.Status.InitializationStarted != nil {
		t.Errorf("the operator called sys/init for the retained cluster at %s", c.Status.InitializationStarted)
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionOpenBaoInitialized)
	if cond == nil || cond.Status != "True" || cond.Reason != "Initialized" {
		t.Errorf("condition OpenBaoInitialized %+v, want True, Initialized from the kept root token", cond)
	}
	after := readClusterData(ctx, t, cl, ns)
	if after.claimUID != before.claimUID || after.volume != before.volume {
		t.Errorf("the new cluster runs on claim %s (volume %s), want the kept %s (%s)", after.claimUID, after.volume, before.claimUID, before.volume)
	}
	for _, name := range dataSecrets {
		if after.secretUIDs[name] != before.secretUIDs[name] {
			t.Errorf("Secret %s was replaced", name)
		}
	}
	if after.token != before.token || string(after.key) != string(before.key) || string(after.caPEM) != string(before.caPEM) {
		t.Error("the root token, the seal key or the CA changed")
	}
	bao := newBaoAPI(ctx, t, cl, ns, before.token)
	waitFor(ctx, t, 30*time.Second, "kv/kept read with the old root token", func() (bool, string) {
		body, code := bao.read(t, "kv/kept")
		return code == http.StatusOK && strings.Contains(body, "written before the deletion"), fmt.Sprintf("HTTP %d", code)
	})
}

// checkFinalizerAudit reads the finalizer's audit lines for ns in the
// operator's log, in the order it wrote them, each after its deletion
// succeeded: the volumes before the seal key and the root token (a look at
// the node cannot order deletions milliseconds apart), and last the policy
// it carried out, which must be the one in force at deletion.
func checkFinalizerAudit(ctx context.Context, t *testing.T, cl client.Client, ns string, tc deletionCase) {
	t.Helper()
	var lines []map[string]any
	scan := bufio.NewScanner(strings.NewReader(operatorLogs(ctx, t, cl)))
	scan.Buffer(nil, 1<<20)
	for scan.Scan() {
		line := map[string]any{}
		if json.Unmarshal(scan.Bytes(), &line) == nil && line["audit"] == true && line["namespace"] == ns {
			lines = append(lines, line)
		}
	}
	var got []string
	for _, l := range lines {
		var what string
		switch l["event_type"] {
		case "openbao.cluster.volume_deleted":
			what = "volume " + fmt.Sprint(l["claim"])
		case "openbao.cluster.secret_deleted":
			what = "Secret " + fmt.Sprint(l["secret"])
		case "openbao.cluster.deleted":
			what = "carried out " + fmt.Sprint(l["deletionPolicy"])
		}
		// A pass that failed half-way is retried and says some again.
		if what != "" && !slices.Contains(got, what) {
			got = append(got, what)
		}
	}
	want := []string{}
	if tc.volumeGoes {
		want = append(want, "volume data-bao-0")
	}
	if tc.caGoes {
		want = append(want, "Secret bao-tls-ca")
	}
	if tc.keyGoes {
		want = append(want, "Secret bao-unseal-key", "Secret bao-root-token")
	}
	want = append(want, "carried out "+tc.atDeletion)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the finalizer's audit lines for %s say %q, want %q", ns, got, want)
	}
}
