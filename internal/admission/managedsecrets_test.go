package admission_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/admission"
	"github.com/openbao/operator/internal/backup"
)

func tenantCluster(opts ...func(*v1alpha1.OpenBaoCluster)) *v1alpha1.OpenBaoCluster {
	c := &v1alpha1.OpenBaoCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "team", UID: types.UID("mine-uid")},
		Spec:       v1alpha1.OpenBaoClusterSpec{Version: "2.4.0", Replicas: 3},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func backupCredentials(name string) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.Backup = &v1alpha1.BackupSpec{JWTAuthRole: "backup", ExecutorImage: "evil.example/exec:1",
			Target: v1alpha1.BackupTarget{Endpoint: "https://s3.example", Bucket: "b",
				CredentialsSecretRef: &corev1.LocalObjectReference{Name: name}}}
	}
}

func fromBackup(source, key string) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{FromBackup: &v1alpha1.BackupBootstrap{
			Target: v1alpha1.BackupTarget{Endpoint: "https://s3.example", Bucket: "b"}, Latest: true,
			SourceCluster: source, KeepSourceIdentity: true, UnsealKeySecretRef: &v1alpha1.SecretKeyRef{Name: key}}}
	}
}

func TestManagedSecretsAreNeverCredentials(t *testing.T) {
	tests := map[string]struct {
		c        *v1alpha1.OpenBaoCluster
		labelled map[string]bool
		field    string // empty: accepted
		why      string
	}{
		"a backup credential naming another cluster's root token is refused": {
			c: tenantCluster(backupCredentials("prod-root-token")), field: "spec.backup.target.credentialsSecretRef", why: "ends in -root-token"},
		"a backup credential naming a cluster's backup provenance key is refused": {
			c: tenantCluster(backupCredentials("prod-backup-provenance")), field: "spec.backup.target.credentialsSecretRef", why: "ends in -backup-provenance"},
		"a bootstrap seal key naming another cluster's seal key is refused": {
			c: tenantCluster(fromBackup("prod", "prod-unseal-key")), field: "spec.bootstrap.fromBackup.unsealKeySecretRef", why: "ends in -unseal-key"},
		"a seal key named after the cluster's own managed key is refused too": {
			c: tenantCluster(fromBackup("prod", "mine-unseal-key")), field: "spec.bootstrap.fromBackup.unsealKeySecretRef", why: "ends in -unseal-key"},
		"an Ingress certificate naming a cluster's server key is refused": {
			c: tenantCluster(func(c *v1alpha1.OpenBaoCluster) {
				c.Spec.Ingress = &v1alpha1.IngressSpec{Enabled: true, Host: "a.example", TLSSecretName: "prod-tls-server"}
			}), field: "spec.ingress.tlsSecretName", why: "ends in -tls-server"},
		"an upgrade token naming a cluster's self-init Secret is refused": {
			c: tenantCluster(func(c *v1alpha1.OpenBaoCluster) {
				c.Spec.Upgrade.TokenSecretRef = &v1alpha1.SecretKeyRef{Name: "prod-self-init"}
			}), field: "spec.upgrade.tokenSecretRef", why: "ends in -self-init"},
		"a backup CA naming a cluster's CA Secret is refused": {
			c: tenantCluster(func(c *v1alpha1.OpenBaoCluster) {
				backupCredentials("mine-s3")(c)
				c.Spec.Backup.Target.CASecretRef = &v1alpha1.SecretKeyRef{Name: "prod-tls-ca"}
			}), field: "spec.backup.target.caSecretRef", why: "ends in -tls-ca"},
		"a Secret of any name that carries the operator's label is refused": {
			c: tenantCluster(backupCredentials("renamed")), labelled: map[string]bool{"renamed": true},
			field: "spec.backup.target.credentialsSecretRef", why: "app.kubernetes.io/managed-by=openbao-operator"},
		"a Secret of the author's own is accepted": {
			c: tenantCluster(backupCredentials("mine-s3"))},
		"a trusted-root ConfigMap is not a Secret and is accepted whatever its name": {
			c: tenantCluster(func(c *v1alpha1.OpenBaoCluster) {
				c.Spec.ImageVerification = &v1alpha1.ImageVerificationSpec{Enabled: true, Keyless: &v1alpha1.KeylessIdentity{
					Issuer: "https://x", Subject: "y", TrustedRootConfigMapRef: v1alpha1.TrustedRootConfigMapRef{Name: "prod-tls-ca"}}}
			})},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			errs := admission.ManagedSecretRefs(admission.ClusterReferences(tc.c).Objects, admission.ManagedObserved{Labelled: tc.labelled})
			if tc.field == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1: %v", len(errs), errs)
			}
			msg := errs[0].Error()
			for _, want := range []string{tc.field + ":", admission.RuleManagedSecret, tc.why, "Copy what you need into a Secret of your own"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the refusal does not say %q:\n%s", want, msg)
				}
			}
		})
	}
}

