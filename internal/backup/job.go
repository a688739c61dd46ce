package backup

import (
	"maps"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/delegated"
	"github.com/openbao/operator/internal/identity"
)

// Where the backup pod finds what it is given. Nothing in the pod is
// writable: the executor keeps the snapshot in memory, part by part.
const (
	openbaoCADir   = "/etc/openbao-backup/openbao-ca"
	storeCADir     = "/etc/openbao-backup/store-ca"
	CredentialsDir = "/etc/openbao-backup/store-credentials"
	provenanceDir  = "/etc/openbao-backup/provenance"
	// ProvenanceKeyFile is where a Job finds the provenance key.
	ProvenanceKeyFile = provenanceDir + "/" + ProvenanceDataKey
	identityDir       = "/var/run/secrets/openbao.org"
	JWTFile           = identityDir + "/token"
	TokenFile         = identityDir + "/openbao-token"
	caFileName        = "ca.crt"
	ExecutorName      = "executor"
	jwtLifetime       = 600 // seconds: the token is read once, at the start
	executorMargin    = 30 * time.Second
	jobBackoffLimit   = 2
	executorMemLimit  = "128Mi"
)

// Keys of the credentials Secret, by provider: the executor reads them as
// files of CredentialsDir, retention from the Secret.
const (
	// S3: a static access key, and a session token when it is temporary.
	AccessKeyIDKey     = "AWS_ACCESS_KEY_ID"
	SecretAccessKeyKey = "AWS_SECRET_ACCESS_KEY"
	SessionTokenKey    = "AWS_SESSION_TOKEN"
	// GCS: a service account's JSON key, under the same key as the gcpckms
	// seal's credentials.
	GCSCredentialsKey = v1alpha1.GCPCredentialsKey
	// Azure: the storage account, with its shared key or a SAS token.
	AzureAccountNameKey = "accountName"
	AzureAccountKeyKey  = "accountKey"
	AzureSASTokenKey    = "sasToken"
)

// JobInput is what a backup Job is built from.
type JobInput struct {
	Cluster *v1alpha1.OpenBaoCluster
	Backup  *v1alpha1.OpenBaoBackup
	// Name is the Job's name (Cluster.BackupJobName of its start).
	Name string
	// OperatorImage runs the executor unless spec.backup.executorImage is set.
	OperatorImage string
	// Env is the operator's proxy environment (HTTP_PROXY and the like, as
	// OLM or the chart set them), which the executor needs to reach the
	// object store from behind the same proxy.
	Env []corev1.EnvVar
}

// TokenKey is the key of tokenSecretRef's Secret.
func TokenKey(ref *v1alpha1.SecretKeyRef) string { return ref.KeyOr(v1alpha1.DefaultTokenKey) }

// CAKey is the key of caSecretRef's Secret.
func CAKey(ref *v1alpha1.SecretKeyRef) string { return ref.KeyOr(v1alpha1.DefaultCAKey) }

// Timeout is the Job's deadline: spec.backup.timeout, or DefaultTimeout.
func Timeout(spec *v1alpha1.BackupSpec) time.Duration {
	if spec.Timeout != nil && spec.Timeout.Duration > 0 {
		return spec.Timeout.Duration
	}
	return DefaultTimeout
}

// JobLabels are the labels of a backup Job and its pod: the cluster's
// (the operator's cache selects on it), the backup's, and the component,
// which the cluster's NetworkPolicy admits to the API port.
func JobLabels(c *v1alpha1.OpenBaoCluster, b *v1alpha1.OpenBaoBackup) map[string]string {
	return map[string]string{
		v1alpha1.LabelCluster: c.Name, v1alpha1.LabelBackup: b.Name,
		v1alpha1.LabelComponent: v1alpha1.ComponentBackup, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
	}
}

// JobFor builds the Job of one backup: the executor under the cluster's
// backup service account, restricted pod security, a read-only root
// filesystem and nothing writable, the CA and the store credentials
// mounted as files, a deadline, and retries for pod disruptions only (the
// executor retries what may pass itself; its failure fails the Job).
//
// When the target names no credentials, the executor also applies the
// cluster's retention (WhoRetains): only the Job's identity may reach the
// store then.
func JobFor(in JobInput) *batchv1.Job {
	cfg := ExecutorConfigFor(in.Cluster, in.Backup.Name)
	if who, policy := WhoRetainsFor(in.Cluster); who == RetentionByExecutor {
		cfg.Retention = policy
	}
	return ExecutorJob(ExecutorJobInput{
		Cluster: in.Cluster, Login: identity.LoginFor(in.Cluster, identity.BackupRole, in.Cluster.Spec.Backup.LoginRole()),
		Name: in.Name, Owner: in.Backup.ControllerReference(),
		Labels: JobLabels(in.Cluster, in.Backup), Args: cfg.Args(),
		OperatorImage: in.OperatorImage, Env: in.Env,
		ProvenanceSecret: in.Cluster.BackupProvenanceSecretName(),
	})
}

// ExecutorJobInput is what a Job of the executor (a backup's or a
// restore's) is built from.
type ExecutorJobInput struct {
	Cluster *v1alpha1.OpenBaoCluster
	// Login is the pod's ServiceAccount and its projected token's
	// audience (identity.LoginFor the backup or the restore).
	Login  identity.Login
	Name   string
	Owner  metav1.OwnerReference
	Labels map[string]string
	// Args are the executor's command line (its subcommand and flags).
	Args          []string
	OperatorImage string
	Env           []corev1.EnvVar
	// ProvenanceSecret is the Secret of the provenance key mounted at
	// ProvenanceKeyFile; ProvenanceOptional lets the pod start without it
	// (a restore, whose source's Secret may be gone, proves nothing then).
	ProvenanceSecret   string
	ProvenanceOptional bool
}

