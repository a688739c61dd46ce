package values

import "github.com/openbao/operator/api/v1alpha1"

// Input is what a cluster's chart values are computed from: its spec and
// names, and the decisions of the reconcile pass. The decisions come from
// the status the pass is building, never from the status as it was read,
// so that a decision (initialized, a partition) is rendered in the pass
// that made it. Compute and ConfigFor read nothing of the cluster's status.
type Input struct {
	// Cluster gives the spec, name and namespace.
	Cluster *v1alpha1.OpenBaoCluster
	// Initialized switches the Raft join from pod-0 to auto_join and drops
	// the self-init requests.
	Initialized bool
	// Replicas is what the StatefulSet runs.
	Replicas int32
	// Partition holds pods with a lower ordinal on the old template.
	Partition int32
	// Image is the OpenBao server image.
	Image Image
}

// Image is an image reference: repository and tag.
type Image struct {
	Repository string
	Tag        string
}

// DefaultImage is the OpenBao image repository when the spec names none.
const DefaultImage = "quay.io/openbao/openbao"

// InputFor derives the pass's decisions from status: one replica until the
// cluster is initialized, so that exactly one node can bootstrap it, then
// the spec's; no partition; the spec's image.
func InputFor(c *v1alpha1.OpenBaoCluster, status *v1alpha1.OpenBaoClusterStatus) Input {
	in := Input{Cluster: c, Initialized: status.Initialized, Replicas: 1, Image: specImage(c)}
	if status.Initialized {
		in.Replicas = c.Spec.Replicas
	}
	return in
}

func specImage(c *v1alpha1.OpenBaoCluster) Image {
	repo := c.Spec.Image
	if repo == "" {
		repo = DefaultImage
	}
	return Image{Repository: repo, Tag: c.Spec.Version}
}
