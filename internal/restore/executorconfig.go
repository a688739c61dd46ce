package restore

import (
	"cmp"
	"errors"
	"flag"
	"io"
	"regexp"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/identity"
)

// ExecutorConfig is what `openbao-operator restore` is told: the backup
// executor's settings (OpenBao, identity, store) and the snapshot.
type ExecutorConfig struct {
	backup.ExecutorConfig
	// Restore names the OpenBaoRestore, for the logs.
	Restore string
	// Key, or Latest: the newest snapshot under the cluster's prefix.
	Key    string
	Latest bool
	// LatestBefore bounds Latest to the snapshots older than this key:
	// the restore's pre-restore snapshot.
	LatestBefore string
	// ExpectedSHA256 refuses another object; empty checks nothing.
	ExpectedSHA256 string
	// Force posts to sys/storage/raft/snapshot-force.
	Force bool
	// SourceCluster, when set, is the cluster (in this namespace) under
	// whose prefix Latest looks: a cluster bootstrapped from another's
	// backup.
	SourceCluster string
	// SourceNamespace, when set, is the namespace the source ran in (in
	// another Kubernetes cluster): its prefix and its names' proofs are
	// that namespace's.
	SourceNamespace string
}

// ProvenanceSecret names the Secret of the provenance key that proves the
// names latest chooses among: the source cluster's.
func (c ExecutorConfig) ProvenanceSecret() string {
	return v1alpha1.BackupProvenanceSecretNameOf(cmp.Or(c.SourceCluster, c.Cluster))
}

// Args writes the configuration as the restore subcommand and its flags.
func (c ExecutorConfig) Args() []string {
	args := append([]string{"restore"}, c.ExecutorConfig.Flags()...)
	add := func(name, value string) {
		if value != "" {
			args = append(args, "--"+name+"="+value)
		}
	}
	add("restore", c.Restore)
	add("key", c.Key)
	if c.Latest {
		add("latest", "true")
		add("latest-before", c.LatestBefore)
	}
	add("expected-sha256", c.ExpectedSHA256)
	add("source-cluster", c.SourceCluster)
	add("source-namespace", c.SourceNamespace)
	if c.Force {
		add("force", "true")
	}
	return args
}

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseExecutorArgs reads the flags after "restore".
func ParseExecutorArgs(args []string, output io.Writer) (ExecutorConfig, error) {
	c := ExecutorConfig{}
	fs := flag.NewFlagSet("openbao-operator restore", flag.ContinueOnError)
	fs.SetOutput(output)
	c.ExecutorConfig.Register(fs)
	fs.StringVar(&c.Restore, "restore", "", "name of the OpenBaoRestore (for the logs)")
	fs.StringVar(&c.Key, "key", "", "object key of the snapshot")
	fs.BoolVar(&c.Latest, "latest", false, "restore the newest snapshot under the cluster's prefix")
	fs.StringVar(&c.LatestBefore, "latest-before", "", "with --latest, only snapshots older than this key (the pre-restore snapshot)")
	fs.StringVar(&c.ExpectedSHA256, "expected-sha256", "", "hex SHA-256 the object must have")
	fs.BoolVar(&c.Force, "force", false, "post to sys/storage/raft/snapshot-force (no seal check)")
	fs.StringVar(&c.SourceCluster, "source-cluster", "", "cluster under whose prefix --latest looks (default --cluster)")
	fs.StringVar(&c.SourceNamespace, "source-namespace", "", "namespace of --source-cluster (default --namespace)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.Auth == backup.AuthJWT && c.JWTRole == "" {
		c.JWTRole = identity.RestoreRole
	}
	if err := c.ExecutorConfig.Complete(); err != nil {
		return c, err
	}
	switch {
	case (c.Key == "") == !c.Latest:
		return c, errors.New("set exactly one of --key and --latest")
	case c.ExpectedSHA256 != "" && !sha256RE.MatchString(c.ExpectedSHA256):
		return c, errors.New("--expected-sha256 must be 64 lower-case hex digits")
	}
	return c, nil
}

// ExecutorConfigFor is what the Job of restore r of cluster c tells the
// executor. A JWT login uses the restore role, whose token may post a
// snapshot; the backup role's may only read one. A bootstrap restore
// reads spec.bootstrap.fromBackup's snapshot from its store.
func ExecutorConfigFor(c *v1alpha1.OpenBaoCluster, r *v1alpha1.OpenBaoRestore) ExecutorConfig {
	view := ViewFor(c, r)
	base := backup.ExecutorConfigFor(view, "")
	if base.Auth == backup.AuthJWT {
		base.JWTRole = identity.RestoreRole
	}
	out := ExecutorConfig{
		ExecutorConfig: base, Restore: r.Name, Key: r.Spec.Source.Key, Latest: r.Spec.Source.Latest,
		ExpectedSHA256: r.Spec.ExpectedSHA256, Force: r.Spec.Force, LatestBefore: r.Status.PreRestoreKey,
	}
	fb := c.FromBackup()
	if fb == nil || (!r.Spec.Source.Bootstrap && !r.Spec.Source.Standby) {
		return out
	}
	if r.Spec.Source.Bootstrap {
		out.Key, out.Latest, out.ExpectedSHA256 = fb.Key, fb.Latest, fb.ExpectedSHA256
	}
	if src := fb.SourceClusterName(c.Name); src != c.Name {
		out.SourceCluster = src
	}
	if src := fb.SourceNamespaceName(c.Namespace); src != c.Namespace {
		out.SourceNamespace = src
	}
	if c.StandingBy() {
		// The client Service has no endpoints while the cluster stands
		// by: the executor finds the leader from pod-0's stable name.
		out.OpenBaoAddress = c.PodAPIAddress(0)
	}
	return out
}

// ViewFor is cluster c as the Job of restore r sees it. For a bootstrap
// restore, and a standby's restore of its source's snapshot, spec.backup is spec.bootstrap.fromBackup's store read with the
// operator's own JWT identity, whatever spec.backup says (it may be
// unset, or name a store the cluster will back up to); nil when the
// cluster has no spec.bootstrap.fromBackup (or, for source.standby, no
// spec.standby).
func ViewFor(c *v1alpha1.OpenBaoCluster, r *v1alpha1.OpenBaoRestore) *v1alpha1.OpenBaoCluster {
	if r == nil || (!r.Spec.Source.Bootstrap && !r.Spec.Source.Standby) {
		return c
	}
	fb := c.FromBackup()
	if fb == nil || (r.Spec.Source.Standby && c.Spec.Standby == nil) {
		return nil
	}
	view := c.DeepCopy()
	view.Spec.Backup = &v1alpha1.BackupSpec{Target: fb.Target, JWTAuthRole: identity.RestoreRole}
	if c.Spec.Backup != nil {
		view.Spec.Backup.ExecutorImage, view.Spec.Backup.Timeout = c.Spec.Backup.ExecutorImage, c.Spec.Backup.Timeout
	}
	return view
}
