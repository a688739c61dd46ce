package envtest_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
)

// TestTheControllerMayDeleteAnEndedStandbyRestore acts as the tenancy
// install's controller identity, with exactly the rights config/tenancy
// gives it: a standby deletes the restores it posted once they ended, with
// the UID it saw as a precondition. Without the right, every pass of a
// standby failed after its status write and the error backoff grew until
// the standby stopped following (the e2e's standby waited 3 min for a poll).
func TestTheControllerMayDeleteAnEndedStandbyRestore(t *testing.T) {
	installTenancy(t)
	ctx := context.Background()
	ensureNamespace(t, "standby-rbac")
	rs := &v1alpha1.OpenBaoRestore{ObjectMeta: metav1.ObjectMeta{Name: "dr-standby-0a1b2c3d", Namespace: "standby-rbac"},
		Spec: v1alpha1.OpenBaoRestoreSpec{ClusterName: "dr", Source: v1alpha1.RestoreSource{Standby: true, Key: "site-a/ns/bao/x.snap"}}}
	if err := k8s.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	_, controller := asServiceAccount(t, controllerUser)
	uid := types.UID(rs.UID)
	if err := controller.Delete(ctx, rs, client.Preconditions{UID: &uid}); err != nil {
		t.Fatalf("the controller's identity deletes an ended standby restore: %v", err)
	}
}
