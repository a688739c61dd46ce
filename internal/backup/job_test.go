package backup_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/test/golden"
)

func backupCluster(mutate ...func(*v1alpha1.OpenBaoCluster)) *v1alpha1.OpenBaoCluster {
	c := &v1alpha1.OpenBaoCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "bao", Namespace: "ns", UID: "cluster-uid"},
		Spec: v1alpha1.OpenBaoClusterSpec{Version: "2.4.0", Replicas: 3, TLS: v1alpha1.TLSSpec{Mode: v1alpha1.TLSModeOperatorManaged},
			Backup: &v1alpha1.BackupSpec{
				Schedule:    "0 3 * * *",
				JWTAuthRole: "backup",
				Target: v1alpha1.BackupTarget{
					Endpoint: "https://minio.storage.svc:9000", Bucket: "backups", Region: "eu-1", PathPrefix: "prod",
					UsePathStyle: true, CASecretRef: &v1alpha1.SecretKeyRef{Name: "store-ca"},
					CredentialsSecretRef: &corev1.LocalObjectReference{Name: "store-credentials"},
				},
			}},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

func jobFor(c *v1alpha1.OpenBaoCluster) []byte {
	b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "bao-20250304-030000", Namespace: "ns", UID: "backup-uid"},
		Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: c.Name}}
	job := backup.JobFor(backup.JobInput{Cluster: c, Backup: b, Name: c.BackupJobName(at("2025-03-04T03:00:01Z")),
		OperatorImage: "registry.example.com/openbao-operator:v0.1.0"})
	data, err := yaml.Marshal(job)
	if err != nil {
		panic(err)
	}
	return data
}

var jobCases = map[string]*v1alpha1.OpenBaoCluster{
	"job-jwt": backupCluster(),
	"job-token-acme": backupCluster(func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.TLS = v1alpha1.TLSSpec{Mode: v1alpha1.TLSModeACME}
		c.Spec.Backup.JWTAuthRole = ""
		c.Spec.Backup.TokenSecretRef = &v1alpha1.SecretKeyRef{Name: "backup-token", Key: "bao-token"}
		c.Spec.Backup.Target = v1alpha1.BackupTarget{Endpoint: "https://s3.eu-west-1.amazonaws.com", Bucket: "backups"}
		c.Spec.Backup.ExecutorImage = "registry.example.com/executor:v1"
		c.Spec.Backup.Timeout = &metav1.Duration{Duration: 10 * time.Minute}
	}),
	// GCS with the pod's identity (Workload Identity): no endpoint, no Secret.
	"job-gcs": backupCluster(func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.Backup.Target = v1alpha1.BackupTarget{Provider: backup.ProviderGCS, Bucket: "backups", PathPrefix: "openbao"}
	}),
	// S3 with the pod's identity and a retention: the executor applies it,
	// since the operator may not use its own identity for the bucket.
	"job-retention-by-executor": backupCluster(func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.Backup.Target.CredentialsSecretRef = nil
		c.Spec.Backup.Retention = &v1alpha1.BackupRetention{MaxCount: int32Ptr(7), MaxAge: &metav1.Duration{Duration: 720 * time.Hour}}
	}),
	"job-azure": backupCluster(func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.Backup.Target = v1alpha1.BackupTarget{Provider: backup.ProviderAzure, Bucket: "backups",
			CredentialsSecretRef: &corev1.LocalObjectReference{Name: "azure-storage"}}
	}),
}

func TestJobGolden(t *testing.T) {
	set := golden.NewSet(t, filepath.Join("testdata", "golden"))
	for name, c := range jobCases {
		set.Assert(t, filepath.Join("testdata", "golden", name+".yaml"), jobFor(c))
	}
}

func TestJobPodMeetsTheRestrictedPodSecurityLevel(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range jobCases {
		var job struct {
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(jobFor(c), &job); err != nil {
			t.Fatal(err)
		}
		tmpl := job.Spec.Template
		for _, r := range eval.EvaluatePod(api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}, &tmpl.ObjectMeta, &tmpl.Spec) {
			if !r.Allowed {
				t.Errorf("%s: %s: %s", name, r.ForbiddenReason, r.ForbiddenDetail)
			}
		}
	}
}

