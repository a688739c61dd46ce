// Package admission holds the decisions of the operator's validating
// webhook: what the CRD's schema and CEL rules cannot check (values of
// spec.config as OpenBao reads them, self-init request bodies, schedules
// that never fire, version changes against the running version, clusters
// a backup or restore names). Each rule calls the function the controller
// enforces the same decision with, so the webhook refuses nothing the
// controller would accept; the webhook only says so before anything is
// stored. It is pure: the caller reads the named cluster.
//
// Values of spec.config and self-init bodies are never echoed: the
// messages name the key path instead, as a body may hold a secret.
//
// On update, a field is checked only when its value changed, so that an
// object stored before a rule existed can still be relabelled, have its
// finalizer removed, or be fixed one field at a time.
package admission

import (
	"errors"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/baoconfig"
	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/internal/restore"
	"github.com/openbao/operator/internal/standby"
	"github.com/openbao/operator/internal/upgrade"
	"github.com/openbao/operator/internal/values"
)

// ValidateCluster checks a new cluster (old nil) or a change of old into c.
func ValidateCluster(old, c *v1alpha1.OpenBaoCluster) field.ErrorList {
	errs := validateName(old, c)
	errs = append(errs, validateConfig(old, c)...)
	errs = append(errs, validateSelfInit(old, c)...)
	errs = append(errs, validateSchedule(old, c)...)
	errs = append(errs, validateVersion(old, c)...)
	errs = append(errs, validateRootToken(old, c)...)
	errs = append(errs, validateTypedValues(c)...)
	errs = append(errs, validateLabels(c)...)
	errs = append(errs, validateStandbyReads(old, c)...)
	errs = append(errs, standby.Refused(c)...)
	errs = append(errs, validateFromBackup(old, c)...)
	return errs
}

// validateFromBackup refuses identity fields of spec.bootstrap.fromBackup
// that cannot be bound or logged in to after the restore, when it changed
// (restore.BootstrapRefused, which the fromBackup step holds the cluster to).
func validateFromBackup(old, c *v1alpha1.OpenBaoCluster) field.ErrorList {
	if old != nil && apiequality.Semantic.DeepEqual(old.FromBackup(), c.FromBackup()) {
		return nil
	}
	return restore.BootstrapRefused(c)
}

// validateLabels refuses a label the operator owns in spec.values or
// spec.monitoring.serviceMonitor.labels (values.CheckLabels, which Compute
// holds the cluster to).
func validateLabels(c *v1alpha1.OpenBaoCluster) field.ErrorList {
	var le *values.ProtectedLabelError
	if err := values.CheckLabels(c); errors.As(err, &le) {
		return field.ErrorList{field.Invalid(le.Path(), le.Key, le.Error())}
	}
	return nil
}

// validateStandbyReads refuses spec.readReplicas.standbyReads on a
// version whose standbys cannot serve reads, when either changed: the rule
// upgrade.StandbyReadsRefused, which the chart values hold the cluster to.
func validateStandbyReads(old, c *v1alpha1.OpenBaoCluster) field.ErrorList {
	if old != nil && old.Spec.Version == c.Spec.Version && old.StandbyReadsOn() == c.StandbyReadsOn() {
		return nil
	}
	if msg := upgrade.StandbyReadsRefused(c.Spec.Version, c.StandbyReadsOn()); msg != "" {
		return field.ErrorList{field.Invalid(specPath.Child("readReplicas", "standbyReads"), true, msg)}
	}
	return nil
}

// validateTypedValues refuses a spec.values key that a typed field sets
// too (values.CheckTypedOverlap, which Compute holds the cluster to).
func validateTypedValues(c *v1alpha1.OpenBaoCluster) field.ErrorList {
	var oe *values.TypedOverlapError
	if err := values.CheckTypedOverlap(c); errors.As(err, &oe) {
		return field.ErrorList{field.Invalid(specPath.Child("values", oe.Key), field.OmitValueType{}, oe.Error())}
	}
	return nil
}