func prodWithDrill() *v1alpha1.OpenBaoCluster {
	return &v1alpha1.OpenBaoCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: "team", UID: types.UID("prod-uid")},
		Spec: v1alpha1.OpenBaoClusterSpec{Version: "2.4.0", Image: "quay.io/openbao/openbao:2.4.0", Replicas: 3,
			Unseal: v1alpha1.UnsealSpec{Type: v1alpha1.UnsealStatic},
			Backup: &v1alpha1.BackupSpec{JWTAuthRole: "backup", Target: v1alpha1.BackupTarget{Endpoint: "https://s3.example", Bucket: "b"}}},
	}
}

func drillCopy() (cp, source *v1alpha1.OpenBaoCluster) {
	source = prodWithDrill()
	b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "prod-1", Namespace: "team"}}
	b.Status.Key, b.Status.SHA256 = "team/prod/1.snap", strings.Repeat("a", 64)
	return backup.DrillCopyFor(source, b), source
}

// TestOnlyTheOperatorsOwnDrillCopyMayNameTheSourcesSealKey: the copy
// backup.DrillCopyFor makes names its source's seal key, and must pass;
// anything that sends the key elsewhere, or is not the source's copy, must
// not.
func TestOnlyTheOperatorsOwnDrillCopyMayNameTheSourcesSealKey(t *testing.T) {
	tests := map[string]struct {
		change func(cp, source *v1alpha1.OpenBaoCluster)
		exempt bool
	}{
		"the copy the drill makes is exempt":                          {change: func(_, _ *v1alpha1.OpenBaoCluster) {}, exempt: true},
		"a copy running another image is not":                         {change: func(cp, _ *v1alpha1.OpenBaoCluster) { cp.Spec.Image = "evil.example/bao:1" }},
		"a copy running another version is not":                       {change: func(cp, _ *v1alpha1.OpenBaoCluster) { cp.Spec.Version = "2.5.0" }},
		"a copy with a backup of its own, to carry data away, is not": {change: func(cp, source *v1alpha1.OpenBaoCluster) { cp.Spec.Backup = source.Spec.Backup.DeepCopy() }},
		"a copy with values of its own is not": {change: func(cp, _ *v1alpha1.OpenBaoCluster) {
			cp.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"server":{"extraContainers":[{}]}}`)}
		}},
		"a copy controlled by another object of the same name is not": {change: func(cp, _ *v1alpha1.OpenBaoCluster) { cp.OwnerReferences[0].UID = "forged" }},
		"a copy without the drill label is not":                       {change: func(cp, _ *v1alpha1.OpenBaoCluster) { delete(cp.Labels, v1alpha1.LabelDrillOf) }},
		"a cluster of another name is not":                            {change: func(cp, _ *v1alpha1.OpenBaoCluster) { cp.Name = "prod-copy" }},
		"a copy whose source is gone is not":                          {change: func(_, source *v1alpha1.OpenBaoCluster) { *source = v1alpha1.OpenBaoCluster{} }},
		"a copy naming another key of the source's seal key Secret is not": {change: func(cp, _ *v1alpha1.OpenBaoCluster) {
			cp.Spec.Bootstrap.FromBackup.UnsealKeySecretRef.Key = "other"
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cp, source := drillCopy()
			tc.change(cp, source)
			if source.Name == "" {
				source = nil
			}
			key := admission.DrillCopyKey(cp, source)
			errs := admission.ManagedSecretRefs(admission.ClusterReferences(cp).Objects, admission.ManagedObserved{Exempt: key})
			if tc.exempt && (key == nil || len(errs) > 0) {
				t.Fatalf("the drill's own copy is refused: exempt %v, %v", key, errs)
			}
			if !tc.exempt && (key != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), "spec.bootstrap.fromBackup.unsealKeySecretRef")) {
				t.Fatalf("exempt %v, errors %v: want the seal key refused", key, errs)
			}
		})
	}
}

func TestTheExemptionCoversTheSealKeyOnly(t *testing.T) {
	cp, source := drillCopy()
	cp.Spec.Upgrade.TokenSecretRef = &v1alpha1.SecretKeyRef{Name: "prod-root-token"}
	errs := admission.ManagedSecretRefs(admission.ClusterReferences(cp).Objects,
		admission.ManagedObserved{Exempt: admission.DrillCopyKey(cp, source)})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "spec.upgrade.tokenSecretRef") {
		t.Fatalf("got %v, want the root token refused in the drill copy", errs)
	}
}

// TestEveryManagedSecretNameIsCovered wants a suffix for every method of
// OpenBaoCluster that names a Secret (names.go): a new managed Secret must
// be covered by the rule.
func TestEveryManagedSecretNameIsCovered(t *testing.T) {
	suffixes := admission.ManagedSecretSuffixes()
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	v := reflect.ValueOf(c)
	n := 0
	for i := range v.NumMethod() {
		m := v.Type().Method(i)
		if !strings.HasSuffix(m.Name, "SecretName") || m.Type.NumIn() != 1 || m.Type.NumOut() != 1 {
			continue
		}
		n++
		name := v.Method(i).Call(nil)[0].String()
		if !slices.ContainsFunc(suffixes, func(s string) bool { return strings.HasSuffix(name, s) }) {
			t.Errorf("%s gives %q, which no managed suffix covers: add it to admission.ManagedSecretSuffixes", m.Name, name)
		}
	}
	if n < 5 {
		t.Errorf("found %d Secret names, want at least 5", n)
	}
}

func TestAuthorsAreAskedToGetWhatTheyNameAndUpdateTheClustersTheyUse(t *testing.T) {
	c := tenantCluster(backupCredentials("mine-s3"), fromBackup("prod", "mine-key"))
	checks := admission.AccessChecks(admission.ClusterReferences(c), "team")
	got := map[string]string{}
	for _, a := range checks {
		got[a.Path.String()] = a.Attributes.Verb + " " + a.Attributes.Resource + "/" + a.Attributes.Name + " in " + a.Attributes.Namespace
	}
	want := map[string]string{
		"spec.backup.target.credentialsSecretRef":      "get secrets/mine-s3 in team",
		"spec.bootstrap.fromBackup.unsealKeySecretRef": "get secrets/mine-key in team",
		"spec.bootstrap.fromBackup.sourceCluster":      "update openbaoclusters/prod in team",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("checks %v, want %v", got, want)
	}
	msg := admission.Denied(checks[len(checks)-1], "alice").Error()
	for _, s := range []string{"spec.bootstrap.fromBackup.sourceCluster:", admission.RuleAuthorRights, "alice may not update openbaoclusters.openbao.org prod"} {
		if !strings.Contains(msg, s) {
			t.Errorf("the refusal does not say %q:\n%s", s, msg)
		}
	}
}

func TestAnUpdateChecksOnlyWhatItNamesAnew(t *testing.T) {
	old := tenantCluster(backupCredentials("mine-s3"))
	changed := tenantCluster(backupCredentials("mine-s3"), func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.Upgrade.TokenSecretRef = &v1alpha1.SecretKeyRef{Name: "up"}
	})
	fresh := admission.ClusterReferences(changed).NewSince(admission.ClusterReferences(old))
	if len(fresh.Objects) != 1 || fresh.Objects[0].Name != "up" || len(fresh.Clusters) != 0 {
		t.Fatalf("new references %+v, want only spec.upgrade.tokenSecretRef", fresh)
	}
	same := admission.ClusterReferences(old).NewSince(admission.ClusterReferences(old))
	if len(same.Objects)+len(same.Clusters) != 0 {
		t.Fatalf("an unchanged spec names %+v anew", same)
	}
}

func TestDeletionPolicyChecksAskForTheRightsAPolicyHandsOver(t *testing.T) {
	cluster := func(p v1alpha1.DeletionPolicy) *v1alpha1.OpenBaoCluster {
		return &v1alpha1.OpenBaoCluster{Spec: v1alpha1.OpenBaoClusterSpec{DeletionPolicy: p}}
	}
	for _, tc := range []struct {
		name     string
		old, new v1alpha1.DeletionPolicy
		created  bool
		want     []string
	}{
		{"a new cluster that retains asks nothing", "", v1alpha1.DeletionPolicyRetain, true, nil},
		{"a new cluster under DeletePVCs asks to delete claims", "", v1alpha1.DeletionPolicyDeletePVCs, true, []string{"persistentvolumeclaims"}},
		{"a new cluster under DeleteAll asks to delete claims and Secrets", "", v1alpha1.DeletionPolicyDeleteAll, true, []string{"persistentvolumeclaims", "secrets"}},
		{"Retain widened to DeletePVCs asks to delete claims", v1alpha1.DeletionPolicyRetain, v1alpha1.DeletionPolicyDeletePVCs, false, []string{"persistentvolumeclaims"}},
		{"DeletePVCs widened to DeleteAll asks to delete Secrets", v1alpha1.DeletionPolicyDeletePVCs, v1alpha1.DeletionPolicyDeleteAll, false, []string{"secrets"}},
		{"a policy kept asks nothing", v1alpha1.DeletionPolicyDeleteAll, v1alpha1.DeletionPolicyDeleteAll, false, nil},
		{"a policy narrowed asks nothing", v1alpha1.DeletionPolicyDeleteAll, v1alpha1.DeletionPolicyRetain, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var old *v1alpha1.OpenBaoCluster
			if !tc.created {
				old = cluster(tc.old)
			}
			var got []string
			for _, a := range admission.DeletionPolicyChecks(old, cluster(tc.new), "team") {
				if a.Attributes.Verb != "delete" || a.Attributes.Namespace != "team" || a.Attributes.Name != "" || a.Path.String() != "spec.deletionPolicy" {
					t.Errorf("check %+v", a)
				}
				got = append(got, a.Attributes.Resource)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("asked to delete %v, want %v", got, tc.want)
			}
		})
	}
}
