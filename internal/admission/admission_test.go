package admission

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/openbao/operator/api/v1alpha1"
)

func cluster(opts ...func(*v1alpha1.OpenBaoCluster)) *v1alpha1.OpenBaoCluster {
	c := &v1alpha1.OpenBaoCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "team"},
		Spec:       v1alpha1.OpenBaoClusterSpec{Version: "2.4.0", Replicas: 3},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func config(key, raw string) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) {
		if c.Spec.Config == nil {
			c.Spec.Config = map[string]apiextensionsv1.JSON{}
		}
		c.Spec.Config[key] = apiextensionsv1.JSON{Raw: []byte(raw)}
	}
}

func selfInitData(raw string) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.SelfInit = &v1alpha1.SelfInitSpec{Enabled: true, Requests: []v1alpha1.SelfInitRequest{
			{Name: "audit", Operation: "update", Path: "sys/audit/stdout", Data: &apiextensionsv1.JSON{Raw: []byte(raw)}},
		}}
	}
}

func schedule(expr string) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.Backup = &v1alpha1.BackupSpec{Schedule: expr, JWTAuthRole: "backup",
			Target: v1alpha1.BackupTarget{Endpoint: "https://s3.example", Bucket: "snaps"}}
	}
}

func version(v string) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) { c.Spec.Version = v }
}

func running(v string) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) { c.Status.CurrentVersion, c.Status.Initialized = v, true }
}

// midRollout is the status of a cluster whose servers run two versions,
// the newest of them highest.
func midRollout(highest string) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) {
		c.Status.CurrentVersion, c.Status.HighestVersion, c.Status.Initialized = "", highest, true
	}
}

func standbyReads(on bool) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.ReadReplicas = &v1alpha1.ReadReplicasSpec{Replicas: 2, StandbyReads: ptr.To(on)}
	}
}

