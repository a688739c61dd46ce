package envtest_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/go-logr/logr/funcr"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/openbao"
)

// TestAnIdentityOfAnEarlierReleaseIsBroughtUpToDate: a cluster initialized
// here gets the current identity revision at setup. Taken back to what an
// earlier release set up (no restore role, no canary mount, the old backup
// policy) with a status from before revisions (identityConfigured only),
// the next pass re-applies it with the stored root token and records
// the current revision with an Event. Without the token (as for a self-initialized
// cluster) the pass says what is missing and how to add it, once, and the
// user's annotation records it.
func TestAnIdentityOfAnEarlierReleaseIsBroughtUpToDate(t *testing.T) {
	requireBao(t)
	t.Parallel() // mostly waiting on bao: elections, sys/init
	ctx := context.Background()
	c := bootCluster(t, "identity-rev")
	rec := events.NewFakeRecorder(100)
	r, _ := realReconciler(t, rec)
	issuer, err := controllers.NewIssuerSource(cfg, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	r.Issuer = issuer
	reconcile := reconcileFunc(t, ctrl.LoggerInto(ctx, funcr.New(func(p, a string) { t.Log(a) }, funcr.Options{})), r, c)
	reconcile()
	bao := startPod0(t, c)
	// There is no DNS here: the client Service is pod-0.
	podFactory := r.OpenBao
	r.OpenBao = func(o openbao.Options) (openbao.Client, error) {
		if u, err := url.Parse(o.Address); err == nil && u.Hostname() == c.Name+"."+c.Namespace+".svc" {
			o.Address = bao.Addr
		}
		return podFactory(o)
	}
	reconcile() // sys/init, then the identity with the root token
	if s := latestCluster(t, c).Status; !s.IdentityConfigured || s.IdentityRevision != identity.Revision {
		t.Fatalf("after initialization: identityConfigured %v, revision %d; want revision %d", s.IdentityConfigured, s.IdentityRevision, identity.Revision)
	}
	token := readRootToken(t, c)
	root := bao.client(t, token)
	takeBackToRevision1(t, bao, token, c)
	assertIdentityRevision1(t, root)

	reconcile()
	s := latestCluster(t, c).Status
	if s.IdentityRevision != identity.Revision {
		t.Fatalf("revision %d after the pass, want %d", s.IdentityRevision, identity.Revision)
	}
	if role, err := root.Read(ctx, "auth/"+identity.Mount+"/role/"+identity.RestoreRole); err != nil ||
		role["bound_subject"] != identity.Subject(c.Namespace, c.RestoreServiceAccountName()) {
		t.Errorf("the restore role after the update: %v %v, want it bound to the restore account", role["bound_subject"], err)
	}
	if role, err := root.Read(ctx, identity.DrillRolePath); err != nil ||
		role["bound_subject"] != identity.Subject(c.Namespace, c.DrillServiceAccountName()) {
		t.Errorf("the drill role after the update: %v %v", role["bound_subject"], err)
	}
	if engines, err := root.SecretsEngines(ctx); err != nil || !engines[identity.CanaryMount].KVVersion1() {
		t.Errorf("the canary mount after the update: %v %v", engines, err)
	}
	assertEvents(t, rec, "IdentityUpdated")

	// No root token: what is missing is said, once; the annotation
	// records what the user added by hand.
	takeBackToRevision1(t, bao, token, c)
	deleteRootToken(t, c)
	reconcile()
	reconcile()
	cond := findCondition(latestCluster(t, c), v1alpha1.ConditionIdentityCurrent)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonIdentityOutdated ||
		!strings.Contains(cond.Message, "role restore") || !strings.Contains(cond.Message, "role drill") ||
		!strings.Contains(cond.Message, identity.CanaryMountCommand()) {
		t.Fatalf("IdentityCurrent %+v, want False IdentityOutdated naming the restore and drill roles and the command", cond)
	}
	if n := countEvents(rec, v1alpha1.ReasonIdentityOutdated); n != 1 {
		t.Errorf("%d IdentityOutdated events in two passes, want 1", n)
	}
	annotate(t, c, v1alpha1.AnnotationIdentityRevision, itoa(identity.Revision))
	reconcile()
	latest := latestCluster(t, c)
	cond = findCondition(latest, v1alpha1.ConditionIdentityCurrent)
	if latest.Status.IdentityRevision != identity.Revision || cond == nil || cond.Status != metav1.ConditionTrue {
		t.Fatalf("after the annotation: revision %d, IdentityCurrent %+v", latest.Status.IdentityRevision, cond)
	}
	if strings.Contains(cond.Message, token.Reveal()) {
		t.Fatal("the root token is in a condition")
	}
}

// takeBackToRevision1 undoes what revision 2 added, with the root token,
// and writes the status an earlier release wrote.
func takeBackToRevision1(t *testing.T, bao *podServer, token openbao.Token, c *v1alpha1.OpenBaoCluster) {
	t.Helper()
	ctx := context.Background()
	root := bao.client(t, token)
	oldPolicy := map[string]any{"policy": `path "sys/storage/raft/snapshot" { capabilities = ["read"] }`}
	if err := root.Write(ctx, "sys/policies/acl/"+identity.BackupPolicy, oldPolicy); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"auth/" + identity.Mount + "/role/" + identity.RestoreRole,
		"sys/policies/acl/" + identity.RestorePolicy,
		identity.DrillRolePath,
		"sys/policies/acl/" + identity.DrillPolicy,
		"sys/mounts/" + identity.CanaryMount,
	} {
		bao.delete(t, token, path)
	}
	latest := latestCluster(t, c)
	latest.Status.IdentityConfigured, latest.Status.IdentityRevision = true, 0
	if err := k8s.Status().Update(ctx, latest); err != nil {
		t.Fatal(err)
	}
}

