package v1alpha1_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
)

func cluster(name string) *v1alpha1.OpenBaoCluster {
	return &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
}

func TestOperatorIdentityNames(t *testing.T) {
	c := cluster("bao")
	for got, want := range map[string]string{
		c.OperatorTokenAudience():     "openbao-operator:ns/bao",
		c.RoleTokenAudience("backup"): "openbao-operator:ns/bao:backup",
		c.DrillIdleAudience():         "openbao-operator:ns/bao:drill:idle",
		c.BackupServiceAccountName():  "bao-backup-serviceaccount",
		c.UpgradeServiceAccountName(): "bao-upgrade-serviceaccount",
		c.RestoreServiceAccountName(): "bao-restore-serviceaccount",
		c.DrillServiceAccountName():   "bao-drill-serviceaccount",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	drill := strings.TrimPrefix(c.DrillTokenAudience("p/ns/bao/k"), c.DrillAudiencePrefix())
	if len(drill) != 32 || strings.Trim(drill, "0123456789abcdef") != "" || c.DrillTokenAudience("p/ns/bao/j") == c.DrillTokenAudience("p/ns/bao/k") {
		t.Errorf("drill audience %q: want 32 hex digits, one per snapshot key", drill)
	}
}

// TestOnlyTheCopyADrillMadeLogsInAsTheSourcesDrillRole: DrillSource names
// the source of a copy as DrillCopyFor makes it, labelled, controlled and
// formed from the source's snapshot under its identity; nothing else.
func TestOnlyTheCopyADrillMadeLogsInAsTheSourcesDrillRole(t *testing.T) {
	src := cluster("bao")
	copyOf := func(edit func(*v1alpha1.OpenBaoCluster)) *v1alpha1.OpenBaoCluster {
		cp := cluster("bao-drill")
		cp.Labels = map[string]string{v1alpha1.LabelDrillOf: "bao"}
		cp.OwnerReferences = []metav1.OwnerReference{src.ControllerReference()}
		cp.Spec.Bootstrap = &v1alpha1.BootstrapSpec{FromBackup: &v1alpha1.BackupBootstrap{
			SourceCluster: "bao", Key: "p/ns/bao/k", KeepSourceIdentity: true}}
		edit(cp)
		return cp
	}
	for name, tc := range map[string]struct {
		cp   *v1alpha1.OpenBaoCluster
		want string
	}{
		"the drill's copy":             {copyOf(func(*v1alpha1.OpenBaoCluster) {}), "bao"},
		"no label":                     {copyOf(func(c *v1alpha1.OpenBaoCluster) { c.Labels = nil }), ""},
		"not controlled by the source": {copyOf(func(c *v1alpha1.OpenBaoCluster) { c.OwnerReferences = nil }), ""},
		"its own identity":             {copyOf(func(c *v1alpha1.OpenBaoCluster) { c.Spec.Bootstrap.FromBackup.KeepSourceIdentity = false }), ""},
		"another source":               {copyOf(func(c *v1alpha1.OpenBaoCluster) { c.Spec.Bootstrap.FromBackup.SourceCluster = "other" }), ""},
		"no snapshot key":              {copyOf(func(c *v1alpha1.OpenBaoCluster) { c.Spec.Bootstrap.FromBackup.Key = "" }), ""},
		"not from a backup":            {copyOf(func(c *v1alpha1.OpenBaoCluster) { c.Spec.Bootstrap = nil }), ""},
	} {
		if got := tc.cp.DrillSource(); got != tc.want {
			t.Errorf("%s: DrillSource %q, want %q", name, got, tc.want)
		}
	}
}

func TestBackupNamesStayValidLabelsForLongClusterNames(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	if got := cluster("bao").BackupJobName(at); got != "backup-bao-20250304-050607" {
		t.Errorf("BackupJobName = %q", got)
	}
	if got := cluster("bao").ScheduledBackupName(at.In(time.FixedZone("x", 3600))); got != "bao-20250304-050607" {
		t.Errorf("ScheduledBackupName = %q, want the slot in UTC", got)
	}
	long := strings.Repeat("a", 38) + "-b" // 40 characters: the longest cluster name
	longer := long + "x"                   // should the limit ever grow
	names := map[string]bool{}
	for _, c := range []*v1alpha1.OpenBaoCluster{cluster(long), cluster(longer), cluster(longer + "y")} {
		for _, name := range []string{c.BackupJobName(at), c.ScheduledBackupName(at), c.BackupJobName(at.Add(time.Second))} {
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				t.Errorf("%q: %v", name, errs)
			}
			if names[name] {
				t.Errorf("%q given twice", name)
			}
			names[name] = true
		}
	}
}

