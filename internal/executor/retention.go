package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/objectstore"
)

// ApplyRetention deletes the snapshots the policy lets go, under one
// cluster's prefix only and never keep (the one just written); the operator
// runs it after each successful backup. It returns the keys it deleted,
// also when a deletion fails part way, so that each can be audited.
func ApplyRetention(ctx context.Context, store objectstore.Store, prefix string, policy backup.Retention,
	keep string, now time.Time) ([]string, error) {
	objects, err := store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	keys := make([]string, len(objects))
	for i, o := range objects {
		keys[i] = o.Key
	}
	var deleted []string
	for _, key := range policy.Expired(prefix, keys, keep, now) {
		if err := store.Delete(ctx, key); err != nil {
			return deleted, fmt.Errorf("delete %s: %w", key, err)
		}
		deleted = append(deleted, key)
	}
	return deleted, nil
}
