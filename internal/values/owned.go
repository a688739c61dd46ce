package values

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/delegated"
	"github.com/openbao/operator/internal/upgrade"
)

func ownedValues(in Input, op Operator, cfg Config) (map[string]any, error) {
	c := in.Cluster
	scheduling, err := schedulingValues(c)
	if err != nil {
		return nil, err
	}
	network, err := networkPolicyValues(c)
	if err != nil {
		return nil, err
	}
	read, err := readReplicaValues(in, cfg)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"readReplicas": read,
		"cluster":      clusterValues(c, in.Initialized, in.ReadReplicas != nil, in.Restart),
		"operator":     operatorValues(op),
		"wrapper":      wrapperValues(op),
		"replicas":     int64(in.Replicas),
		"partition":    int64(in.Partition),
		"image":        imageValues(in.Image),
		"config": map[string]any{
			"hcl": cfg.HCL, "checksum": cfg.Checksum,
		},
		"tls":                                  tlsValues(c),
		"seal":                                 sealValues(c),
		"storage":                              storageValues(c, in.ClaimTemplateSize),
		"scheduling":                           scheduling,
		"service":                              serviceValues(c, in.FormingFromSnapshot),
		"serviceAccount":                       serviceAccountValues(c),
		"ingress":                              ingressValues(c),
		"gateway":                              gatewayValues(c),
		"networkPolicy":                        network,
		"backup":                               backupValues(c),
		"persistentVolumeClaimRetentionPolicy": pvcRetention(c),
	}, nil
}

// schedulingValues never holds null: Helm deletes null-valued keys when it
// coalesces values, and the strict engine then fails on the missing key.
func schedulingValues(c *v1alpha1.OpenBaoCluster) (map[string]any, error) {
	return schedulingOf(c.Spec.PriorityClassName, c.Spec.Resources, c.Spec.Affinity, c.Spec.NodeSelector,
		c.Spec.Tolerations, c.Spec.TopologySpreadConstraints)
}

func schedulingOf(priorityClass string, resources, affinity, nodeSelector, tolerations, spread any) (map[string]any, error) {
	out := map[string]any{"priorityClassName": priorityClass}
	fields := []struct {
		key   string
		value any
		empty any
	}{
		{"resources", resources, map[string]any{}},
		{"affinity", affinity, map[string]any{}},
		{"nodeSelector", nodeSelector, map[string]any{}},
		{"tolerations", tolerations, []any{}},
		{"topologySpreadConstraints", spread, []any{}},
	}
	for _, f := range fields {
		v, err := toValue(f.value)
		if err != nil {
			return nil, err
		}
		if v == nil {
			v = f.empty
		}
		out[f.key] = v
	}
	return out, nil
}

func operatorValues(op Operator) map[string]any {
	return map[string]any{"namespace": op.Namespace, "openshift": op.OpenShift}
}

// wrapperValues name the bao-wrapper image, and not the operator's: an
// operator upgrade then leaves every OpenBao pod template as it was.
func wrapperValues(op Operator) map[string]any {
	vals := map[string]any{}
	if op.WrapperImage != "" {
		vals["image"] = op.WrapperImage // else the chart's default
	}
	return vals
}

// clusterValues: with read replicas the servers may label the read pods
// too, and the read selector is set; restartRequest is set only once a
// restart was handled, so that the values of a cluster never restarted
// stay as they were.
func clusterValues(c *v1alpha1.OpenBaoCluster, initialized, read bool, restart string) map[string]any {
	pods := c.PodNames()
	readSelector := map[string]any{}
	if read {
		pods = append(pods, c.ReadPodNames()...)
		readSelector = stringMap(c.ReadPodSelectorLabels())
	}
	vals := map[string]any{
		"name": c.Name, "generation": strconv.FormatInt(c.Generation, 10), "names": childNames(c), "podNames": stringList(pods), "initialized": initialized,
		"selectorLabels": stringMap(c.PodSelectorLabels()), "readSelectorLabels": readSelector, "clientServiceDNSName": c.ClientServiceDNSName(),
		"metricsListener": MetricsListener(c), "standby": c.StandingBy(),
	}
	if restart != "" {
		vals["restartRequest"] = restart
	}
	return vals
}

