package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every child object's name is derived here, so the chart values, the
// controllers and the tests agree on them.

// Suffixes the cluster's name takes in the names of its children in its
// namespace. A child's name is the cluster's name or the name and one of
// these.
const (
	SuffixHeadlessService       = "-internal"
	SuffixConfigMap             = "-config"
	SuffixServiceRegistration   = "-service-registration"
	SuffixUpgradeServiceAccount = "-upgrade-serviceaccount"
	SuffixBackupServiceAccount  = "-backup-serviceaccount"
	SuffixRestoreServiceAccount = "-restore-serviceaccount"
	SuffixDrillServiceAccount   = "-drill-serviceaccount"
	SuffixTLSCA                 = "-tls-ca"
	SuffixTLSServer             = "-tls-server"
	SuffixUnsealKey             = "-unseal-key"
	SuffixSelfInit              = "-self-init"
	SuffixRootToken             = "-root-token"
	SuffixBackupProvenance      = "-backup-provenance"
	SuffixRecoveryKeys          = "-recovery-keys"
	// SuffixRead names the read replicas' StatefulSet and Service; their
	// headless Service and ConfigMap add SuffixHeadlessService and
	// SuffixConfigMap to it. Since a cluster name ending in SuffixRead is
	// refused, those names cannot be another cluster's either.
	SuffixRead = "-read"
)

// ChildNameSuffixes lists every suffix of a child's name. Since none ends
// in another, two clusters' children can share a name only when one
// cluster's name is the other's and a suffix, as cluster "bao-internal"
// and cluster "bao"'s headless Service: a cluster name that ends in one of
// these is refused (internal/admission).
func ChildNameSuffixes() []string {
	return []string{
		SuffixHeadlessService, SuffixConfigMap, SuffixServiceRegistration, SuffixUpgradeServiceAccount,
		SuffixBackupServiceAccount, SuffixRestoreServiceAccount, SuffixDrillServiceAccount, SuffixTLSCA, SuffixTLSServer,
		SuffixUnsealKey, SuffixSelfInit, SuffixRootToken, SuffixBackupProvenance, SuffixRecoveryKeys, SuffixRead,
	}
}

// ClientServiceName is the Service clients use; it routes to every server
// that serves clients (standbys forward to the active one; with ACME, to
// the active server only).
func (c *OpenBaoCluster) ClientServiceName() string { return c.Name }

// ClientServiceDNSName is the client Service's name inside the cluster; the
// server certificate holds it, and the operator reaches the active server
// through it.
func (c *OpenBaoCluster) ClientServiceDNSName() string {
	return fmt.Sprintf("%s.%s.svc", c.ClientServiceName(), c.Namespace)
}

// HeadlessServiceName is the StatefulSet's governing Service, which gives each
// server a stable DNS name.
func (c *OpenBaoCluster) HeadlessServiceName() string { return c.Name + SuffixHeadlessService }

// StatefulSetName is the StatefulSet that runs the servers.
func (c *OpenBaoCluster) StatefulSetName() string { return c.Name }

// ConfigMapName holds config.hcl.
func (c *OpenBaoCluster) ConfigMapName() string { return c.Name + SuffixConfigMap }

// ServiceAccountName is the identity of the OpenBao pods.
func (c *OpenBaoCluster) ServiceAccountName() string { return c.Name }

// ServiceRegistrationRoleName lets OpenBao label its own pods.
func (c *OpenBaoCluster) ServiceRegistrationRoleName() string {
	return c.Name + SuffixServiceRegistration
}

// TLSCASecretName holds the CA certificate (and, when operator-managed, key).
func (c *OpenBaoCluster) TLSCASecretName() string { return c.Name + SuffixTLSCA }

// TLSServerSecretName holds the servers' certificate and key.
func (c *OpenBaoCluster) TLSServerSecretName() string { return c.Name + SuffixTLSServer }

// ServingSecretName is the Secret whose tls.crt and tls.key the servers
// serve: the user's spec.tls.external.serverSecretRef in External mode,
// else TLSServerSecretName.
func (c *OpenBaoCluster) ServingSecretName() string {
	if ext := c.externalTLS(); ext != nil {
		return ext.ServerSecretRef.Name
	}
	return c.TLSServerSecretName()
}