// ExecutorJob builds a Job of the executor, as JobFor describes.
func ExecutorJob(in ExecutorJobInput) *batchv1.Job {
	c, labels := in.Cluster, in.Labels
	volumes, mounts := jobVolumes(c, in.Login.Audience)
	if in.ProvenanceSecret != "" {
		volumes = append(volumes, corev1.Volume{Name: "provenance", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: in.ProvenanceSecret, Items: []corev1.KeyToPath{{Key: ProvenanceDataKey, Path: ProvenanceDataKey}},
			Optional: ptr.To(in.ProvenanceOptional),
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "provenance", MountPath: provenanceDir, ReadOnly: true})
	}
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: in.Name, Namespace: c.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{in.Owner},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](jobBackoffLimit),
			ActiveDeadlineSeconds: ptr.To(int64(Timeout(c.Spec.Backup) / time.Second)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
					{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
				{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					ContainerName: ptr.To(ExecutorName), Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0}}},
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels(c, labels)},
				Spec:       podSpec(in, volumes, mounts),
			},
		},
	}
}

// podLabels are the Job's labels and those the workload identity of
// spec.backup.serviceAccount needs on the pod (Azure's webhook acts only
// on pods labelled azure.workload.identity/use=true).
func podLabels(c *v1alpha1.OpenBaoCluster, labels map[string]string) map[string]string {
	out := maps.Clone(labels)
	if c.Spec.Backup != nil {
		maps.Copy(out, delegated.PodLabels(c.Spec.Backup.ServiceAccount.Annotations))
	}
	return out
}

func podSpec(in ExecutorJobInput, volumes []corev1.Volume, mounts []corev1.VolumeMount) corev1.PodSpec {
	image := in.Cluster.Spec.Backup.ExecutorImage
	if image == "" {
		image = in.OperatorImage
	}
	return corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		ServiceAccountName:           in.Login.ServiceAccount,
		AutomountServiceAccountToken: ptr.To(false),
		// No user or group IDs: the image's numeric user applies, and
		// OpenShift's restricted SCC assigns its own.
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Name:            ExecutorName,
			Image:           image,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{"/manager"},
			Args:            in.Args,
			Env:             in.Env,
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(executorMemLimit)},
			},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
			TerminationMessagePath:   TerminationLog,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			VolumeMounts:             mounts,
		}},
		Volumes: volumes,
	}
}

// ExecutorConfigFor is what a Job of cluster c tells the executor; backup
// names the OpenBaoBackup (empty for a restore).
func ExecutorConfigFor(c *v1alpha1.OpenBaoCluster, backup string) ExecutorConfig {
	spec := c.Spec.Backup
	cfg := ExecutorConfig{
		Namespace: c.Namespace, Cluster: c.Name, Backup: backup,
		OpenBaoAddress: c.InternalServiceAddress(),
		OpenBaoCAFile:  openbaoCADir + "/" + caFileName,
		ServerDomain:   c.HeadlessServiceName() + "." + c.Namespace + ".svc",
		Provider:       spec.Target.Provider, Endpoint: spec.Target.Endpoint, Bucket: spec.Target.Bucket, Region: spec.Target.Region,
		PathStyle: spec.Target.UsePathStyle, PathPrefix: spec.Target.PathPrefix,
		Timeout:  Timeout(spec) - executorMargin,
		PartSize: DefaultPartSize, Concurrency: DefaultConcurrency,
		TerminationLog:    TerminationLog,
		ProvenanceKeyFile: ProvenanceKeyFile,
	}
	if spec.TokenSecretRef != nil {
		cfg.Auth, cfg.TokenFile = AuthToken, TokenFile
	} else {
		cfg.Auth, cfg.JWTMount, cfg.JWTRole, cfg.JWTFile = AuthJWT, OperatorAuthMount, spec.LoginRole(), JWTFile
	}
	if spec.Target.CASecretRef != nil {
		cfg.StoreCAFile = storeCADir + "/" + caFileName
	}
	if spec.Target.CredentialsSecretRef != nil {
		cfg.CredentialsDir = CredentialsDir
	}
	return cfg
}

// jobVolumes mounts the cluster's CA, the identity (a projected token for
// audience, or the token Secret) and the store's CA and credentials, each
// read-only.
func jobVolumes(c *v1alpha1.OpenBaoCluster, audience string) ([]corev1.Volume, []corev1.VolumeMount) {
	spec := c.Spec.Backup
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	add := func(name, dir string, source corev1.VolumeSource) {
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: source})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: true})
	}
	add("openbao-ca", openbaoCADir, secretItem(c.TrustedCASecretName(), "ca.crt", caFileName))
	if ref := spec.TokenSecretRef; ref != nil {
		add("identity", identityDir, secretItem(ref.Name, TokenKey(ref), "openbao-token"))
	} else {
		add("identity", identityDir, corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: audience, ExpirationSeconds: ptr.To[int64](jwtLifetime), Path: "token",
			}}},
		}})
	}
	if ref := spec.Target.CASecretRef; ref != nil {
		add("store-ca", storeCADir, secretItem(ref.Name, CAKey(ref), caFileName))
	}
	if ref := spec.Target.CredentialsSecretRef; ref != nil {
		add("store-credentials", CredentialsDir, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: ref.Name}})
	}
	return volumes, mounts
}

func secretItem(secret, key, path string) corev1.VolumeSource {
	return corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secret, Items: []corev1.KeyToPath{{Key: key, Path: path}},
	}}
}