func TestJobArgsRoundTripThroughTheExecutorsFlags(t *testing.T) {
	for name, c := range jobCases {
		var job struct {
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(jobFor(c), &job); err != nil {
			t.Fatal(err)
		}
		args := job.Spec.Template.Spec.Containers[0].Args
		cfg, err := backup.ParseExecutorArgs(args[1:], &strings.Builder{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := cfg.Args(); strings.Join(got, " ") != strings.Join(args, " ") {
			t.Errorf("%s: args %v came back as %v", name, args, got)
		}
	}
}

func TestJobNameIsAValidLabelForTheLongestCluster(t *testing.T) {
	c := backupCluster(func(c *v1alpha1.OpenBaoCluster) { c.Name = strings.Repeat("x", 40) })
	if errs := validation.IsDNS1123Label(c.BackupJobName(time.Now())); len(errs) > 0 {
		t.Error(errs)
	}
}

// The operator's proxy environment reaches the executor, which talks to the
// object store from behind the same proxy.
func TestJobCarriesTheProxyEnvironment(t *testing.T) {
	c := backupCluster()
	b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}, Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: c.Name}}
	env := []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}, {Name: "https_proxy", Value: "http://proxy:3128"}}
	job := backup.JobFor(backup.JobInput{Cluster: c, Backup: b, Name: "j", OperatorImage: "op:1", Env: env})
	got := job.Spec.Template.Spec.Containers[0].Env
	if !reflect.DeepEqual(got, env) {
		t.Errorf("executor env %v, want %v", got, env)
	}
}

// TestTheExecutorIsGivenTheRetentionOnlyWhenItAppliesIt: the retention
// flags are on a backup Job's command line exactly when the target names
// no credentials; with credentials the operator applies it, with those.
func TestTheExecutorIsGivenTheRetentionOnlyWhenItAppliesIt(t *testing.T) {
	retention := func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.Backup.Retention = &v1alpha1.BackupRetention{MaxCount: int32Ptr(3)}
	}
	noCredentials := func(c *v1alpha1.OpenBaoCluster) { c.Spec.Backup.Target.CredentialsSecretRef = nil }
	for _, c := range []struct {
		name    string
		cluster *v1alpha1.OpenBaoCluster
		want    bool
	}{
		{"a retention without credentials goes to the executor", backupCluster(retention, noCredentials), true},
		{"a retention with credentials stays with the operator", backupCluster(retention), false},
		{"no retention goes nowhere", backupCluster(noCredentials), false},
	} {
		got := strings.Contains(string(jobFor(c.cluster)), "--retention-max-count=3")
		if got != c.want {
			t.Errorf("%s: retention flag on the command line %v", c.name, got)
		}
	}
}

func int32Ptr(v int32) *int32 { return &v }

// TestAnAzureWorkloadIdentityLabelsTheExecutorPodOnly: Azure's webhook
// mutates only pods labelled azure.workload.identity/use=true; the Job's
// own labels stay those the operator selects on.
func TestAnAzureWorkloadIdentityLabelsTheExecutorPodOnly(t *testing.T) {
	c := backupCluster(func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.Backup.ServiceAccount.Annotations = map[string]string{"azure.workload.identity/client-id": "id"}
	})
	b := &v1alpha1.OpenBaoBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}, Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: c.Name}}
	job := backup.JobFor(backup.JobInput{Cluster: c, Backup: b, Name: "j", OperatorImage: "op:1"})
	if got := job.Spec.Template.Labels["azure.workload.identity/use"]; got != "true" {
		t.Errorf("pod label %q, want true", got)
	}
	if _, ok := job.Labels["azure.workload.identity/use"]; ok {
		t.Errorf("the Job itself is labelled: %v", job.Labels)
	}
	if got := backup.JobFor(backup.JobInput{Cluster: backupCluster(), Backup: b, Name: "j"}).Spec.Template.Labels; len(got) != len(job.Labels) {
		t.Errorf("without a workload identity the pod has labels %v", got)
	}
}