// TrustedCASecretName is the Secret whose ca.crt the servers' clients
// (the operator, the joining servers, the backup Jobs, Prometheus) trust:
// the user's server Secret in External mode, as cert-manager writes the
// issuing CA beside the certificate, else TLSCASecretName.
func (c *OpenBaoCluster) TrustedCASecretName() string {
	if ext := c.externalTLS(); ext != nil {
		return ext.ServerSecretRef.Name
	}
	return c.TLSCASecretName()
}

func (c *OpenBaoCluster) externalTLS() *ExternalTLSSpec {
	if c.Spec.TLS.Mode != TLSModeExternal || c.Spec.TLS.External == nil {
		return nil
	}
	return c.Spec.TLS.External
}

// UnsealKeySecretName holds the static seal key.
func (c *OpenBaoCluster) UnsealKeySecretName() string { return c.Name + SuffixUnsealKey }

// SelfInitSecretName holds the self-init requests (self-init.hcl) until the
// cluster is initialized.
func (c *OpenBaoCluster) SelfInitSecretName() string { return c.Name + SuffixSelfInit }

// RootTokenSecretName holds the root token from sys/init.
func (c *OpenBaoCluster) RootTokenSecretName() string { return c.Name + SuffixRootToken }

// BackupProvenanceSecretName holds the key that signs the names of the
// cluster's snapshots (internal/backup, Prover).
func (c *OpenBaoCluster) BackupProvenanceSecretName() string {
	return BackupProvenanceSecretNameOf(c.Name)
}

// BackupProvenanceSecretNameOf is BackupProvenanceSecretName of the
// cluster of that name: a restore reads its source cluster's.
func BackupProvenanceSecretNameOf(cluster string) string { return cluster + SuffixBackupProvenance }

// RecoveryKeysSecretName holds the recovery key shares from sys/init,
// each encrypted to one of the PGP keys of spec.rootToken.recoveryKeys.
func (c *OpenBaoCluster) RecoveryKeysSecretName() string { return c.Name + SuffixRecoveryKeys }

// PodName is the name of the server with the given ordinal.
func (c *OpenBaoCluster) PodName(ordinal int) string {
	return fmt.Sprintf("%s-%d", c.StatefulSetName(), ordinal)
}

// MaxReplicas is the largest spec.replicas the API accepts (its
// +kubebuilder:validation:Maximum).
const MaxReplicas = 11

// PodNames are the names of every server the cluster may ever run:
// ordinals 0 to MaxReplicas-1. The servers' service-registration Role
// lets them label these pods and no other; naming all of them, not only
// the current replicas, keeps the Role the same across a scale-up or
// scale-down, so no server is ever without its grant while the two move.
// No other StatefulSet or cluster can make a pod of these names: another
// cluster's pods are <its name>-<ordinal>, and the last dash-separated
// part of a pod name is its ordinal.
func (c *OpenBaoCluster) PodNames() []string {
	names := make([]string, MaxReplicas)
	for i := range names {
		names[i] = c.PodName(i)
	}
	return names
}

// ReadStatefulSetName runs the read replicas (spec.readReplicas).
func (c *OpenBaoCluster) ReadStatefulSetName() string { return c.Name + SuffixRead }

// ReadServiceName is the Service that routes to the read replicas.
func (c *OpenBaoCluster) ReadServiceName() string { return c.Name + SuffixRead }

// ReadServiceDNSName is the read Service's name inside the cluster; the
// server certificate holds it.
func (c *OpenBaoCluster) ReadServiceDNSName() string {
	return fmt.Sprintf("%s.%s.svc", c.ReadServiceName(), c.Namespace)
}

// ReadHeadlessServiceName gives each read replica a stable DNS name.
func (c *OpenBaoCluster) ReadHeadlessServiceName() string {
	return c.ReadStatefulSetName() + SuffixHeadlessService
}

// ReadConfigMapName holds the read replicas' config.hcl, which joins Raft
// as a non-voter.
func (c *OpenBaoCluster) ReadConfigMapName() string { return c.ReadStatefulSetName() + SuffixConfigMap }

// ReadPodName is the name, and the Raft node id, of the read replica with
// the given ordinal.
func (c *OpenBaoCluster) ReadPodName(ordinal int) string {
	return fmt.Sprintf("%s-%d", c.ReadStatefulSetName(), ordinal)
}

