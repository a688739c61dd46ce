package upgrade_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/upgrade"
)

const (
	bySpec     = v1alpha1.RolloutCauseSpec
	byOperator = v1alpha1.RolloutCauseOperator
)

func TestCauseOf(t *testing.T) {
	for _, tc := range []struct {
		name              string
		rendered, settled int64
		want              v1alpha1.RolloutCause
	}{
		{"a template rendered from the generation the servers settled on changed by the operator alone", 7, 7, byOperator},
		{"a template rendered from a newer generation is the spec's, whatever else changed", 8, 7, bySpec},
		{"a settled generation never recorded counts as the spec's", 7, 0, bySpec},
		{"an unknown rendered generation counts as the spec's", 0, 0, bySpec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := upgrade.CauseOf(tc.rendered, tc.settled); got != tc.want {
				t.Fatalf("CauseOf(%d, %d) = %s, want %s", tc.rendered, tc.settled, got, tc.want)
			}
		})
	}
}

func TestAdmit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster string
		cause   v1alpha1.RolloutCause
		max     int
		holders []string
		waits   []string
	}{
		{"an operator-caused rollout takes a free slot", "ns/c", byOperator, 1, nil, nil},
		{"an operator-caused rollout waits while every slot is held, naming the holders", "ns/c", byOperator, 1, []string{"ns/a"}, []string{"ns/a"}},
		{"a holder counted twice (cache and claim) holds one slot", "ns/c", byOperator, 2, []string{"ns/a", "ns/a"}, nil},
		{"two slots held of two: it waits, holders sorted", "ns/c", byOperator, 2, []string{"ns/b", "ns/a"}, []string{"ns/a", "ns/b"}},
		{"a cluster holding a slot keeps it when every slot is held", "ns/a", byOperator, 1, []string{"ns/a"}, nil},
		{"a cluster holding a slot keeps it even past the cap (the cap was lowered)", "ns/a", byOperator, 1, []string{"ns/b", "ns/a"}, nil},
		{"a spec-caused rollout never waits for other tenants' clusters", "ns/c", bySpec, 1, []string{"ns/a", "ns/b"}, nil},
		{"a cap below 1 holds nothing", "ns/c", byOperator, 0, []string{"ns/a"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := upgrade.Admit(tc.cluster, tc.cause, tc.max, tc.holders)
			if !slices.Equal(v.Holders, tc.waits) || v.OK() != (len(tc.waits) == 0) {
				t.Fatalf("Admit = %+v, want holders %v", v, tc.waits)
			}
			if !v.OK() && !strings.Contains(v.Message(), strings.Join(tc.waits, ", ")) {
				t.Fatalf("message %q names no holder", v.Message())
			}
		})
	}
}

// TestAClusterWaitingForASlotMovesNoPodAndIsNotDegraded: the wait is
// told on Upgrading, not as a fault, and the partition stays locked.
func TestAClusterWaitingForASlotMovesNoPodAndIsNotDegraded(t *testing.T) {
	o := cluster(func(o *upgrade.Observed) {
		o.Cause = byOperator
		o.Slot = upgrade.Admit("ns/bao", byOperator, 1, []string{"other/bao"})
	})
	d := upgrade.Decide(o)
	if d.Partition != o.Replicas || d.Upgrade != nil || d.Started || d.Problem != nil {
		t.Fatalf("partition %d, upgrade %+v, started %v, problem %+v: want nothing moved and no fault", d.Partition, d.Upgrade, d.Started, d.Problem)
	}
	if reasonOf(d.Upgrading) != v1alpha1.ReasonWaitingForRolloutSlot || !strings.Contains(d.Upgrading.Message, "other/bao") || d.Requeue == 0 {
		t.Fatalf("Upgrading %+v, requeue %s: want WaitingForRolloutSlot naming other/bao, and a requeue", d.Upgrading, d.Requeue)
	}
	o.Slot = upgrade.Slot{}
	d = upgrade.Decide(o)
	if !d.Started || d.Upgrade == nil || d.Upgrade.Cause != byOperator {
		t.Fatalf("slot free: started %v, upgrade %+v; want a rollout recorded as the operator's", d.Started, d.Upgrade)
	}
}

// TestASettledClusterRecordsTheGenerationItsTemplateWasRenderedFrom:
// only with every server on the current template, never mid-rollout.
func TestASettledClusterRecordsTheGenerationItsTemplateWasRenderedFrom(t *testing.T) {
	gen := func(o *upgrade.Observed) { o.RenderedGeneration = 4 }
	if d := upgrade.Decide(cluster(gen, rolled(0), rolled(1), rolled(2))); d.Settled != 4 {
		t.Errorf("settled cluster: Settled %d, want 4", d.Settled)
	}
	if d := upgrade.Decide(cluster(gen)); d.Settled != 0 {
		t.Errorf("pods behind: Settled %d, want 0 (kept)", d.Settled)
	}
	if d := upgrade.Decide(cluster(gen, func(o *upgrade.Observed) { o.StatefulSetObserved = false })); d.Settled != 0 {
		t.Errorf("StatefulSet status lagging: Settled %d, want 0 (kept)", d.Settled)
	}
}

// fleet is a model of the operator's clusters for the fuzz test: what
// each cluster's status says (a rollout under way and its cause), what
// the cache shows of it (possibly an older status), and the Slots of the
// running process.
type fleet struct {
	max      int
	slots    *upgrade.Slots
	status   []*v1alpha1.RolloutCause // nil: no rollout
	cache    []*v1alpha1.RolloutCause
	claimed  []bool // a claim made in this pass not yet decided
	snapshot []bool // the rollout waits for its pre-upgrade snapshot: the claim is kept
}

