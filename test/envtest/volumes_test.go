package envtest_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
)

// TestStorageGrowsByPatchingTheClaimsAndNeverShrinks (issue 29): a
// larger spec.storage.size is admitted when the class allows expansion,
// and the operator patches the request of each server's claim, not of a
// claim whose name its StatefulSet does not give nor of one without the
// cluster's labels, and leaves the StatefulSet's template (immutable) as
// it was. A claim whose file system waits for a restart is reported. A
// smaller size, or a larger one where the class does not allow
// expansion, is refused at admission naming spec.storage.size and why.
// No volume plugin runs here: the test writes the claims' status.
func TestStorageGrowsByPatchingTheClaimsAndNeverShrinks(t *testing.T) {
	ctx := context.Background()
	admin, _ := startWebhookServerWith(t, controllers.Platform{Fields: platformFields})
	for name, expands := range map[string]bool{"grows": true, "fixed": false} {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "example.com/none", AllowVolumeExpansion: ptr.To(expands)}
		if err := admin.Create(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	ns := "volumes"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, ns, "metadata: {name: bao}\nspec: {version: 2.4.0, storage: {size: 1Gi, storageClassName: grows}}")
	if err := admin.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	r, err := newReconciler(admin, admin, events.NewFakeRecorder(100))
	if err != nil {
		t.Fatal(err)
	}
	reconcile := reconcileFunc(t, ctx, r, c)
	for range 3 {
		reconcile()
	}
	sts := c.StatefulSetName()
	claims := map[string]map[string]string{ // name: labels
		"data-" + sts + "-0":  c.PodSelectorLabels(),
		"data-" + sts + "-1":  c.PodSelectorLabels(),
		"data-" + sts + "-01": c.PodSelectorLabels(), // not a name the StatefulSet gives
		"data-" + sts + "-2":  {"app": "other"},      // not the cluster's labels
	}
	for name, labels := range claims {
		createBoundClaim(t, admin, ns, name, labels, "grows", "1Gi")
	}

	setSize(t, admin, c, "2Gi", "")
	reconcile()
	for name := range claims {
		want := "1Gi"
		if strings.HasSuffix(name, "-0") || strings.HasSuffix(name, "-1") && !strings.HasSuffix(name, "-01") {
			want = "2Gi"
		}
		if got := claimRequest(t, admin, ns, name); got != want {
			t.Errorf("claim %s requests %s, want %s", name, got, want)
		}
	}
	if got := templateRequest(t, admin, c); got != "1Gi" {
		t.Errorf("the StatefulSet's claim template asks for %s, want the 1Gi it was created with", got)
	}
	expectVolumesGrown(t, admin, c, metav1.ConditionFalse, v1alpha1.ReasonVolumesGrowing, "")

	setClaimStatus(t, admin, ns, "data-"+sts+"-0", "2Gi", true)
	setClaimStatus(t, admin, ns, "data-"+sts+"-1", "2Gi", false)
	reconcile()
	expectVolumesGrown(t, admin, c, metav1.ConditionFalse, v1alpha1.ReasonFileSystemResizePending, "data-"+sts+"-0")
	setClaimStatus(t, admin, ns, "data-"+sts+"-0", "2Gi", false)
	reconcile()
	expectVolumesGrown(t, admin, c, metav1.ConditionTrue, v1alpha1.ReasonVolumesGrown, "2Gi")

	setSize(t, admin, c, "1Gi", "storage.size may not decrease (from 2Gi to 1Gi)")
	fixed := newCluster(t, ns, "metadata: {name: fixed}\nspec: {version: 2.4.0, storage: {size: 1Gi, storageClassName: fixed}}")
	if err := admin.Create(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	setSize(t, admin, fixed, "2Gi", `"fixed" has no allowVolumeExpansion: true`)
}

func createBoundClaim(t *testing.T, c client.Client, ns, name string, labels map[string]string, class, size string) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To(class),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	if err := c.Create(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
	setClaimStatus(t, c, ns, name, size, false)
}

// setClaimStatus writes what a volume plugin would: bound, the capacity,
// and FileSystemResizePending.
func setClaimStatus(t *testing.T, c client.Client, ns, name, capacity string, pending bool) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
	pvc.Status.Conditions = nil
	if pending {
		pvc.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue}}
	}
	if err := c.Status().Update(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
}

// setSize updates spec.storage.size: admitted when refusal is empty, else
// refused by the webhook naming spec.storage.size and refusal.
func setSize(t *testing.T, c client.Client, cluster *v1alpha1.OpenBaoCluster, size, refusal string) {
	t.Helper()
	latest := &v1alpha1.OpenBaoCluster{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(cluster), latest); err != nil {
		t.Fatal(err)
	}
	latest.Spec.Storage.Size = resource.MustParse(size)
	err := c.Update(context.Background(), latest)
	if refusal == "" {
		if err != nil {
			t.Fatalf("storage.size %s refused: %v", size, err)
		}
		return
	}
	expectRefused(t, err, "spec.storage.size", refusal)
}

func claimRequest(t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pvc); err != nil {
		t.Fatal(err)
	}
	q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	return q.String()
}