// ReadPodNames are the names of every read replica the cluster may run,
// which the service-registration Role lets the servers label (see
// PodNames) while read replicas are rendered.
func (c *OpenBaoCluster) ReadPodNames() []string {
	names := make([]string, MaxReadReplicas)
	for i := range names {
		names[i] = c.ReadPodName(i)
	}
	return names
}

// ReadPodSelectorLabels select the read replicas. Their instance label is
// the read StatefulSet's name, so that no selector of the voters (their
// StatefulSet's, the Services', the PDB's, auto_join's) matches them.
func (c *OpenBaoCluster) ReadPodSelectorLabels() map[string]string {
	return map[string]string{LabelAppName: AppName, LabelAppInstance: c.ReadStatefulSetName()}
}

// DataVolumeName is the claim the StatefulSet makes for the Raft data of
// the server with the given ordinal (its volume claim template is "data").
func (c *OpenBaoCluster) DataVolumeName(ordinal int) string {
	return fmt.Sprintf("%s%d", DataVolumePrefix(c.StatefulSetName()), ordinal)
}

// DataVolumePrefix is what the claims of statefulSet's volume claim
// template "data" are named before their ordinal.
func DataVolumePrefix(statefulSet string) string { return "data-" + statefulSet + "-" }

// CreatedBefore says an object created at created is older than ref, at
// the whole seconds creation timestamps have: an object made in ref's
// second counts as not older.
func CreatedBefore(created, ref time.Time) bool { return created.Before(ref.Truncate(time.Second)) }

// PodDNSName is the stable in-cluster DNS name of the server with the given
// ordinal.
func (c *OpenBaoCluster) PodDNSName(ordinal int) string {
	return fmt.Sprintf("%s.%s.%s.svc", c.PodName(ordinal), c.HeadlessServiceName(), c.Namespace)
}

// Ports of every OpenBao server.
const (
	// APIPort is the API clients use, through the client Service.
	APIPort = 8200
	// ClusterPort carries Raft and request forwarding between the servers,
	// with TLS of OpenBao's own.
	ClusterPort = 8201
	// InternalListenerPort serves the API beside an ACME listener, with a
	// certificate from the operator's CA: no ACME CA issues the in-cluster
	// .svc names the operator, the joining servers and the backup Jobs
	// dial, so they cannot verify the ACME certificate.
	InternalListenerPort = 8202
	// MetricsListenerPort serves /v1/sys/metrics to Prometheus without a
	// token while the cluster's ServiceMonitor is on
	// (spec.monitoring.serviceMonitor.enabled); the API port keeps asking
	// for one.
	MetricsListenerPort = 8204
)

// InternalAPIPort is where the operator, the servers' Raft joins, the
// probes and the backup and restore Jobs reach the API: the internal
// listener with ACME, else the API port, whose certificate then chains to
// the cluster's CA.
func (c *OpenBaoCluster) InternalAPIPort() int {
	if c.Spec.TLS.Mode == TLSModeACME {
		return InternalListenerPort
	}
	return APIPort
}

// PodAPIAddress is the URL of the API of the server with the given
// ordinal at its stable name, on InternalAPIPort.
func (c *OpenBaoCluster) PodAPIAddress(ordinal int) string {
	return fmt.Sprintf("https://%s:%d", c.PodDNSName(ordinal), c.InternalAPIPort())
}

// PodOrdinalAt is the ordinal of the server whose PodAPIAddress is
// address, exactly: sys/leader names the active server by the address it
// advertises, and the operator sends a token only to one of its own
// cluster's. False for any other address, another cluster's server or
// one past MaxReplicas included.
func (c *OpenBaoCluster) PodOrdinalAt(address string) (int, bool) {
	rest, ok := strings.CutPrefix(address, "https://"+c.StatefulSetName()+"-")
	if !ok {
		return 0, false
	}
	digits, _, _ := strings.Cut(rest, ".")
	ordinal, err := strconv.Atoi(digits)
	if err != nil || ordinal < 0 || ordinal >= MaxReplicas || c.PodAPIAddress(ordinal) != address {
		return 0, false
	}
	return ordinal, true
}

// InternalServiceAddress is the client Service's URL on InternalAPIPort:
// the active server, for the operator and the backup Jobs.
func (c *OpenBaoCluster) InternalServiceAddress() string {
	return fmt.Sprintf("https://%s:%d", c.ClientServiceDNSName(), c.InternalAPIPort())
}

