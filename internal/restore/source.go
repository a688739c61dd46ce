package restore

import (
	"errors"
	"time"

	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/objectstore"
)

// ErrNoSnapshot says the cluster's prefix holds no snapshot.
var ErrNoSnapshot = errors.New("no snapshot of this cluster in the backup target")

// SelectLatest returns the newest snapshot directly under prefix (a
// cluster's backup.ObjectPrefix), by the time in its name, which the
// executor wrote and which survives copies between buckets (LastModified
// does not). Objects another cluster wrote, even one whose name starts
// with this one's, deeper paths and files the executor did not name are
// never chosen. Two snapshots of the same second are ordered by key, so
// the choice is stable.
func SelectLatest(objects []objectstore.Object, prefix string) (objectstore.Object, error) {
	return SelectLatestBefore(objects, prefix, "")
}

// SelectLatestBefore is SelectLatest among the snapshots older than the
// one at key before (none when it is not a snapshot under prefix); ""
// sets no bound. A restore of source.latest that took a pre-restore
// snapshot restores the newest one before it, not that copy of the data
// it is about to replace.
func SelectLatestBefore(objects []objectstore.Object, prefix, before string) (objectstore.Object, error) {
	bound, bounded := time.Time{}, before != ""
	if bounded {
		var ok bool
		if bound, ok = backup.ParseObjectKey(prefix, before); !ok {
			return objectstore.Object{}, ErrNoSnapshot
		}
	}
	var best objectstore.Object
	var bestTime time.Time
	found := false
	for _, o := range objects {
		t, ok := backup.ParseObjectKey(prefix, o.Key)
		if !ok || (bounded && !older(t, o.Key, bound, before)) {
			continue
		}
		if !found || older(bestTime, best.Key, t, o.Key) {
			best, bestTime, found = o, t, true
		}
	}
	if !found {
		return objectstore.Object{}, ErrNoSnapshot
	}
	return best, nil
}

// older orders snapshots by the time in their names, then by key.
func older(t time.Time, key string, than time.Time, thanKey string) bool {
	return t.Before(than) || (t.Equal(than) && key < thanKey)
}