// validateRootToken refuses spec.rootToken.policy Revoke, when it is set
// anew, on a cluster initialized without stored recovery keys: the rule
// bootstrap.RevokeRefusal, which the controller holds the revocation to.
func validateRootToken(old, c *v1alpha1.OpenBaoCluster) field.ErrorList {
	if c.RootTokenPolicyOf() != v1alpha1.RootTokenRevoke || old == nil || old.RootTokenPolicyOf() == v1alpha1.RootTokenRevoke {
		return nil
	}
	rt := old.Status.RootToken
	keys := rt != nil && rt.RecoveryShares > 0
	if msg := bootstrap.RevokeRefusal(old.Status.Initialized && !old.Status.SelfInitialized, keys, c.RecoveryKeysSecretName()); msg != "" {
		return field.ErrorList{field.Invalid(specPath.Child("rootToken", "policy"), string(v1alpha1.RootTokenRevoke), msg)}
	}
	return nil
}

var specPath = field.NewPath("spec")

// validateConfig checks each new or changed spec.config key as config.hcl
// is rendered from it (baoconfig.ValidateUser: each key, then the keys
// OpenBao checks against each other).
func validateConfig(old, c *v1alpha1.OpenBaoCluster) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(c.Spec.Config) {
		raw := c.Spec.Config[k]
		if old != nil {
			if prev, ok := old.Spec.Config[k]; ok && apiequality.Semantic.DeepEqual(prev, raw) {
				continue
			}
		}
		path := specPath.Child("config", k)
		v, err := values.DecodeConfigValue(raw.Raw)
		if err != nil {
			errs = append(errs, field.Invalid(path, field.OmitValueType{}, "not JSON: want "+baoconfig.ValueForms))
			continue
		}
		if err := baoconfig.ValidateUserKeys(map[string]any{k: v}); err != nil {
			errs = append(errs, field.Invalid(path, field.OmitValueType{}, reason(err)))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return validateLeaseTTLs(old, c)
}

// leaseKeys are the spec.config keys OpenBao checks against each other at
// start (baoconfig.CheckLeaseTTLs).
var leaseKeys = []string{"default_lease_ttl", "max_lease_ttl"}

// validateLeaseTTLs checks the lease TTLs against each other when either
// is new or changed, and names the one that changed (default_lease_ttl
// when both did).
func validateLeaseTTLs(old, c *v1alpha1.OpenBaoCluster) field.ErrorList {
	user, changed := map[string]any{}, ""
	for _, k := range leaseKeys {
		raw, ok := c.Spec.Config[k]
		if !ok {
			if _, had := configValue(old, k); had && changed == "" {
				changed = k // removed: OpenBao's default now applies
			}
			continue
		}
		v, err := values.DecodeConfigValue(raw.Raw)
		if err != nil {
			return nil // refused by validateConfig already
		}
		user[k] = v
		if prev, had := configValue(old, k); !had || !apiequality.Semantic.DeepEqual(prev, raw) {
			if changed == "" {
				changed = k
			}
		}
	}
	if changed == "" {
		return nil
	}
	if err := baoconfig.CheckLeaseTTLs(user); err != nil {
		return field.ErrorList{field.Invalid(specPath.Child("config", changed), field.OmitValueType{}, reason(err))}
	}
	return nil
}

// validateSelfInit checks new or changed self-init requests as the
// controller renders them before initialization; after it, the requests
// are never read again.
func validateSelfInit(old, c *v1alpha1.OpenBaoCluster) field.ErrorList {
	si := c.Spec.SelfInit
	if si == nil || !si.Enabled || (old != nil && old.Status.Initialized) {
		return nil
	}
	var errs field.ErrorList
	for i, r := range si.Requests {
		if unchangedRequest(old, r) {
			continue
		}
		path := specPath.Child("selfInit", "requests").Index(i)
		reqs, err := values.InitRequests([]v1alpha1.SelfInitRequest{r})
		if err != nil {
			errs = append(errs, field.Invalid(path.Child("data"), field.OmitValueType{},
				"must be a JSON object: the body of the request, as {\"key\": value}"))
			continue
		}
		if err := baoconfig.CheckInitRequest(reqs[0]); err != nil {
			errs = append(errs, field.Invalid(path, r.Name, reason(err)))
		}
	}
	return errs
}

func unchangedRequest(old *v1alpha1.OpenBaoCluster, r v1alpha1.SelfInitRequest) bool {
	if old == nil || old.Spec.SelfInit == nil {
		return false
	}
	for _, o := range old.Spec.SelfInit.Requests {
		if o.Name == r.Name {
			return apiequality.Semantic.DeepEqual(o, r)
		}
	}
	return false
}

// validateSchedule parses a new or changed schedule as the backup step
// does; what is left after the CRD's grammar rules is a schedule that
// never fires, which the controller would leave idle (InvalidSchedule).
func validateSchedule(old, c *v1alpha1.OpenBaoCluster) field.ErrorList {
	b := c.Spec.Backup
	if b == nil || b.Schedule == "" {
		return nil
	}
	if old != nil && old.Spec.Backup != nil && old.Spec.Backup.Schedule == b.Schedule {
		return nil
	}
	if _, err := backup.ParseSchedule(b.Schedule); err != nil {
		return field.ErrorList{field.Invalid(specPath.Child("backup", "schedule"), b.Schedule,
			err.Error()+"; want five fields (minute hour day-of-month month day-of-week, UTC) that some date matches, or one of "+
				strings.Join(backup.Descriptors, ", "))}
	}
	return nil
}

// validateVersion refuses a change of spec.version that the upgrade step
// would hold forever: a downgrade from the newest release the servers run
// or ran since the last rollout completed (status.currentVersion and
// status.highestVersion, which stays set mid-rollout) without
// spec.upgrade.allowDowngrade, or a release that cannot run the seal.
// Before any server reported a version there is nothing to compare with.
func validateVersion(old, c *v1alpha1.OpenBaoCluster) field.ErrorList {
	if old == nil || old.Spec.Version == c.Spec.Version ||
		upgrade.Reference(old.Status.CurrentVersion, old.Status.HighestVersion) == "" {
		return nil
	}
	seal := c.Spec.Unseal.Type
	if seal == "" {
		seal = v1alpha1.UnsealStatic
	}
	_, msg := upgrade.VersionRefused(old.Status.CurrentVersion, old.Status.HighestVersion, c.Spec.Version,
		c.Spec.Upgrade.AllowDowngrade, seal)
	if msg == "" {
		return nil
	}
	return field.ErrorList{field.Invalid(specPath.Child("version"), c.Spec.Version, msg)}
}

// configValue is key k of c's spec.config; c may be nil (a new cluster).
func configValue(c *v1alpha1.OpenBaoCluster, k string) (apiextensionsv1.JSON, bool) {
	if c == nil {
		return apiextensionsv1.JSON{}, false
	}
	v, ok := c.Spec.Config[k]
	return v, ok
}

// ValidateBackup checks a new OpenBaoBackup against the cluster it names
// (nil when it does not exist): the controller fails such a backup at once
// (ClusterNotFound, or backup.Configured), and waiting would not help.
func ValidateBackup(b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster) field.ErrorList {
	path := specPath.Child("clusterName")
	if c == nil {
		return field.ErrorList{notFound(path, b.Spec.ClusterName, b.Namespace)}
	}
	if check := backup.Configured(c); !check.OK {
		return field.ErrorList{field.Invalid(path, b.Spec.ClusterName,
			check.Message+": want a cluster whose spec.backup has a target")}
	}
	return nil
}

// ValidateRestore checks a new OpenBaoRestore against the cluster it names
// (nil when it does not exist), with the permanent part of the restore
// preflight (restore.Configured).
func ValidateRestore(r *v1alpha1.OpenBaoRestore, c *v1alpha1.OpenBaoCluster) field.ErrorList {
	path := specPath.Child("clusterName")
	if c == nil {
		return field.ErrorList{notFound(path, r.Spec.ClusterName, r.Namespace)}
	}
	check := restore.Configured(c, r)
	switch {
	case check.OK:
		return nil
	case check.Reason == restore.ReasonForceWithoutPreRestoreSnapshot:
		return field.ErrorList{field.Invalid(specPath.Child("force"), true, check.Message)}
	case check.Reason == restore.ReasonNoBootstrapSource:
		return field.ErrorList{field.Invalid(specPath.Child("source", "bootstrap"), true,
			check.Message+": want source.key or source.latest: true")}
	}
	return field.ErrorList{field.Invalid(path, r.Spec.ClusterName,
		check.Message+": want a cluster whose spec.backup has a target")}
}

func notFound(path *field.Path, name, namespace string) *field.Error {
	return field.Invalid(path, name, "no OpenBaoCluster of this name in namespace "+namespace+
		": want the name of an existing OpenBaoCluster in the same namespace")
}

// reason is a baoconfig refusal without its generic prefix.
func reason(err error) string {
	var ie *baoconfig.InputError
	if errors.As(err, &ie) {
		return ie.Reason
	}
	return err.Error()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