// Labels that select the cluster's server pods: the StatefulSet's selector,
// the Services', the PDB's and OpenBao's auto_join. They never change.
const (
	LabelAppName     = "app.kubernetes.io/name"
	LabelAppInstance = "app.kubernetes.io/instance"
	// AppName is LabelAppName's value on every OpenBao server pod.
	AppName = "openbao"
)

// PodSelectorLabels select the cluster's server pods.
func (c *OpenBaoCluster) PodSelectorLabels() map[string]string {
	return map[string]string{LabelAppName: AppName, LabelAppInstance: c.Name}
}

// PodLabelSelector is PodSelectorLabels as a selector string, in a fixed
// order: config.hcl carries it, and a reordering would roll every pod.
func (c *OpenBaoCluster) PodLabelSelector() string {
	return LabelAppName + "=" + AppName + "," + LabelAppInstance + "=" + c.Name
}

// Kind is the API kind of OpenBaoCluster.
const Kind = "OpenBaoCluster"

// ControllerReference makes c the controller of a child: garbage-collected
// with it, and deleted before it in a foreground deletion.
func (c *OpenBaoCluster) ControllerReference() metav1.OwnerReference {
	return *metav1.NewControllerRef(c, GroupVersion.WithKind(Kind))
}

// backupTimeLayout writes times into backup names: sortable, UTC, and
// valid in a DNS label.
const backupTimeLayout = "20060102-150405"

// BackupJobName is the Job of a backup that starts at t:
// backup-<cluster>-<YYYYMMDD-hhmmss>, shortened with a hash to stay a
// valid label value (63 characters).
func (c *OpenBaoCluster) BackupJobName(t time.Time) string {
	return boundedName("backup-"+c.Name+"-"+t.UTC().Format(backupTimeLayout), maxLabelValue)
}

// ScheduledBackupName is the OpenBaoBackup the schedule creates for the
// slot at t. One slot has one name, so a slot is never taken twice.
func (c *OpenBaoCluster) ScheduledBackupName(t time.Time) string {
	return boundedName(c.Name+"-"+t.UTC().Format(backupTimeLayout), maxLabelValue)
}

// PreUpgradeBackupName is the OpenBaoBackup a rollout to the StatefulSet
// revision takes before its first pod: one per revision, so a restarted
// operator finds it again.
func (c *OpenBaoCluster) PreUpgradeBackupName(revision string) string {
	hash := strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, strings.ToLower(strings.TrimPrefix(revision, c.StatefulSetName()+"-")))
	return boundedName(c.Name+"-pre-upgrade-"+hash, maxLabelValue)
}

// maxLabelValue is the longest label value; a Job's name becomes one on its pods.
const maxLabelValue = 63

// boundedName returns name when it fits max, else its head and a hash of
// the whole, so that distinct long names stay distinct.
func boundedName(name string, max int) string {
	if len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	head := strings.TrimRight(name[:max-9], "-")
	return head + "-" + hex.EncodeToString(sum[:4])
}

// Labels on what the backup machinery creates.
const (
	// LabelBackup names the OpenBaoBackup a Job and its pod belong to.
	LabelBackup = "openbao.org/backup"
	// LabelBackupTrigger is "schedule" on OpenBaoBackups the schedule created.
	LabelBackupTrigger = "openbao.org/backup-trigger"
	// BackupTriggerSchedule is LabelBackupTrigger's value.
	BackupTriggerSchedule = "schedule"
	// BackupTriggerPreUpgrade marks the snapshot a rollout takes before
	// its first pod (spec.upgrade.preUpgradeSnapshot).
	BackupTriggerPreUpgrade = "pre-upgrade"
	// LabelComponent is the standard component label; backup pods carry
	// ComponentBackup.
	LabelComponent  = "app.kubernetes.io/component"
	ComponentBackup = "backup"
)

// BackupKind is the API kind of OpenBaoBackup.
const BackupKind = "OpenBaoBackup"

// ControllerReference makes b the controller of its Job.
func (b *OpenBaoBackup) ControllerReference() metav1.OwnerReference {
	return *metav1.NewControllerRef(b, GroupVersion.WithKind(BackupKind))
}
