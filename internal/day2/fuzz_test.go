package day2_test

import (
	"math/rand"
	"testing"

	"github.com/openbao/operator/internal/day2"
)

// touchesServers are the kinds that act on the cluster's own servers; the
// invariants below are written from it, not from the package's table.
func touchesServers(k day2.Kind) bool { return k != day2.Drill }

func related(a, b day2.Op) bool {
	return (a.Of != nil && *a.Of == b.Ref) || (b.Of != nil && *b.Of == a.Ref)
}

// unsafe says two operations must not run at once: two that act on the
// servers (a restore never beside anything that does), or two drills,
// unless one is a step of the other.
func unsafe(a, b day2.Op) bool {
	if a.Ref == b.Ref || related(a, b) {
		return false
	}
	return (touchesServers(a.Kind) && touchesServers(b.Kind)) || (a.Kind == day2.Drill && b.Kind == day2.Drill)
}

// pool is every operation the fuzz plays with: plain ones and steps.
var pool = []day2.Op{
	rollout, backup1, backup2, restor1, restor2, drill1, drill2,
	stepOf(op(day2.Backup, "pre-upgrade"), rollout.Ref), stepOf(op(day2.Backup, "pre-restore"), restor1.Ref),
}

// FuzzDecide: a start that Decide lets never runs beside an operation it
// is unsafe beside; a refusal names an operation under way that is unsafe
// beside it; the verdict does not depend on the order of what runs.
func FuzzDecide(f *testing.F) {
	f.Add(uint8(3), uint16(0b1010))
	f.Add(uint8(0), uint16(0b111111111))
	f.Fuzz(func(t *testing.T, want uint8, set uint16) {
		w := pool[int(want)%len(pool)]
		var run []day2.Op
		for i, o := range pool {
			if set&(1<<i) != 0 {
				run = append(run, o)
			}
		}
		v := day2.Decide(w, run)
		for _, r := range run {
			if v.OK() && unsafe(w, r) {
				t.Fatalf("%v may start beside %v", w.Ref, r.Ref)
			}
		}
		if !v.OK() && !unsafe(w, *v.In) {
			t.Fatalf("%v waits for %v, which is safe beside it", w.Ref, v.In.Ref)
		}
		reversed := make([]day2.Op, len(run))
		for i, r := range run {
			reversed[len(run)-1-i] = r
		}
		if u := day2.Decide(w, reversed); u.Reason != v.Reason || u.Message != v.Message {
			t.Fatalf("the order of what runs changed the verdict: %+v, %+v", v, u)
		}
	})
}

// state is where an operation is, truly or as the cache shows it.
type state int

const (
	absent state = iota
	queued_
	running_
	ended
)

// FuzzTheRegistryClosesTheCacheLagWindow plays reconcilers that start
// operations through one Registry over a cache that lags: each object is
// created, seen, started (the status write), seen started, ended, seen
// ended, in that order, the cache behind the truth by any number of
// steps. Whatever the interleaving, no two operations unsafe beside each
// other ever run at once.
func FuzzTheRegistryClosesTheCacheLagWindow(f *testing.F) {
	f.Add(int64(1), []byte{0, 3, 10, 5, 12, 7, 1, 2})
	f.Add(int64(7), []byte{20, 21, 22, 23, 24, 25, 26, 27})
	f.Fuzz(func(t *testing.T, seed int64, script []byte) {
		rng := rand.New(rand.NewSource(seed))
		truth, cache := make([]state, len(pool)), make([]state, len(pool))
		for i, o := range pool {
			if o.Kind == day2.Rollout || o.Kind == day2.Drill {
				truth[i], cache[i] = queued_, queued_ // they live in the cluster's status
			}
		}
		reg := &day2.Registry{}
		for _, b := range script {
			i := int(b>>3) % len(pool)
			switch b & 7 {
			case 0: // a user or a step creates the object
				if truth[i] == absent {
					truth[i] = queued_
				}
			case 1, 2: // the cache catches up one step
				if cache[i] < truth[i] {
					cache[i]++
				}
			case 3, 4: // a reconciler that read the object from the cache starts it
				if cache[i] == queued_ && truth[i] == queued_ && reg.Start(bao, pool[i], observe(cache)).OK() {
					truth[i] = running_
				}
			case 5: // its start was refused after all
				if truth[i] == running_ && cache[i] == queued_ && rng.Intn(2) == 0 {
					truth[i] = queued_
					reg.Release(bao, pool[i].Ref)
				}
			case 6, 7:
				if truth[i] == running_ {
					truth[i] = ended
				}
			}
			for a := range pool {
				for z := a + 1; z < len(pool); z++ {
					if truth[a] == running_ && truth[z] == running_ && unsafe(pool[a], pool[z]) {
						t.Fatalf("%v and %v run at once (cache %v, truth %v)", pool[a].Ref, pool[z].Ref, cache, truth)
					}
				}
			}
		}
	})
}

func observe(cache []state) day2.Observation {
	var o day2.Observation
	for i, s := range cache {
		switch s {
		case queued_:
			if k := pool[i].Kind; k == day2.Backup || k == day2.Restore {
				o.Queued = append(o.Queued, pool[i])
			}
		case running_:
			o.Running = append(o.Running, pool[i])
		case ended:
			if pool[i].Kind == day2.Drill {
				o.Ended = append(o.Ended, pool[i])
			}
		}
	}
	return o
}