func TestClusterRefusalsNameTheFieldAndWhatItTakes(t *testing.T) {
	tests := map[string]struct {
		old, new    *v1alpha1.OpenBaoCluster
		field, text string
	}{
		"a lease TTL OpenBao cannot parse": {nil, cluster(config("default_lease_ttl", `"1 hour"`)),
			"spec.config.default_lease_ttl", "768h"},
		"a null value in a block": {nil, cluster(config("audit", `{"options": null}`)),
			"spec.config.audit", "want a string, number"},
		"a list of lists": {nil, cluster(config("x", `[[1]]`)), "spec.config.x", "lists of lists"},
		"an integer beyond 64 bits": {nil, cluster(config("cache_size", `100000000000000000000`)),
			"spec.config.cache_size", "64-bit"},
		"a self-init body that is no object": {nil, cluster(selfInitData(`"s3cr3t"`)),
			"spec.selfInit.requests[0].data", "JSON object"},
		"a self-init body holding null": {nil, cluster(selfInitData(`{"type": null}`)),
			"spec.selfInit.requests[0]", "null"},
		"a schedule that never fires": {nil, cluster(schedule("0 0 31 2 *")),
			"spec.backup.schedule", "@daily"},
		"a standby whose own backups land in its source's prefix": {nil, cluster(standbyInto("site-a")),
			"spec.backup.target.pathPrefix", "within its source's prefix"},
		"a same-named source in another namespace without a token": {nil, cluster(fromBackupIn("", "prod", false)),
			"spec.bootstrap.fromBackup.tokenSecretRef", "cluster bao of namespace prod"},
		"a source's identity kept from another namespace": {nil, cluster(fromBackupIn("src", "prod", true)),
			"spec.bootstrap.fromBackup.keepSourceIdentity", "ServiceAccounts of namespace prod"},
		"a source namespace changed under a kept identity": {cluster(fromBackupIn("src", "", true)), cluster(fromBackupIn("src", "prod", true)),
			"spec.bootstrap.fromBackup.keepSourceIdentity", "ServiceAccounts of namespace prod"},
		"a downgrade from the running version": {cluster(version("2.5.0"), running("2.5.0")), cluster(version("2.4.0"), running("2.5.0")),
			"spec.version", "Set spec.version back to 2.5.0"},
		"a release that cannot run the seal": {
			cluster(running("2.4.0"), func(c *v1alpha1.OpenBaoCluster) { c.Spec.Unseal.Type = v1alpha1.UnsealAWSKMS }),
			cluster(version("2.7.0"), running("2.4.0"), func(c *v1alpha1.OpenBaoCluster) { c.Spec.Unseal.Type = v1alpha1.UnsealAWSKMS }),
			"spec.version", "Stay on 2.6"},
		"a downgrade mid-rollout, below the release a server ran": {cluster(version("2.4.1"), midRollout("2.4.1")),
			cluster(version("2.4.0"), midRollout("2.4.1")), "spec.version", "Set spec.version back to 2.4.1"},
		"a max_lease_ttl shorter than OpenBao's default lease TTL": {nil, cluster(config("max_lease_ttl", `"1h"`)),
			"spec.config.max_lease_ttl", "cannot have DefaultLeaseTTL larger than MaxLeaseTTL"},
		"a default_lease_ttl longer than max_lease_ttl": {nil, cluster(config("default_lease_ttl", `"2h"`), config("max_lease_ttl", `3600`)),
			"spec.config.default_lease_ttl", "want default_lease_ttl at most max_lease_ttl"},
		"a max_lease_ttl lowered below the default_lease_ttl": {cluster(config("default_lease_ttl", `"2h"`), config("max_lease_ttl", `"4h"`)),
			cluster(config("default_lease_ttl", `"2h"`), config("max_lease_ttl", `"1h"`)), "spec.config.max_lease_ttl", "max_lease_ttl (\"1h\", 1h0m0s)"},
		"a max_lease_ttl removed under a default_lease_ttl above OpenBao's default": {
			cluster(config("default_lease_ttl", `"1000h"`), config("max_lease_ttl", `"2000h"`)),
			cluster(config("default_lease_ttl", `"1000h"`)), "spec.config.max_lease_ttl", "unset, so 768h"},
		"a PDB both typed and in spec.values": {nil, cluster(func(c *v1alpha1.OpenBaoCluster) {
			c.Spec.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{}
			c.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"podDisruptionBudget": {"enabled": false}}`)}
		}), "spec.values.podDisruptionBudget", "spec.podDisruptionBudget and spec.values.podDisruptionBudget are both set"},
		"monitoring both typed and in spec.values": {nil, cluster(func(c *v1alpha1.OpenBaoCluster) {
			c.Spec.Monitoring = &v1alpha1.MonitoringSpec{}
			c.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"serviceMonitor": {"enabled": true}}`)}
		}), "spec.values.serviceMonitor", "spec.monitoring and spec.values.serviceMonitor are both set"},
		"a protected label on the pods in spec.values": {nil, cluster(func(c *v1alpha1.OpenBaoCluster) {
			c.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"podLabels": {"openbao.org/cluster": "other"}}`)}
		}), "spec.values.podLabels[openbao.org/cluster]", "owns and cannot be set"},
		"a protected label on the ServiceMonitor": {nil, cluster(func(c *v1alpha1.OpenBaoCluster) {
			c.Spec.Monitoring = &v1alpha1.MonitoringSpec{ServiceMonitor: v1alpha1.ServiceMonitorSpec{Enabled: true,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "someone"}}}
		}), "spec.monitoring.serviceMonitor.labels[app.kubernetes.io/managed-by]", "owns and cannot be set"},
		"standby reads on 2.4": {nil, cluster(standbyReads(true)), "spec.readReplicas.standbyReads", "needs OpenBao 2.5.0 or later"},
		"a downgrade to 2.4 under standby reads": {cluster(version("2.5.0"), standbyReads(true)),
			cluster(version("2.4.0"), standbyReads(true), func(c *v1alpha1.OpenBaoCluster) { c.Spec.Upgrade.AllowDowngrade = true }),
			"spec.readReplicas.standbyReads", "needs OpenBao 2.5.0 or later"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			errs := ValidateCluster(tc.old, tc.new)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1: %v", len(errs), errs)
			}
			if errs[0].Field != tc.field || !strings.Contains(errs[0].Error(), tc.text) {
				t.Errorf("error %q: want field %s and %q", errs[0].Error(), tc.field, tc.text)
			}
			if strings.Contains(errs[0].Error(), "s3cr3t") {
				t.Errorf("error %q echoes the value", errs[0].Error())
			}
		})
	}
}

func TestClusterChangesThatAreAllowed(t *testing.T) {
	tests := map[string]struct{ old, new *v1alpha1.OpenBaoCluster }{
		"a valid cluster": {nil, cluster(config("default_lease_ttl", `"768h"`), config("ui", `true`),
			selfInitData(`{"type": "file"}`), schedule("@daily"))},
		"an unchanged bad key stays (ratchet)":                 {cluster(config("x", `[[1]]`)), cluster(config("x", `[[1]]`), config("y", `1`))},
		"an unchanged never-firing schedule stays":             {cluster(schedule("0 0 31 2 *")), cluster(schedule("0 0 31 2 *"), config("y", `1`))},
		"self-init requests are not read after initialization": {cluster(running("2.4.0")), cluster(running("2.4.0"), selfInitData(`"x"`))},
		"a downgrade with allowDowngrade": {cluster(version("2.5.0"), running("2.5.0")),
			cluster(version("2.4.0"), running("2.5.0"), func(c *v1alpha1.OpenBaoCluster) { c.Spec.Upgrade.AllowDowngrade = true })},
		"an upgrade": {cluster(running("2.4.0")), cluster(version("2.5.0"), running("2.4.0"))},
		"a source in another namespace with a token": {nil, cluster(fromBackupIn("", "prod", false), func(c *v1alpha1.OpenBaoCluster) {
			c.Spec.Bootstrap.FromBackup.TokenSecretRef = &v1alpha1.SecretKeyRef{Name: "prod-token"}
		})},
		"a source's identity kept in this namespace": {nil, cluster(fromBackupIn("src", "team", true))},
		"an unchanged fromBackup stored before the rule stays (ratchet)": {cluster(fromBackupIn("", "prod", false)),
			cluster(fromBackupIn("", "prod", false), config("ui", `true`))},
		"read replicas without standby reads on 2.4":      {nil, cluster(standbyReads(false))},
		"standby reads on 2.5":                            {nil, cluster(version("2.5.0"), standbyReads(true))},
		"a version change before any server reported one": {cluster(version("2.5.0")), cluster(version("2.4.0"))},
		"a newer target mid-rollout":                      {cluster(version("2.4.1"), midRollout("2.4.1")), cluster(version("2.4.2"), midRollout("2.4.1"))},
		"lease TTLs within OpenBao's defaults":            {nil, cluster(config("default_lease_ttl", `"1h"`), config("max_lease_ttl", `"0"`))},
		"lease TTLs OpenBao refuses, stored before the rule, unchanged (ratchet)": {cluster(config("max_lease_ttl", `"1h"`)),
			cluster(config("max_lease_ttl", `"1h"`), config("ui", `true`))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if errs := ValidateCluster(tc.old, tc.new); len(errs) != 0 {
				t.Errorf("refused: %v", errs)
			}
		})
	}
}

func TestBackupsAndRestoresNeedAClusterThatCanServeThem(t *testing.T) {
	bk := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "team"},
		Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: "bao"}}
	rs := func(src v1alpha1.RestoreSource) *v1alpha1.OpenBaoRestore {
		return &v1alpha1.OpenBaoRestore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "team"},
			Spec: v1alpha1.OpenBaoRestoreSpec{ClusterName: "bao", Source: src}}
	}
	latest := v1alpha1.RestoreSource{Latest: true}
	configured := cluster(schedule(""))
	forcedWithoutUndo := rs(latest)
	forcedWithoutUndo.Spec.Force, forcedWithoutUndo.Spec.PreRestoreSnapshot = true, ptr.To(false)
	tests := map[string]struct {
		errs        []string
		field, text string
	}{
		"a backup of a missing cluster":       {errStrings(ValidateBackup(bk, nil)), "spec.clusterName", "no OpenBaoCluster"},
		"a backup of a cluster without spec":  {errStrings(ValidateBackup(bk, cluster())), "spec.clusterName", "spec.backup of OpenBaoCluster bao is not set"},
		"a restore of a missing cluster":      {errStrings(ValidateRestore(rs(latest), nil)), "spec.clusterName", "namespace team"},
		"a restore of a cluster without spec": {errStrings(ValidateRestore(rs(latest), cluster())), "spec.clusterName", "has no spec.backup"},
		"a bootstrap restore of a cluster without fromBackup": {errStrings(ValidateRestore(rs(v1alpha1.RestoreSource{Bootstrap: true}), configured)),
			"spec.source.bootstrap", "source.key or source.latest"},
		"a forced restore without the pre-restore snapshot": {errStrings(ValidateRestore(forcedWithoutUndo, configured)),
			"spec.force", "needs spec.preRestoreSnapshot: true"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if len(tc.errs) != 1 || !strings.HasPrefix(tc.errs[0], tc.field+":") || !strings.Contains(tc.errs[0], tc.text) {
				t.Errorf("errors %q: want one on %s saying %q", tc.errs, tc.field, tc.text)
			}
		})
	}
	if errs := ValidateBackup(bk, configured); len(errs) != 0 {
		t.Errorf("backup of a configured cluster refused: %v", errs)
	}
	if errs := ValidateRestore(rs(latest), configured); len(errs) != 0 {
		t.Errorf("restore of a configured cluster refused: %v", errs)
	}
}

func errStrings(errs []*field.Error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

// fromBackupIn forms the cluster from a snapshot of cluster source of
// namespace ns (empty: its own), keeping the source's identity or not.
func fromBackupIn(source, ns string, keep bool) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{FromBackup: &v1alpha1.BackupBootstrap{Latest: true, SourceCluster: source,
			SourceNamespace: ns, KeepSourceIdentity: keep,
			Target: v1alpha1.BackupTarget{Endpoint: "https://s3.example.com", Bucket: "dr-store"}}}
	}
}

// standbyInto makes the cluster a standby of a source of its own name
// under pathPrefix site-a, backing up under pathPrefix own.
func standbyInto(own string) func(*v1alpha1.OpenBaoCluster) {
	return func(c *v1alpha1.OpenBaoCluster) {
		target := v1alpha1.BackupTarget{Endpoint: "https://s3.example.com", Bucket: "dr-store", PathPrefix: "site-a"}
		c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{FromBackup: &v1alpha1.BackupBootstrap{Target: target, Latest: true}}
		c.Spec.Standby = &v1alpha1.StandbySpec{}
		target.PathPrefix = own
		c.Spec.Backup = &v1alpha1.BackupSpec{Target: target}
	}
}
