package backup

import (
	"time"

	"github.com/openbao/operator/api/v1alpha1"
)

// Retention bounds a cluster's snapshots; zero fields do not apply.
type Retention struct {
	MaxCount int
	MaxAge   time.Duration
}

// IsZero says the policy deletes nothing.
func (r Retention) IsZero() bool { return r.MaxCount <= 0 && r.MaxAge <= 0 }

// RetentionOf is the retention of a cluster's backup settings; zero when
// it has none.
func RetentionOf(spec *v1alpha1.BackupSpec) Retention {
	var r Retention
	if spec == nil || spec.Retention == nil {
		return r
	}
	if spec.Retention.MaxCount != nil {
		r.MaxCount = int(*spec.Retention.MaxCount)
	}
	if spec.Retention.MaxAge != nil {
		r.MaxAge = spec.Retention.MaxAge.Duration
	}
	return r
}

// RetentionActor says who deletes a cluster's expired snapshots.
type RetentionActor string

// Who applies retention.
const (
	// RetentionNone: the cluster has no retention.
	RetentionNone RetentionActor = "None"
	// RetentionByOperator: the operator, after the backup, with the
	// credentials the spec's credentialsSecretRef names and nothing else.
	RetentionByOperator RetentionActor = "Operator"
	// RetentionByExecutor: the executor, in the backup Job, right after
	// its verified upload, under the cluster's own identity; it reports
	// what it deleted.
	RetentionByExecutor RetentionActor = "Executor"
)

// RetentionObserved is what decides who applies retention.
type RetentionObserved struct {
	Policy Retention
	// ExplicitCredentials: the target names a credentialsSecretRef.
	ExplicitCredentials bool
}

// WhoRetains decides who deletes expired snapshots. The operator holds
// only the credentials a spec names: without them, the store is reached
// by the pod's ambient cloud identity, and in the operator's pod that is
// the operator's, never to be used for a tenant's bucket. So without
// explicit credentials retention runs in the executor's Job, whose pod
// runs under the cluster's own ServiceAccount.
func WhoRetains(o RetentionObserved) RetentionActor {
	switch {
	case o.Policy.IsZero():
		return RetentionNone
	case o.ExplicitCredentials:
		return RetentionByOperator
	default:
		return RetentionByExecutor
	}
}

// WhoRetainsFor is WhoRetains of cluster c's backup settings.
func WhoRetainsFor(c *v1alpha1.OpenBaoCluster) (RetentionActor, Retention) {
	spec := c.Spec.Backup
	policy := RetentionOf(spec)
	explicit := spec != nil && spec.Target.CredentialsSecretRef != nil
	return WhoRetains(RetentionObserved{Policy: policy, ExplicitCredentials: explicit}), policy
}

// Expired returns the keys retention deletes, oldest first. It considers
// only the snapshots p proves were named for this cluster directly under
// prefix (Proven), so never another cluster's, nor a file someone put
// there, nor one named like a snapshot by someone without the provenance
// key: those are ignored and returned to be reported, and a planted name
// of a far-future time never counts among the MaxCount kept. keep (the
// snapshot just written) is never deleted and counts as one of the
// MaxCount kept. Of the rest, those beyond the newest MaxCount and those
// older than MaxAge at now (by the time in their name) expire.
func (r Retention) Expired(p Prover, prefix string, keys []string, keep string, now time.Time) ([]string, *Ignored) {
	snaps, ignored := Proven(p, prefix, keys)
	var expired []string
	kept := 0
	for _, s := range snaps {
		keepIt := s.Key == keep ||
			((r.MaxCount == 0 || kept < r.MaxCount) && (r.MaxAge == 0 || !s.At.Before(now.Add(-r.MaxAge))))
		if keepIt {
			kept++
			continue
		}
		expired = append(expired, s.Key)
	}
	// Oldest first: an interrupted deletion leaves the newest.
	for i, j := 0, len(expired)-1; i < j; i, j = i+1, j-1 {
		expired[i], expired[j] = expired[j], expired[i]
	}
	return expired, ignored
}
