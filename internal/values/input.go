package values

import (
	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/identity"
)

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
	// Partition holds pods with a lower ordinal on the old template. It
	// equals Replicas while no rollout runs, so that a changed template
	// moves no pod until the rollout step lowers it.
	Partition int32
	// Image is the OpenBao server image.
	Image Image
	// Issuer, when set, adds the operator's identity to the self-init
	// requests.
	Issuer *identity.Issuer
	// ClaimTemplateSize, when set, is the size the live StatefulSet's
	// volume claim template asks for, which cannot change: the chart
	// renders it, and the storage step grows the claims to the spec's
	// (internal/volumes).
	ClaimTemplateSize string
	// Restart is the restart request the pod template carries
	// (status.restart.request): the handled one, never the spec's as such,
	// so that clearing spec.restartRequest changes no template.
	Restart string
	// ReadReplicas is what the read StatefulSet runs; nil renders no read
	// replica objects at all. Set only once the cluster is initialized: a
	// non-voter joins a cluster that exists.
	ReadReplicas *int32
	// FormingFromSnapshot says the cluster is formed from a backup
	// (spec.bootstrap.fromBackup) whose restore has not completed
	// (status.fromBackup.completedAt).
	FormingFromSnapshot bool
}

// Image is an image reference: repository and tag, and the digest
// verified for that tag, which the pod template then pins.
type Image struct {
	Repository string
	Tag        string
	// Digest is sha256:<hex>, or empty while the image is not verified.
	Digest string
}

// String is repository:tag, as the spec asks for it.
func (i Image) String() string { return i.Repository + ":" + i.Tag }

// DefaultImage is the OpenBao image repository when the spec names none.
const DefaultImage = "quay.io/openbao/openbao"

// InputFor derives the pass's decisions from status: one replica until the
// cluster is initialized, so that exactly one node can bootstrap it, then
// the spec's; the partition of a rollout under way, else locked at the
// replica count; the spec's image, pinned to the digest the image step
// verified for it.
func InputFor(c *v1alpha1.OpenBaoCluster, status *v1alpha1.OpenBaoClusterStatus) Input {
	in := Input{Cluster: c, Initialized: status.Initialized, Replicas: 1, Image: specImage(c),
		FormingFromSnapshot: c.FromBackup() != nil && (status.FromBackup == nil || status.FromBackup.CompletedAt == nil)}
	if v := status.ImageVerification; c.Spec.ImageVerification.Verifies() && v != nil && v.Image == in.Image.String() {
		in.Image.Digest = v.Digest
	}
	if status.Initialized {
		in.Replicas = c.Spec.Replicas
		if r := c.Spec.ReadReplicas; r != nil {
			in.ReadReplicas = &r.Replicas
		}
	}
	if status.Restart != nil {
		in.Restart = status.Restart.Request
	}
	return in.WithReplicas(in.Replicas, status.Upgrade)
}

// WithReplicas sets the replica count a pass decided (a scale-down in
// steps) and the partition that goes with it.
func (in Input) WithReplicas(replicas int32, rollout *v1alpha1.UpgradeStatus) Input {
	in.Replicas, in.Partition = replicas, replicas
	if rollout != nil {
		in.Partition = rollout.CurrentPartition
	}
	return in
}

// SpecImage is the image the spec asks for, repository:tag.
func SpecImage(c *v1alpha1.OpenBaoCluster) Image { return specImage(c) }

func specImage(c *v1alpha1.OpenBaoCluster) Image {
	repo := c.Spec.Image
	if repo == "" {
		repo = DefaultImage
	}
	return Image{Repository: repo, Tag: c.Spec.Version}
}