// TestMaxReplicasIsTheCRDsMaximum keeps MaxReplicas, which bounds the pods
// the servers' Role names, equal to the maximum of spec.replicas.
func TestMaxReplicasIsTheCRDsMaximum(t *testing.T) {
	data, err := os.ReadFile("../../config/crd/bases/openbao.org_openbaoclusters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	replicas := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["replicas"]
	if replicas.Maximum == nil || int(*replicas.Maximum) != v1alpha1.MaxReplicas {
		t.Fatalf("spec.replicas maximum %v, MaxReplicas %d", replicas.Maximum, v1alpha1.MaxReplicas)
	}
	names := cluster("bao").PodNames()
	if len(names) != v1alpha1.MaxReplicas || names[0] != "bao-0" || names[len(names)-1] != "bao-10" {
		t.Fatalf("PodNames = %v", names)
	}
}

// TestChildNamesAreTheClusterNameAndASuffix keeps ChildNameSuffixes whole
// (admission refuses a cluster name ending in one) and free of a suffix
// that ends in another, which would let two reserved-free names collide.
func TestChildNamesAreTheClusterNameAndASuffix(t *testing.T) {
	c := cluster("bao")
	suffixes := v1alpha1.ChildNameSuffixes()
	for _, name := range []string{
		c.StatefulSetName(), c.ClientServiceName(), c.HeadlessServiceName(), c.ConfigMapName(), c.ServiceAccountName(),
		c.UpgradeServiceAccountName(), c.BackupServiceAccountName(), c.ServiceRegistrationRoleName(),
		c.TLSCASecretName(), c.TLSServerSecretName(), c.UnsealKeySecretName(), c.SelfInitSecretName(), c.RootTokenSecretName(),
	} {
		if name != "bao" && !slices.Contains(suffixes, strings.TrimPrefix(name, "bao")) {
			t.Errorf("child %q is not the cluster's name and one of %v", name, suffixes)
		}
	}
	for _, s := range suffixes {
		for _, other := range suffixes {
			if s != other && strings.HasSuffix(s, other) {
				t.Errorf("suffix %s ends in %s", s, other)
			}
		}
	}
}

// TestReadChildNamesCannotBeAnotherClustersChildren: the read replicas'
// children are the cluster's name, SuffixRead and at most one more suffix.
// Another cluster's child could share such a name only if that cluster's
// name ended in SuffixRead, which admission refuses.
func TestReadChildNamesCannotBeAnotherClustersChildren(t *testing.T) {
	c := cluster("bao")
	suffixes := v1alpha1.ChildNameSuffixes()
	if !slices.Contains(suffixes, v1alpha1.SuffixRead) {
		t.Fatalf("SuffixRead is not refused at the end of a cluster name: %v", suffixes)
	}
	for _, name := range []string{c.ReadStatefulSetName(), c.ReadServiceName(), c.ReadHeadlessServiceName(), c.ReadConfigMapName()} {
		rest := strings.TrimPrefix(name, "bao"+v1alpha1.SuffixRead)
		if rest == name || (rest != "" && !slices.Contains(suffixes, rest)) {
			t.Errorf("read child %q is not bao%s and at most one suffix of %v", name, v1alpha1.SuffixRead, suffixes)
		}
	}
	names := c.ReadPodNames()
	if len(names) != v1alpha1.MaxReadReplicas || names[0] != "bao-read-0" || slices.Contains(c.PodNames(), names[0]) {
		t.Fatalf("ReadPodNames = %v", names)
	}
}

// TestOnlyOwnServersAreTakenForTheActiveOne: sys/leader's address counts
// as one of the cluster's servers only when it is one's PodAPIAddress,
// exactly; another cluster's server (the source of a restored snapshot,
// whose leader record the snapshot carries) is none.
func TestOnlyOwnServersAreTakenForTheActiveOne(t *testing.T) {
	c := cluster("bao")
	acme := cluster("bao")
	acme.Spec.TLS.Mode = v1alpha1.TLSModeACME
	for _, tc := range []struct {
		c       *v1alpha1.OpenBaoCluster
		address string
		want    int
		ok      bool
	}{
		{c, "https://bao-0.bao-internal.ns.svc:8200", 0, true},
		{c, "https://bao-2.bao-internal.ns.svc:8200", 2, true},
		{acme, "https://bao-1.bao-internal.ns.svc:8202", 1, true},
		{acme, "https://bao-1.bao-internal.ns.svc:8200", 0, false},
		{c, "https://moved-0.moved-internal.ns.svc:8200", 0, false},
		{cluster("moved"), "https://bao-0.bao-internal.ns.svc:8200", 0, false},
		{c, "https://bao-0.bao-internal.other.svc:8200", 0, false},
		{c, "http://bao-0.bao-internal.ns.svc:8200", 0, false},
		{c, "https://bao-0.bao-internal.ns.svc:8200/", 0, false},
		{c, "https://bao-0.bao-internal.ns.svc.evil.example:8200", 0, false},
		{c, "https://bao-0.bao-internal.ns.svc:8200@evil.example", 0, false},
		{c, "https://bao-00.bao-internal.ns.svc:8200", 0, false},
		{c, "https://bao-+1.bao-internal.ns.svc:8200", 0, false},
		{c, "https://bao--1.bao-internal.ns.svc:8200", 0, false},
		{c, "https://bao-11.bao-internal.ns.svc:8200", 0, false},
		{c, "https://bao.ns.svc:8200", 0, false},
		{c, "", 0, false},
	} {
		got, ok := tc.c.PodOrdinalAt(tc.address)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s.PodOrdinalAt(%q) = %d, %v; want %d, %v", tc.c.Name, tc.address, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzAnAddressIsOwnOnlyAsItsPodAPIAddress: whatever sys/leader answers,
// an address taken for a server of the cluster is that server's
// PodAPIAddress, of an ordinal the API allows.
func FuzzAnAddressIsOwnOnlyAsItsPodAPIAddress(f *testing.F) {
	for _, seed := range []string{"https://bao-0.bao-internal.ns.svc:8200", "https://bao-10.bao-internal.ns.svc:8202",
		"https://bao--1.bao-internal.ns.svc:8200", "https://bao-0.bao-internal.ns.svc:8200.x", ""} {
		f.Add(seed, false)
	}
	f.Fuzz(func(t *testing.T, address string, acme bool) {
		c := cluster("bao")
		if acme {
			c.Spec.TLS.Mode = v1alpha1.TLSModeACME
		}
		ordinal, ok := c.PodOrdinalAt(address)
		if !ok {
			return
		}
		if ordinal < 0 || ordinal >= v1alpha1.MaxReplicas || c.PodAPIAddress(ordinal) != address {
			t.Fatalf("%q taken for server %d, whose address is %q", address, ordinal, c.PodAPIAddress(ordinal))
		}
	})
}
