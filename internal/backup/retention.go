package backup

import (
	"sort"
	"time"
)

// Retention bounds a cluster's snapshots; zero fields do not apply.
type Retention struct {
	MaxCount int
	MaxAge   time.Duration
}

// Expired returns the keys retention deletes, oldest first. It considers
// only snapshots named as ObjectKey names them directly under prefix, so
// never another cluster's nor a file someone put there, and never keep
// (the snapshot just written), which counts as one of the MaxCount kept.
// Of the rest, those beyond the newest MaxCount and those older than
// MaxAge at now (by the time in their name) expire.
func (r Retention) Expired(prefix string, keys []string, keep string, now time.Time) []string {
	type snap struct {
		key string
		at  time.Time
	}
	var snaps []snap
	for _, k := range keys {
		if t, ok := ParseObjectKey(prefix, k); ok {
			snaps = append(snaps, snap{k, t})
		}
	}
	// Newest first; the key breaks ties so the order never depends on the
	// listing's.
	sort.Slice(snaps, func(i, j int) bool {
		if !snaps[i].at.Equal(snaps[j].at) {
			return snaps[i].at.After(snaps[j].at)
		}
		return snaps[i].key > snaps[j].key
	})
	var expired []string
	kept := 0
	for _, s := range snaps {
		keepIt := s.key == keep ||
			((r.MaxCount == 0 || kept < r.MaxCount) && (r.MaxAge == 0 || !s.at.Before(now.Add(-r.MaxAge))))
		if keepIt {
			kept++
			continue
		}
		expired = append(expired, s.key)
	}
	// Oldest first: an interrupted deletion leaves the newest.
	for i, j := 0, len(expired)-1; i < j; i, j = i+1, j-1 {
		expired[i], expired[j] = expired[j], expired[i]
	}
	return expired
}