func newFleet(n, max int) *fleet {
	return &fleet{max: max, slots: &upgrade.Slots{Max: max}, status: make([]*v1alpha1.RolloutCause, n),
		cache: make([]*v1alpha1.RolloutCause, n), claimed: make([]bool, n), snapshot: make([]bool, n)}
}

func key(i int) types.NamespacedName {
	return types.NamespacedName{Namespace: fmt.Sprint("t", i), Name: "bao"}
}

// shown is what the cache lists as holding a slot.
func (f *fleet) shown() []types.NamespacedName {
	var out []types.NamespacedName
	for i, c := range f.cache {
		if c != nil && *c == byOperator {
			out = append(out, key(i))
		}
	}
	return out
}

// step plays one reconcile of cluster i, as reconcileRollout does: a
// due rollout claims a slot, then starts, waits for its snapshot, or
// does not start (and releases).
func (f *fleet) step(t *testing.T, i int, b byte) {
	switch {
	case f.status[i] != nil && b&0x3 == 0: // the rollout completes
		f.status[i] = nil
		f.slots.Release(key(i))
	case f.status[i] == nil:
		cause := bySpec
		if b&0x4 != 0 {
			cause = byOperator
		}
		f.snapshot[i] = false // decided afresh in this pass
		v := f.slots.Claim(key(i), "", cause, f.shown())
		if cause == bySpec && !v.OK() {
			t.Fatalf("a spec-caused rollout of %s waits for %v", key(i), v.Holders)
		}
		switch {
		case v.OK() && b&0x18 == 0: // preflight holds it (not healthy)
			f.slots.Release(key(i))
		case v.OK() && b&0x18 == 0x8: // the snapshot is being taken
			f.snapshot[i] = cause == byOperator // only those hold a claim
		case v.OK():
			f.status[i] = &cause
		default:
			f.slots.Release(key(i))
		}
	}
	if b&0x20 != 0 { // the cache catches up with this cluster
		f.cache[i] = f.status[i]
	}
	if b&0xc0 == 0xc0 { // the operator restarts: memory is gone, the cache is read afresh
		f.slots = &upgrade.Slots{Max: f.max}
		copy(f.cache, f.status)
		clear(f.snapshot)
	}
}

func (f *fleet) check(t *testing.T) {
	n := 0
	for _, c := range f.status {
		if c != nil && *c == byOperator {
			n++
		}
	}
	for _, s := range f.snapshot {
		if s {
			n++ // holds a claim, about to start
		}
	}
	if n > f.max {
		t.Fatalf("%d operator-caused rollouts under way or about to start, cap %d (status %v)", n, f.max, f.status)
	}
}

// FuzzNeverMoreOperatorRolloutsThanTheCap drives clusters through
// arbitrary interleavings of starts (by the spec or the operator),
// completions, preflight holds, snapshots, a cache that lags the status
// writes, and operator restarts, and holds the invariants: never more
// than Max operator-caused rollouts under way (or holding a claim) at
// once, counted across a restart from what the cache shows; a
// spec-caused rollout never waits.
func FuzzNeverMoreOperatorRolloutsThanTheCap(f *testing.F) {
	f.Add(uint8(1), []byte{0x24, 0x25, 0x26, 0x04, 0x05, 0x06, 0x20, 0xc4, 0x25})
	f.Add(uint8(2), []byte{0x04, 0x0c, 0x14, 0x1c, 0xe4, 0x04, 0x05, 0x06, 0x07})
	f.Add(uint8(1), []byte{0x00, 0x04, 0x08, 0x2c, 0xff, 0x04, 0x01, 0x02})
	f.Fuzz(func(t *testing.T, max uint8, script []byte) {
		fl := newFleet(4, int(max%3)+1)
		for j, b := range script {
			fl.step(t, j%4, b)
			fl.check(t)
		}
	})
}

// TestConcurrentClaimsTakeNoMoreSlotsThanTheCap: many reconciles at once
// (MaxConcurrentReconciles > 1), none of which the cache shows yet.
func TestConcurrentClaimsTakeNoMoreSlotsThanTheCap(t *testing.T) {
	slots := &upgrade.Slots{Max: 2}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []int
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if slots.Claim(key(i), "", byOperator, nil).OK() {
				mu.Lock()
				won = append(won, i)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(won) != 2 {
		t.Fatalf("%d claims won (%v), want 2", len(won), won)
	}
}

// TestACheckClaimsNothing: a cluster that only asks (before it has asked
// OpenBao whether it may start at all) holds no slot.
func TestACheckClaimsNothing(t *testing.T) {
	slots := &upgrade.Slots{Max: 1}
	if v := slots.Check(key(0), byOperator, nil); !v.OK() {
		t.Fatalf("check on free slots: %+v", v)
	}
	if v := slots.Claim(key(1), "", byOperator, nil); !v.OK() {
		t.Fatalf("a check held the slot: %+v", v)
	}
	if v := slots.Check(key(0), byOperator, nil); v.OK() {
		t.Fatal("a claim did not hold the slot")
	}
	slots.Release(key(1))
	if v := slots.Claim(key(0), "", byOperator, nil); !v.OK() {
		t.Fatalf("released, the slot is still held: %+v", v)
	}
}
