// Package volumes decides how a cluster's Raft volumes grow when
// spec.storage.size grows. A StatefulSet's volume claim templates cannot
// change, so the operator patches each server's claim (the way
// CloudNativePG and Strimzi, which own their claims, grow them) and
// leaves the template at the size it was created with; a claim a later
// scale-up creates from it is grown the same way in the pass after. The
// alternative, deleting the StatefulSet with orphaned pods and recreating
// it with the new template (as ECK does), would leave the servers without
// their controller for a moment and add a destructive step for a field
// that only new claims read.
//
// A claim is touched only when it is provably this cluster's, the rule
// internal/deletion applies before deleting one: it carries the cluster's
// pod selector labels, its name is one the cluster's own StatefulSet gives
// its claims (a StatefulSet of that name that is not the cluster's, a
// Helm release the apply step refused to take over, has claims of the
// same names), and it is not older than the cluster unless the cluster is
// initialized (adopted its data). A claim never shrinks: Kubernetes
// refuses it, and the rule Refusal refuses a smaller size at admission,
// as it refuses growth the StorageClass does not allow. The package is
// pure.
package volumes

import (
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/deletion"
)

// Class is what the rule needs of the claims' StorageClass.
type Class struct {
	// Name is the class's name; empty when the spec names none and the
	// cluster has no default class.
	Name string
	// Found says the class exists; AllowsExpansion is its
	// allowVolumeExpansion.
	Found, AllowsExpansion bool
}

// Refusal is the rule on a change of spec.storage.size from old to want,
// shared word for word by the webhook (old: the stored spec's size) and
// the controller (old: a claim's request): empty when allowed, else why
// not, for a field error or a condition.
func Refusal(old, want resource.Quantity, class Class) string {
	switch cmp := want.Cmp(old); {
	case cmp == 0:
		return ""
	case cmp < 0:
		return fmt.Sprintf("storage.size may not decrease (from %s to %s): a volume cannot shrink; restore a backup into a new cluster for a smaller one", old.String(), want.String())
	case !class.Found:
		return fmt.Sprintf("storage.size may grow only when the StorageClass allows volume expansion, and the class %s is not found", className(class))
	case !class.AllowsExpansion:
		return fmt.Sprintf("storage.size may grow only when the StorageClass allows volume expansion, and %s has no allowVolumeExpansion: true", className(class))
	}
	return ""
}

func className(c Class) string {
	if c.Name == "" {
		return "(the default, none marked)"
	}
	return fmt.Sprintf("%q", c.Name)
}

// Claim is one PersistentVolumeClaim carrying the cluster's pod selector
// labels.
type Claim struct {
	Name    string
	Created time.Time
	// Requested is spec.resources.requests.storage; Capacity is
	// status.capacity.storage (zero until bound).
	Requested, Capacity resource.Quantity
	// FileSystemResizePending: the volume grew, and its file system grows
	// when a pod mounts it again.
	FileSystemResizePending bool
}

// Observed is what Decide looks at.
type Observed struct {
	// Want is spec.storage.size.
	Want  resource.Quantity
	Class Class
	// StatefulSet is the cluster's StatefulSet's name; ForeignStatefulSet
	// says one of that name exists that is not the cluster's.
	StatefulSet        string
	ForeignStatefulSet bool
	// ReadStatefulSet is the read replicas' StatefulSet's name when the
	// cluster has one of its own (spec.readReplicas): its claims come from
	// the same claim template and grow by the same rule; empty otherwise.
	ReadStatefulSet string
	ClusterCreated  time.Time
	Initialized     bool
	Claims          []Claim
}

// Decision is what the storage step carries out and reports.
type Decision struct {
	// Grow are the claims whose request is patched to Want.
	Grow []string
	// Refused says why claims smaller or larger than Want stay as they
	// are; empty when none.
	Refused string
	// Resizing are claims asked for Want whose capacity is smaller still;
	// RestartPending those of them that wait for their pod to restart.
	Resizing, RestartPending []string
}

// Decide grows every claim of the cluster whose request is below Want, if
// the rule allows it.
func Decide(o Observed) Decision {
	var d Decision
	claims := append([]Claim(nil), o.Claims...)
	sort.Slice(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	for _, c := range claims {
		if !ours(o, c) {
			continue
		}
		if c.Requested.Cmp(o.Want) != 0 {
			if why := Refusal(c.Requested, o.Want, o.Class); why != "" {
				d.Refused = why
				continue
			}
			d.Grow = append(d.Grow, c.Name)
		}
		if c.FileSystemResizePending {
			d.RestartPending = append(d.RestartPending, c.Name)
		} else if c.Capacity.Cmp(o.Want) < 0 && c.Requested.Cmp(o.Want) <= 0 {
			d.Resizing = append(d.Resizing, c.Name)
		}
	}
	return d
}

// ours is internal/deletion's test of a claim that is provably the
// cluster's, a voter's or a read replica's.
func ours(o Observed, c Claim) bool {
	named := deletion.IsDataVolume(o.StatefulSet, c.Name) ||
		o.ReadStatefulSet != "" && deletion.IsDataVolume(o.ReadStatefulSet, c.Name)
	return !o.ForeignStatefulSet && named && (o.Initialized || !v1alpha1.CreatedBefore(c.Created, o.ClusterCreated))
}

// DefaultSize is spec.storage.size when the spec sets none (the CRD's
// default).
const DefaultSize = "10Gi"

// SpecSize is the size the spec asks for.
func SpecSize(c *v1alpha1.OpenBaoCluster) resource.Quantity {
	if c.Spec.Storage.Size.IsZero() {
		return resource.MustParse(DefaultSize)
	}
	return c.Spec.Storage.Size
}