func assertIdentityRevision1(t *testing.T, root openbao.Client) {
	t.Helper()
	if _, err := root.Read(context.Background(), "auth/"+identity.Mount+"/role/"+identity.RestoreRole); !errors.Is(err, openbao.ErrNotFound) {
		t.Fatalf("the restore role after taking it away: %v", err)
	}
}

// delete sends DELETE path with token. The server's
// own client skips verification: this is the test acting as an admin.
func (s *podServer) delete(t *testing.T, token openbao.Token, path string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodDelete, s.Addr+"/v1/"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Vault-Token", token.Reveal())
	resp, err := s.Client.Do(req)
	if err != nil {
		t.Fatalf("delete %s: %v", path, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		t.Fatalf("delete %s: HTTP %d", path, resp.StatusCode)
	}
}

func readRootToken(t *testing.T, c *v1alpha1.OpenBaoCluster) openbao.Token {
	t.Helper()
	return openbao.NewToken(string(secretData(t, c, c.RootTokenSecretName())[bootstrap.RootTokenDataKey]))
}

func deleteRootToken(t *testing.T, c *v1alpha1.OpenBaoCluster) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.RootTokenSecretName(), Namespace: c.Namespace}}
	if err := k8s.Delete(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

func annotate(t *testing.T, c *v1alpha1.OpenBaoCluster, key, value string) {
	t.Helper()
	latest := latestCluster(t, c)
	if latest.Annotations == nil {
		latest.Annotations = map[string]string{}
	}
	latest.Annotations[key] = value
	if err := k8s.Update(context.Background(), latest); err != nil {
		t.Fatal(err)
	}
}

func findCondition(c *v1alpha1.OpenBaoCluster, condType string) *metav1.Condition {
	return meta.FindStatusCondition(c.Status.Conditions, condType)
}

// countEvents drains the recorder and counts the events of one reason.
func countEvents(rec *events.FakeRecorder, reason string) int {
	n := 0
	for {
		select {
		case e := <-rec.Events:
			if strings.Contains(e, " "+reason+" ") {
				n++
			}
		default:
			return n
		}
	}
}
