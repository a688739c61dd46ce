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
// cluster's backup.ObjectPrefix) whose name p proves (backup.Proven), by
// the time in its name, which the executor wrote and which survives copies
// between buckets (LastModified does not). Objects another cluster wrote,
// even one whose name starts with this one's, deeper paths, and objects
// whose names the cluster's executor did not sign (one planted as
// 99991231T000000Z-xxxxxxxx.snap) are never chosen; those directly under
// prefix are returned as ignored, to be reported. Two snapshots of the
// same second are ordered by key, so the choice is stable.
func SelectLatest(p backup.Prover, objects []objectstore.Object, prefix string) (objectstore.Object, *backup.Ignored, error) {
	return SelectLatestBefore(p, objects, prefix, "")
}

// SelectLatestBefore is SelectLatest among the snapshots older than the
// one at key before (none when it is not a snapshot under prefix); ""
// sets no bound. A restore of source.latest that took a pre-restore
// snapshot restores the newest one before it, not that copy of the data
// it is about to replace.
func SelectLatestBefore(p backup.Prover, objects []objectstore.Object, prefix, before string) (objectstore.Object, *backup.Ignored, error) {
	keys := make([]string, len(objects))
	byKey := make(map[string]objectstore.Object, len(objects))
	for i, o := range objects {
		keys[i], byKey[o.Key] = o.Key, o
	}
	snaps, ignored := backup.Proven(p, prefix, keys)
	bound, bounded := time.Time{}, before != ""
	if bounded {
		var ok bool
		if bound, ok = backup.ParseObjectKey(prefix, before); !ok {
			return objectstore.Object{}, ignored, ErrNoSnapshot
		}
	}
	// snaps is newest first: the first below the bound is the one.
	for _, s := range snaps {
		if !bounded || older(s.At, s.Key, bound, before) {
			return byKey[s.Key], ignored, nil
		}
	}
	return objectstore.Object{}, ignored, ErrNoSnapshot
}

// older orders snapshots by the time in their names, then by key.
func older(t time.Time, key string, than time.Time, thanKey string) bool {
	return t.Before(than) || (t.Equal(than) && key < thanKey)
}
