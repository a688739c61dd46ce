package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/objectstore"
)

// retentionTimeout bounds listing and deleting old snapshots.
const retentionTimeout = 2 * time.Minute

// retain applies the retention the operator passed (a target without
// credentials: WhoRetains says the executor), after the verified upload
// and with the Job's own identity, and reports what it deleted, each key
// also as an audit line of the Job's log. Its failure does not fail the
// backup: the next one retries it.
func (s *runner) retain(ctx context.Context, report backup.Report, secrets *redactor) backup.Report {
	policy := s.cfg.Retention
	if policy.IsZero() {
		return report
	}
	ctx, cancel := context.WithTimeout(ctx, retentionTimeout)
	defer cancel()
	deleted, ignored, err := ApplyRetention(ctx, s.store, s.prover, s.prefix, policy, report.Key, s.deps.Clock.Now())
	log := logr.FromContextOrDiscard(ctx)
	if ignored != nil {
		report.Unproven = ignored
		log.Info("retention ignored objects it cannot prove this cluster's executor wrote", "count", ignored.Count, "example", ignored.Example)
	}
	for _, key := range deleted {
		log.Info("snapshot deleted by retention", "audit", true, "event_type", "backup.retention.delete",
			"key", key, "maxCount", policy.MaxCount, "maxAge", policy.MaxAge.String())
	}
	report.Retention = &backup.RetentionReport{Deleted: deleted, DeletedCount: len(deleted)}
	if err != nil {
		report.Retention.Error = secrets.redact(err.Error())
		log.Info("retention failed", "deleted", len(deleted), "error", report.Retention.Error)
	}
	return report
}

// ApplyRetention deletes the snapshots the policy lets go, under one
// cluster's prefix only, only those whose names p proves were signed for
// the cluster (Retention.Expired), and never keep (the one just written):
// the executor runs it after its upload when the target names no
// credentials, the operator, with those credentials only, otherwise. It
// returns the keys it deleted, also when a deletion fails part way, so that
// each can be audited, and what it ignored as unproven.
func ApplyRetention(ctx context.Context, store objectstore.Store, p backup.Prover, prefix string, policy backup.Retention,
	keep string, now time.Time) ([]string, *backup.Ignored, error) {
	objects, err := store.List(ctx, prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	keys := make([]string, len(objects))
	for i, o := range objects {
		keys[i] = o.Key
	}
	expired, ignored := policy.Expired(p, prefix, keys, keep, now)
	var deleted []string
	for _, key := range expired {
		if err := store.Delete(ctx, key); err != nil {
			return deleted, ignored, fmt.Errorf("delete %s: %w", key, err)
		}
		deleted = append(deleted, key)
	}
	return deleted, ignored, nil
}
