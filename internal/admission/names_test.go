package admission

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
)

func named(name string) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) { c.Name = name }
}

func TestClusterNamesThatWouldShareAChildsName(t *testing.T) {
	cases := map[string]struct {
		old, new *v1alpha1.OpenBaoCluster
		refused  string // a part of the message; empty: accepted
	}{
		"a plain name is accepted":                         {new: cluster()},
		"a name with a dash and a digit is accepted":       {new: cluster(named("bao-2"))},
		"a name that only contains a suffix is accepted":   {new: cluster(named("internal-bao"))},
		"the drill copy's name is accepted":                {new: cluster(named(cluster().DrillCopyName()))},
		"bao-internal, bao's headless Service, is refused": {new: cluster(named("bao-internal")), refused: "ends in -internal, which the operator gives a child of cluster bao"},
		"a name ending in a ServiceAccount suffix is refused": {
			new: cluster(named("bao-backup-serviceaccount")), refused: "ends in -backup-serviceaccount"},
		"a name ending in a Secret suffix is refused": {new: cluster(named("prod-root-token")), refused: "ends in -root-token"},
		"an existing cluster of a reserved name may still be updated": {
			old: cluster(named("bao-config")), new: cluster(named("bao-config"), func(c *v1alpha1.OpenBaoCluster) { c.Labels = map[string]string{"x": "y"} })},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := ValidateCluster(tc.old, tc.new)
			if tc.refused == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != "metadata.name" || !strings.Contains(errs[0].Detail, tc.refused) {
				t.Fatalf("errors %v, want metadata.name refused with %q", errs, tc.refused)
			}
			for _, s := range v1alpha1.ChildNameSuffixes() {
				if !strings.Contains(errs[0].Detail, s) {
					t.Errorf("the message does not list the reserved suffix %s", s)
				}
			}
		})
	}
}

// childNames are the names of the objects the operator makes for a
// cluster in its namespace: kind by kind, but for the pods all kinds in
// one list, which is stricter.
func childNames(name string) (objects, pods []string) {
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"}}
	return []string{
		c.StatefulSetName(), c.ClientServiceName(), c.HeadlessServiceName(), c.ConfigMapName(), c.ServiceAccountName(),
		c.UpgradeServiceAccountName(), c.BackupServiceAccountName(), c.ServiceRegistrationRoleName(),
		c.TLSCASecretName(), c.TLSServerSecretName(), c.UnsealKeySecretName(), c.SelfInitSecretName(), c.RootTokenSecretName(),
	}, c.PodNames()
}

// FuzzClusterNames holds the invariant: two clusters whose names admission
// accepts never share the name of a child of the same kind; and the pods
// each cluster's servers may label (their Role's resourceNames) are never
// another cluster's, whatever the names.
func FuzzClusterNames(f *testing.F) {
	f.Add("bao", "bao-internal")
	f.Add("bao", "bao-1")
	f.Add("a-b", "a")
	f.Add("x-config", "x")
	f.Fuzz(func(t *testing.T, a, b string) {
		if a == b {
			return
		}
		objectsA, podsA := childNames(a)
		objectsB, podsB := childNames(b)
		if shared := slices.IndexFunc(podsA, func(n string) bool { return slices.Contains(podsB, n) }); shared >= 0 {
			t.Fatalf("clusters %q and %q both have a pod %q", a, b, podsA[shared])
		}
		if validateName(nil, cluster(named(a))) != nil || validateName(nil, cluster(named(b))) != nil {
			return
		}
		if shared := slices.IndexFunc(objectsA, func(n string) bool { return slices.Contains(objectsB, n) }); shared >= 0 {
			t.Fatalf("clusters %q and %q both name a child %q", a, b, objectsA[shared])
		}
	})
}
