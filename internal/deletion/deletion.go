// Package deletion decides which Raft volumes a cluster's deletion policy
// removes. Deleting a volume is irreversible, and the claims are found by
// the pod selector labels, which are not the operator's alone: the
// OpenBao Helm chart labels its claims app.kubernetes.io/name=openbao and
// app.kubernetes.io/instance=<release>, and its volume claim template is
// called data too. So a claim is deleted only when all of these hold:
//
//   - the policy deletes volumes (DeletePVCs, DeleteAll);
//   - no StatefulSet of the cluster's name exists that is not the
//     cluster's own: one that is (a Helm release of the same name, which
//     the apply step refused to take over) owns claims named exactly like
//     the cluster's would be, in use by its servers;
//   - its name is one the cluster's StatefulSet gives its claims,
//     data-<statefulset>-<ordinal>;
//   - it is not older than the OpenBaoCluster, unless the cluster is
//     initialized: an older claim holds data from before this cluster
//     (kept by a Retain, or another release's), which becomes the
//     cluster's own only once the cluster adopted and served it. A cluster
//     left Degraded RetainedData never adopted it, and its deletion must
//     not be the way that data is lost.
//
// Everything else is kept, each claim with the reason. It is pure.
package deletion

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/openbao/operator/api/v1alpha1"
)

// Claim is one PersistentVolumeClaim carrying the cluster's pod selector
// labels.
type Claim struct {
	Name    string
	Created time.Time
}

// Observed is what Volumes looks at.
type Observed struct {
	Policy v1alpha1.DeletionPolicy
	// StatefulSet is the name of the cluster's StatefulSet; its claims
	// are data-<StatefulSet>-<ordinal>.
	StatefulSet string
	// ForeignStatefulSet says a StatefulSet of that name exists and is not
	// the cluster's (apply.Ours is false).
	ForeignStatefulSet bool
	// ClusterCreated is the OpenBaoCluster's creation time; Initialized is
	// status.initialized.
	ClusterCreated time.Time
	Initialized    bool
	Claims         []Claim
}

// Kept is a claim left in place and why.
type Kept struct {
	Name, Why string
}

// Decision is what the finalizer carries out: the claims to delete, and
// the ones kept with their reasons (reported, never deleted).
type Decision struct {
	Delete []string
	Keep   []Kept
}

// Volumes decides which claims the deletion of the cluster removes.
func Volumes(o Observed) Decision {
	var d Decision
	claims := append([]Claim(nil), o.Claims...)
	sort.Slice(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	for _, c := range claims {
		if why := keepReason(o, c); why != "" {
			d.Keep = append(d.Keep, Kept{Name: c.Name, Why: why})
			continue
		}
		d.Delete = append(d.Delete, c.Name)
	}
	return d
}

func keepReason(o Observed, c Claim) string {
	switch {
	case !o.Policy.DeletesVolumes():
		return fmt.Sprintf("deletionPolicy %s keeps the volumes", o.Policy)
	case o.ForeignStatefulSet:
		return fmt.Sprintf("StatefulSet %s is not this cluster's, and a claim of this name may be its server's", o.StatefulSet)
	case !IsDataVolume(o.StatefulSet, c.Name):
		return fmt.Sprintf("the name is not one StatefulSet %s gives its volumes (%s<ordinal>)", o.StatefulSet, v1alpha1.DataVolumePrefix(o.StatefulSet))
	case !o.Initialized && v1alpha1.CreatedBefore(c.Created, o.ClusterCreated):
		return "it is older than this OpenBaoCluster, which never adopted its data (it is not initialized)"
	}
	return ""
}

// IsDataVolume says name is data-<statefulSet>-<ordinal>, the ordinal a
// decimal without a leading zero, as the StatefulSet controller names the
// claims of its volume claim template "data".
func IsDataVolume(statefulSet, name string) bool {
	ordinal, ok := strings.CutPrefix(name, v1alpha1.DataVolumePrefix(statefulSet))
	if !ok || ordinal == "" || (len(ordinal) > 1 && ordinal[0] == '0') {
		return false
	}
	_, err := strconv.ParseUint(ordinal, 10, 31)
	return err == nil
}
