package v1alpha1_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/openbao/operator/api/v1alpha1"
)

func cluster(name string) *v1alpha1.OpenBaoCluster {
	return &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
}

func TestOperatorIdentityNames(t *testing.T) {
	c := cluster("bao")
	for got, want := range map[string]string{
		c.OperatorTokenAudience():     "openbao-operator:ns/bao",
		c.BackupServiceAccountName():  "bao-backup-serviceaccount",
		c.UpgradeServiceAccountName(): "bao-upgrade-serviceaccount",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
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