// readReplicaValues: the read StatefulSet's count, configuration and
// scheduling; enabled false renders none of the read objects. Unset
// resources take the servers'; scheduling fields do not, since read
// replicas are often placed apart from the voters.
func readReplicaValues(in Input, cfg Config) (map[string]any, error) {
	c := in.Cluster
	if in.ReadReplicas == nil {
		return map[string]any{"enabled": false}, nil
	}
	spec := c.Spec.ReadReplicas
	if spec == nil {
		spec = &v1alpha1.ReadReplicasSpec{} // draining after spec.readReplicas was removed
	}
	resources := c.Spec.Resources
	if spec.Resources != nil {
		resources = *spec.Resources
	}
	scheduling, err := schedulingOf(c.Spec.PriorityClassName, resources, spec.Affinity, spec.NodeSelector,
		spec.Tolerations, spec.TopologySpreadConstraints)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"enabled": true, "replicas": int64(*in.ReadReplicas), "standbyReads": c.StandbyReadsOn(),
		// Closed to clients while the cluster is formed from another's
		// snapshot (see serviceValues).
		"closed": in.FormingFromSnapshot,
		"config": map[string]any{"hcl": cfg.ReadHCL, "checksum": cfg.ReadChecksum}, "scheduling": scheduling,
	}, nil
}

func childNames(c *v1alpha1.OpenBaoCluster) map[string]any {
	return map[string]any{
		"statefulSet":           c.StatefulSetName(),
		"headlessService":       c.HeadlessServiceName(),
		"clientService":         c.ClientServiceName(),
		"configMap":             c.ConfigMapName(),
		"serviceAccount":        c.ServiceAccountName(),
		"upgradeServiceAccount": c.UpgradeServiceAccountName(),
		"backupServiceAccount":  c.BackupServiceAccountName(),
		"restoreServiceAccount": c.RestoreServiceAccountName(),
		"drillServiceAccount":   c.DrillServiceAccountName(),
		"role":                  c.ServiceRegistrationRoleName(),
		"tlsCASecret":           c.TrustedCASecretName(),
		"tlsServerSecret":       c.ServingSecretName(),
		"unsealKeySecret":       c.UnsealKeySecretName(),
		"selfInitSecret":        c.SelfInitSecretName(),
		"readStatefulSet":       c.ReadStatefulSetName(),
		"readService":           c.ReadServiceName(),
		"readHeadlessService":   c.ReadHeadlessServiceName(),
		"readConfigMap":         c.ReadConfigMapName(),
	}
}

func imageValues(img Image) map[string]any {
	return map[string]any{"repository": img.Repository, "tag": img.Tag, "digest": img.Digest, "pullPolicy": "IfNotPresent"}
}

// tlsValues name the Secret the chart mounts at ACMECAFile's directory,
// with its key as ca.crt; empty without one.
func tlsValues(c *v1alpha1.OpenBaoCluster) map[string]any {
	ca := map[string]any{"secret": "", "key": ""}
	if acme := c.Spec.TLS.ACME; tlsMode(c) == v1alpha1.TLSModeACME && acme != nil && acme.CASecretRef != nil {
		ca["secret"], ca["key"] = acme.CASecretRef.Name, acme.CASecretRef.KeyOr(v1alpha1.DefaultCAKey)
	}
	return map[string]any{"mode": string(tlsMode(c)), "acmeCA": ca}
}

func tlsMode(c *v1alpha1.OpenBaoCluster) v1alpha1.TLSMode {
	if c.Spec.TLS.Mode == "" {
		return v1alpha1.TLSModeOperatorManaged
	}
	return c.Spec.TLS.Mode
}

func sealType(c *v1alpha1.OpenBaoCluster) v1alpha1.UnsealType {
	if c.Spec.Unseal.Type == "" {
		return v1alpha1.UnsealStatic
	}
	return c.Spec.Unseal.Type
}

func sealValues(c *v1alpha1.OpenBaoCluster) map[string]any {
	creds := ""
	if ref := c.Spec.Unseal.CredentialsSecretRef; ref != nil {
		creds = ref.Name
	}
	return map[string]any{"type": string(sealType(c)), "credentialsSecret": creds}
}

func storageValues(c *v1alpha1.OpenBaoCluster, templateSize string) map[string]any {
	size := "10Gi"
	if !c.Spec.Storage.Size.IsZero() {
		size = c.Spec.Storage.Size.String()
	}
	if templateSize != "" {
		size = templateSize
	}
	class := ""
	if c.Spec.Storage.StorageClassName != nil {
		class = *c.Spec.Storage.StorageClassName
	}
	return map[string]any{"size": size, "storageClassName": class}
}

