package restore

import (
	"errors"

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
	var best objectstore.Object
	found := false
	for _, o := range objects {
		t, ok := backup.ParseObjectKey(prefix, o.Key)
		if !ok {
			continue
		}
		if !found {
			best, found = o, true
			continue
		}
		bt, _ := backup.ParseObjectKey(prefix, best.Key)
		if t.After(bt) || (t.Equal(bt) && o.Key > best.Key) {
			best = o
		}
	}
	if !found {
		return objectstore.Object{}, ErrNoSnapshot
	}
	return best, nil
}