func templateRequest(t *testing.T, c client.Client, cluster *v1alpha1.OpenBaoCluster) string {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.StatefulSetName()}, sts); err != nil {
		t.Fatal(err)
	}
	q := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]
	return q.String()
}

func expectVolumesGrown(t *testing.T, c client.Client, cluster *v1alpha1.OpenBaoCluster, status metav1.ConditionStatus, reason, says string) {
	t.Helper()
	latest := &v1alpha1.OpenBaoCluster{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(cluster), latest); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(latest.Status.Conditions, v1alpha1.ConditionVolumesGrown)
	if cond == nil || cond.Status != status || cond.Reason != reason || !strings.Contains(cond.Message, says) {
		t.Fatalf("VolumesGrown %+v, want %s %s saying %q (Degraded: %+v)", cond, status, reason, says, findDegraded(latest))
	}
}

// TestWithoutTheWebhookTheControllerGrowsNothingTheRuleRefuses: a size
// stored with no webhook to ask (the operator runs without it) that the
// class does not let grow patches no claim, and VolumesGrown says why in
// the words of volumes.Refusal, the webhook's rule.
func TestWithoutTheWebhookTheControllerGrowsNothingTheRuleRefuses(t *testing.T) {
	ctx := context.Background()
	ns := "volumes-nowebhook"
	createNamespace(t, ns)
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "no-expansion"}, Provisioner: "example.com/none"}
	if err := k8s.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, ns, "metadata: {name: bao}\nspec: {version: 2.4.0, storage: {size: 1Gi, storageClassName: no-expansion}}")
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	r, err := newReconciler(k8s, k8s, events.NewFakeRecorder(100))
	if err != nil {
		t.Fatal(err)
	}
	reconcile := reconcileFunc(t, ctx, r, c)
	for range 3 {
		reconcile()
	}
	claim := "data-" + c.StatefulSetName() + "-0"
	createBoundClaim(t, k8s, ns, claim, c.PodSelectorLabels(), "no-expansion", "1Gi")
	latest := latestCluster(t, c)
	latest.Spec.Storage.Size = resource.MustParse("2Gi")
	if err := k8s.Update(ctx, latest); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if got := claimRequest(t, k8s, ns, claim); got != "1Gi" {
		t.Errorf("claim %s requests %s, want the 1Gi its class cannot grow", claim, got)
	}
	expectVolumesGrown(t, k8s, c, metav1.ConditionFalse, v1alpha1.ReasonVolumeGrowthRefused, `"no-expansion" has no allowVolumeExpansion: true`)
}

// TestTheReadReplicasClaimsGrowLikeTheVoters: with read replicas, a
// larger spec.storage.size grows the read replicas' claims by the same
// rule as the voters' (only names their own StatefulSet gives, with their
// labels), and leaves both StatefulSets' claim templates as created.
func TestTheReadReplicasClaimsGrowLikeTheVoters(t *testing.T) {
	ctx := context.Background()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "grows-read"}, Provisioner: "example.com/none", AllowVolumeExpansion: ptr.To(true)}
	if err := k8s.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	ns := "volumes-read"
	createNamespace(t, ns)
	c := newCluster(t, ns, "metadata: {name: bao}\nspec: {version: 2.4.0, readReplicas: {replicas: 1}, storage: {size: 1Gi, storageClassName: grows-read}}")
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Status = v1alpha1.OpenBaoClusterStatus{Initialized: true, IdentityConfigured: true, CurrentVersion: "2.4.0"}
	if err := k8s.Status().Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	r, err := newReconciler(k8s, k8s, events.NewFakeRecorder(100))
	if err != nil {
		t.Fatal(err)
	}
	reconcile := reconcileFunc(t, ctx, r, c)
	for range 3 {
		reconcile()
	}
	claims := map[string]map[string]string{ // name: labels
		"data-bao-0":       c.PodSelectorLabels(),
		"data-bao-read-0":  c.ReadPodSelectorLabels(),
		"data-bao-read-01": c.ReadPodSelectorLabels(), // not a name the read StatefulSet gives
		"data-bao-read-1":  {"app": "other"},          // not the cluster's labels
	}
	for name, labels := range claims {
		createBoundClaim(t, k8s, ns, name, labels, "grows-read", "1Gi")
	}
	setSize(t, k8s, c, "2Gi", "")
	reconcile()
	for name := range claims {
		want := "1Gi"
		if name == "data-bao-0" || name == "data-bao-read-0" {
			want = "2Gi"
		}
		if got := claimRequest(t, k8s, ns, name); got != want {
			t.Errorf("claim %s requests %s, want %s", name, got, want)
		}
	}
	read := &appsv1.StatefulSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.ReadStatefulSetName()}, read); err != nil {
		t.Fatal(err)
	}
	if q := read.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "1Gi" || templateRequest(t, k8s, c) != "1Gi" {
		t.Errorf("claim templates ask for %s (read) and %s (voters), want the 1Gi they were created with", q.String(), templateRequest(t, k8s, c))
	}
	setClaimStatus(t, k8s, ns, "data-bao-0", "2Gi", false)
	reconcile()
	expectVolumesGrown(t, k8s, c, metav1.ConditionFalse, v1alpha1.ReasonVolumesGrowing, "data-bao-read-0")
}
