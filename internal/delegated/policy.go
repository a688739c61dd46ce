// Package delegated holds the rule on spec fields the operator copies into
// objects it creates with its own rights (issue 34, item 8): the servers'
// scheduling (priorityClassName, tolerations, nodeSelector, node
// affinity) lands in Pods, spec.service.annotations in the client
// Service, spec.ingress's class and annotations in an Ingress, the
// serviceAccount annotations in the ServiceAccounts of the servers and of
// the backup and restore Jobs. A tenant
// who may edit OpenBaoClusters but not create Pods, Services or Ingresses
// would otherwise get, through the operator, a priority class, a dedicated
// node or a load balancer it could not ask for itself.
//
// A value passes when the platform's allow-list (set at install:
// --allowed-priority-classes and friends) holds it, or, at admission only,
// when a SubjectAccessReview says the author may create that kind in the
// namespace (they could then set it on an object of their own). The
// webhook and the controller ask Outside, word for word; only the webhook
// knows the author. The package is pure.
package delegated

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/openbao/operator/api/v1alpha1"
)

// Rule is the name the rule goes by in refusals.
const Rule = "the operator sets on its objects only what the platform allows or the author may set"

// Kind is the object a field ends up in, as a SubjectAccessReview names it.
type Kind struct {
	Group, Resource string
}

// The kinds a cluster's delegated fields land in.
var (
	Pods      = Kind{Resource: "pods"}
	Services  = Kind{Resource: "services"}
	Ingresses = Kind{Group: "networking.k8s.io", Resource: "ingresses"}
	// ServiceAccounts: spec.serviceAccount.annotations and
	// spec.backup.serviceAccount.annotations.
	ServiceAccounts = Kind{Resource: "serviceaccounts"}
)

// WorkloadIdentityKeys are the ServiceAccount annotations of the clouds'
// workload identities, allowed without the platform's list: each names a
// cloud identity whose own trust policy (an IAM role's trust, a Google
// service account's workloadIdentityUser binding, an Azure federated
// credential) names the namespace and ServiceAccount it admits, so the
// annotation grants a tenant only what the cloud grants that
// ServiceAccount already. The operator's own identity is never handed to
// a pod: the executor uses the pod's (objectstore.Config.AmbientIdentity).
var WorkloadIdentityKeys = []string{
	"azure.workload.identity/client-id",
	"azure.workload.identity/service-account-token-expiration",
	"azure.workload.identity/tenant-id",
	"eks.amazonaws.com/audience",
	"eks.amazonaws.com/role-arn",
	"eks.amazonaws.com/sts-regional-endpoints",
	"eks.amazonaws.com/token-expiration",
	"iam.gke.io/gcp-service-account",
}

// AzureClientIDKey is the annotation whose ServiceAccount's pods Azure
// Workload Identity's webhook mutates only when they carry
// AzureUseLabel=true.
const (
	AzureClientIDKey = "azure.workload.identity/client-id"
	AzureUseLabel    = "azure.workload.identity/use"
)

// PodLabels are the labels the pods of a ServiceAccount with annotations
// a need for its workload identity: Azure's webhook acts only on pods
// labelled so.
func PodLabels(a map[string]string) map[string]string {
	if _, ok := a[AzureClientIDKey]; ok {
		return map[string]string{AzureUseLabel: "true"}
	}
	return map[string]string{}
}

func (k Kind) String() string {
	if k.Group == "" {
		return k.Resource
	}
	return k.Resource + "." + k.Group
}

// Policy is the platform's allow-list. Empty lists allow nothing without
// the author's own right: the safe default.
type Policy struct {
	PriorityClasses    []string // exact names
	TolerationKeys     []string // exact taint keys; a toleration without a key tolerates every taint
	NodeSelectorKeys   []string // exact node label keys, of nodeSelector and node affinity
	AnnotationPrefixes []string // Service and Ingress annotation keys start with one
	IngressClasses     []string // exact ingressClassName
}

