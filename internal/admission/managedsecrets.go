package admission

import (
	"fmt"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/openbao/operator/api/v1alpha1"
)

// RuleManagedSecret is the name the managed-Secret rule goes by in
// refusals and conditions.
const RuleManagedSecret = "operator-managed Secrets are never credentials"

// ReasonManagedSecretReferenced is the Degraded reason (and a backup's or
// restore's failure reason) of a spec that breaks the rule.
const ReasonManagedSecretReferenced = "ManagedSecretReferenced"

// ManagedSecretSuffixes end the names of the Secrets the operator writes
// for every cluster (api/v1alpha1/names.go): its root token, static seal
// key, CA, server certificate, self-init requests, backup provenance
// key (a spec naming it would hand the key that signs snapshot names to an
// image of its author's choice) and encrypted recovery keys. A Secret of
// any cluster so named, existing or not, is the operator's.
func ManagedSecretSuffixes() []string {
	return []string{
		v1alpha1.SuffixRootToken, v1alpha1.SuffixUnsealKey, v1alpha1.SuffixTLSCA, v1alpha1.SuffixTLSServer,
		v1alpha1.SuffixSelfInit, v1alpha1.SuffixBackupProvenance, v1alpha1.SuffixRecoveryKeys,
	}
}

// ManagedObserved is what the rule needs beyond the spec.
type ManagedObserved struct {
	// Labelled are the referenced Secrets that carry the operator's
	// managed-by label. The controller always reads them; the webhook
	// reads them when its rights allow.
	Labelled map[string]bool
	// Exempt is the one reference the operator itself made: the seal key
	// of the source in the spec of a restore drill's copy (DrillCopyKey).
	Exempt *Ref
}

// ManagedSecretRefs is the rule: no spec may name, as a credential, CA or
// key to use, a Secret the operator manages for any cluster. Such a
// Secret holds a root token, a seal key or a private key; naming it hands
// it, with the operator's rights, to an image or a cluster the spec's
// author chose (spec.backup.executorImage with credentialsSecretRef
// prod-root-token; a copy of prod's seal key into a cluster of the
// author's image). Those who may read it can copy what they need into a
// Secret of their own. The webhook and the controller both call it.
func ManagedSecretRefs(refs []Ref, o ManagedObserved) field.ErrorList {
	var errs field.ErrorList
	for _, r := range refs {
		if r.Kind != KindSecret || (o.Exempt != nil && sameRef(*o.Exempt, r)) {
			continue
		}
		why := ""
		if s := suffixOf(r.Name, ManagedSecretSuffixes()); s != "" {
			why = "its name ends in " + s + ", as the operator names a cluster's"
		}
		if why == "" && o.Labelled[r.Name] {
			why = fmt.Sprintf("it carries %s=%s", v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue)
		}
		if why == "" {
			continue
		}
		errs = append(errs, field.Forbidden(r.Path, fmt.Sprintf("rule %q: Secret %s is managed by the operator (%s); "+
			"a spec may not name the root token, seal key, TLS keys, self-init requests or backup provenance key of any cluster. "+
			"Copy what you need into a Secret of your own, whose name ends in none of %s",
			RuleManagedSecret, r.Name, why, strings.Join(ManagedSecretSuffixes(), ", "))))
	}
	return errs
}

// DrillCopyKey is the reference the operator made in the spec of source's
// restore-drill copy cp (backup.DrillCopyFor): its fromBackup names the
// source's own seal key. It is nil unless cp is that copy: named and
// labelled as the copy, controlled by source (by UID), and running only
// what the source runs, so that the key goes nowhere the source's own
// spec does not send it: the source's image, version, seal and values,
// and no backup of its own, whose store could carry the restored data
// away.
func DrillCopyKey(cp, source *v1alpha1.OpenBaoCluster) *Ref {
	fb := cp.FromBackup()
	switch {
	case source == nil || fb == nil || fb.UnsealKeySecretRef == nil:
		return nil
	case cp.Name != source.DrillCopyName() || cp.Labels[v1alpha1.LabelDrillOf] != source.Name,
		!metav1.IsControlledBy(cp, source), fb.SourceCluster != source.Name,
		fb.UnsealKeySecretRef.Name != source.UnsealKeySecretName(),
		fb.UnsealKeySecretRef.KeyOr(v1alpha1.DefaultUnsealKeyKey) != v1alpha1.DefaultUnsealKeyKey:
		return nil
	case cp.Spec.Image != source.Spec.Image || cp.Spec.Version != source.Spec.Version || cp.Spec.Backup != nil,
		!apiequality.Semantic.DeepEqual(cp.Spec.Unseal, source.Spec.Unseal),
		cp.Spec.Values != nil && !apiequality.Semantic.DeepEqual(cp.Spec.Values, source.Spec.Values):
		return nil
	}
	return &Ref{Path: specPath.Child("bootstrap", "fromBackup", "unsealKeySecretRef"), Kind: KindSecret, Name: fb.UnsealKeySecretRef.Name}
}