func serviceValues(c *v1alpha1.OpenBaoCluster, formingFromSnapshot bool) map[string]any {
	svcType := string(c.Spec.Service.Type)
	if svcType == "" {
		svcType = "ClusterIP"
	}
	// With ACME each server orders its own certificate, and a tls-alpn-01
	// challenge must reach the server that ordered: the active one. A
	// cluster formed from another's snapshot routes to the active server
	// until that restore completed: for seconds after the upload, OpenBao
	// (2.4) has the standbys name the source's active server and forward
	// to it, while the active server serves nothing until the restore
	// ends.
	standbys := tlsMode(c) != v1alpha1.TLSModeACME && upgrade.StandbysForwardEveryRequest(c.Spec.Version) && !formingFromSnapshot
	return map[string]any{"type": svcType, "annotations": stringMap(c.Spec.Service.Annotations), "routesToStandbys": standbys}
}

func ingressValues(c *v1alpha1.OpenBaoCluster) map[string]any {
	in := c.Spec.Ingress
	if in == nil || !in.Enabled {
		return map[string]any{"enabled": false}
	}
	class := ""
	if in.ClassName != nil {
		class = *in.ClassName
	}
	return map[string]any{
		"enabled": true, "className": class, "host": in.Host,
		"tlsSecretName": in.TLSSecretName, "annotations": stringMap(in.Annotations),
	}
}

func gatewayValues(c *v1alpha1.OpenBaoCluster) map[string]any {
	gw := c.Spec.Gateway
	if gw == nil || !gw.Enabled {
		return map[string]any{"enabled": false}
	}
	refs := make([]any, 0, len(gw.ParentRefs))
	for _, ref := range gw.ParentRefs {
		refs = append(refs, map[string]any{"name": ref.Name, "namespace": ref.Namespace, "sectionName": ref.SectionName})
	}
	hosts := make([]any, 0, len(gw.Hostnames))
	for _, h := range gw.Hostnames {
		hosts = append(hosts, h)
	}
	return map[string]any{"enabled": true, "parentRefs": refs, "hostnames": hosts}
}

func networkPolicyValues(c *v1alpha1.OpenBaoCluster) (map[string]any, error) {
	np := c.Spec.NetworkPolicy
	enabled := np.Enabled == nil || *np.Enabled
	clients, err := toValue(np.APIClients)
	if err != nil {
		return nil, err
	}
	if clients == nil {
		clients = []any{}
	}
	return map[string]any{"enabled": enabled, "apiClients": clients}, nil
}

// pvcRetention keeps the volumes when the StatefulSet goes: the operator's
// finalizer deletes them in order, after the servers stopped, as the
// deletion policy at that moment says. A peer removed by a scale-down
// leaves its volume as the deletion policy leaves every volume (until a
// scale-up needs the ordinal again: internal/membership).
func pvcRetention(c *v1alpha1.OpenBaoCluster) map[string]any {
	scaled := "Retain"
	if c.Spec.DeletionPolicy.DeletesVolumes() {
		scaled = "Delete"
	}
	return map[string]any{"whenDeleted": "Retain", "whenScaled": scaled}
}

func stringList(l []string) []any {
	out := make([]any, len(l))
	for i, v := range l {
		out[i] = v
	}
	return out
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// toValue converts typed API structs into the JSON-shaped values the chart
// engine expects, dropping empty fields the same way the API server does.
func toValue(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode values: %w", err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("decode values: %w", err)
	}
	return out, nil
}

// backupValues: enabled turns on the backup alerts; jobs renders the
// ServiceAccount and network access of the executor's Jobs, which a
// cluster bootstrapped from a backup needs for its restore even without
// spec.backup.
func backupValues(c *v1alpha1.OpenBaoCluster) map[string]any {
	annotations := map[string]any{}
	if c.Spec.Backup != nil {
		annotations = stringMap(c.Spec.Backup.ServiceAccount.Annotations)
	}
	return map[string]any{
		"enabled": c.Spec.Backup != nil, "jobs": c.Spec.Backup != nil || c.FromBackup() != nil,
		"serviceAccount": map[string]any{"annotations": annotations},
	}
}

// serviceAccountValues: the servers' ServiceAccount annotations
// (delegated.Outside checked them) and the pod labels their workload
// identity needs.
func serviceAccountValues(c *v1alpha1.OpenBaoCluster) map[string]any {
	a := c.Spec.ServiceAccount.Annotations
	return map[string]any{"annotations": stringMap(a), "podLabels": stringMap(delegated.PodLabels(a))}
}