// ParseList reads a comma-separated list, trimmed, without empty entries.
func ParseList(list string) []string {
	var out []string
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Finding is one value outside the allow-list: the field that sets it,
// the kind it lands in, and what the platform allows there.
type Finding struct {
	Path    *field.Path
	Kind    Kind
	Value   string
	Allowed []string
	// Flag is the operator flag that sets the allow-list, for messages.
	Flag string
}

// Error is the refusal of f. user is the author the webhook asked about,
// empty for the controller, which does not know the author.
func (f Finding) Error(user string) *field.Error {
	allowed := "none"
	if len(f.Allowed) > 0 {
		allowed = strings.Join(f.Allowed, ", ")
	}
	who := "the author"
	if user != "" {
		who = user
	}
	return field.Forbidden(f.Path, fmt.Sprintf("rule %q: %q is not in the platform's %s (allowed: %s), and %s may not create %s "+
		"in this namespace, which the operator would do for it with its own rights",
		Rule, f.Value, f.Flag, allowed, who, f.Kind))
}

var spec = field.NewPath("spec")

// Outside lists every value of c's delegated fields that the allow-list
// does not hold, in the order of the spec.
func (p Policy) Outside(c *v1alpha1.OpenBaoCluster) []Finding {
	var out []Finding
	s := &c.Spec
	if s.PriorityClassName != "" && !slices.Contains(p.PriorityClasses, s.PriorityClassName) {
		out = append(out, Finding{spec.Child("priorityClassName"), Pods, s.PriorityClassName, p.PriorityClasses, "--allowed-priority-classes"})
	}
	for i, t := range s.Tolerations {
		if !slices.Contains(p.TolerationKeys, t.Key) {
			v := t.Key
			if v == "" {
				v = "(every taint)"
			}
			out = append(out, Finding{spec.Child("tolerations").Index(i).Child("key"), Pods, v, p.TolerationKeys, "--allowed-toleration-keys"})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.NodeSelector)) {
		if !slices.Contains(p.NodeSelectorKeys, k) {
			out = append(out, Finding{spec.Child("nodeSelector").Key(k), Pods, k, p.NodeSelectorKeys, "--allowed-node-selector-keys"})
		}
	}
	out = append(out, p.nodeAffinity(s.Affinity)...)
	for _, k := range slices.Sorted(maps.Keys(s.Service.Annotations)) {
		if !hasPrefix(p.AnnotationPrefixes, k) {
			out = append(out, Finding{spec.Child("service", "annotations").Key(k), Services, k, p.AnnotationPrefixes, "--allowed-annotation-prefixes"})
		}
	}
	out = append(out, p.ingress(s.Ingress)...)
	out = append(out, p.serviceAccount(spec.Child("serviceAccount", "annotations"), s.ServiceAccount.Annotations)...)
	if s.Backup != nil {
		out = append(out, p.serviceAccount(spec.Child("backup", "serviceAccount", "annotations"), s.Backup.ServiceAccount.Annotations)...)
	}
	return out
}

// serviceAccount: the annotations of a ServiceAccount the operator
// creates. A key other than a workload identity's could steer another
// system that reads ServiceAccounts (a mutating webhook, a secret
// mounter), so it is the platform's or the author's to allow.
func (p Policy) serviceAccount(path *field.Path, a map[string]string) []Finding {
	var out []Finding
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if !slices.Contains(WorkloadIdentityKeys, k) && !hasPrefix(p.AnnotationPrefixes, k) {
			allowed := append(slices.Clone(WorkloadIdentityKeys), p.AnnotationPrefixes...)
			out = append(out, Finding{path.Key(k), ServiceAccounts, k, allowed, "--allowed-annotation-prefixes nor a workload identity key"})
		}
	}
	return out
}

// nodeAffinity: the label keys node affinity selects nodes by.
func (p Policy) nodeAffinity(a *corev1.Affinity) []Finding {
	if a == nil || a.NodeAffinity == nil {
		return nil
	}
	na := a.NodeAffinity
	path := spec.Child("affinity", "nodeAffinity")
	var out []Finding
	term := func(at *field.Path, t corev1.NodeSelectorTerm) {
		for i, e := range t.MatchExpressions {
			if !slices.Contains(p.NodeSelectorKeys, e.Key) {
				out = append(out, Finding{at.Child("matchExpressions").Index(i).Child("key"), Pods, e.Key, p.NodeSelectorKeys, "--allowed-node-selector-keys"})
			}
		}
		for i, e := range t.MatchFields {
			if !slices.Contains(p.NodeSelectorKeys, e.Key) {
				out = append(out, Finding{at.Child("matchFields").Index(i).Child("key"), Pods, e.Key, p.NodeSelectorKeys, "--allowed-node-selector-keys"})
			}
		}
	}
	if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
		for i, t := range r.NodeSelectorTerms {
			term(path.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms").Index(i), t)
		}
	}
	for i, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		term(path.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i).Child("preference"), t.Preference)
	}
	return out
}

// ingress: its class and annotations, when the operator creates one.
func (p Policy) ingress(in *v1alpha1.IngressSpec) []Finding {
	if in == nil || !in.Enabled {
		return nil
	}
	var out []Finding
	path := spec.Child("ingress")
	if in.ClassName != nil && !slices.Contains(p.IngressClasses, *in.ClassName) {
		out = append(out, Finding{path.Child("className"), Ingresses, *in.ClassName, p.IngressClasses, "--allowed-ingress-classes"})
	}
	for _, k := range slices.Sorted(maps.Keys(in.Annotations)) {
		if !hasPrefix(p.AnnotationPrefixes, k) {
			out = append(out, Finding{path.Child("annotations").Key(k), Ingresses, k, p.AnnotationPrefixes, "--allowed-annotation-prefixes"})
		}
	}
	return out
}

// OutsideChanged is Outside for admission: on an update, a value the old
// spec set at the same field is not asked about again (it was admitted
// then), so a cluster can still be relabelled or released by someone
// without the rights of the one who created it.
func (p Policy) OutsideChanged(old, c *v1alpha1.OpenBaoCluster) []Finding {
	now := p.Outside(c)
	if old == nil {
		return now
	}
	before := p.Outside(old)
	return slices.DeleteFunc(now, func(f Finding) bool {
		return slices.ContainsFunc(before, func(b Finding) bool { return b.Path.String() == f.Path.String() && b.Value == f.Value })
	})
}

func hasPrefix(prefixes []string, key string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(key, p) })
}
