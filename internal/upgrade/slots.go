package upgrade

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/openbao/operator/api/v1alpha1"
)

// CauseOf says what made a due rollout due, from the cluster generation
// the StatefulSet's template was rendered from (its
// openbao.org/rendered-generation annotation, written in the same apply
// as the template) and status.settledGeneration, the generation whose
// template every server ran when no rollout last ran.
//
// Why generations and not a diff of the template: the template changes
// for many reasons the spec drives (version, image, config, resources,
// annotations …), and the operator's share of it (the wrapper image, the
// chart) is not separable by looking. A generation is recorded by the API
// server on every spec change and on nothing else, survives a restart,
// and is never written into the pod template (which would roll pods). If
// the template was rendered from another generation than the settled one,
// the tenant changed the spec since, whatever else changed: Spec. Only a
// template rendered from the very generation the servers settled on can
// have been changed by the operator alone: Operator. An unknown rendered
// generation (a StatefulSet rendered before the annotation existed) or
// settled generation (never recorded) is Spec, so that doubt never holds
// a tenant's rollout; a tenant who changes any spec field to skip the
// queue gets their own cluster rolled, which they may do anyway.
func CauseOf(rendered, settled int64) v1alpha1.RolloutCause {
	if rendered > 0 && rendered == settled {
		return v1alpha1.RolloutCauseOperator
	}
	return v1alpha1.RolloutCauseSpec
}

// Slot is the verdict on a rollout taking a rollout slot. The zero Slot
// lets it start.
type Slot struct {
	// Holders are the clusters holding every slot, sorted; empty: the
	// rollout may start.
	Holders []string
	Max     int
}

// OK says the rollout may start.
func (s Slot) OK() bool { return len(s.Holders) == 0 }

// Message says why the rollout waits and when it starts.
func (s Slot) Message() string {
	return fmt.Sprintf("the pod template changed because the operator changed (not this cluster's spec); at most %d such "+
		"rollouts run at once across the operator's clusters (--max-concurrent-rollouts), and %s hold the slots: "+
		"this rollout starts once one of them completes", s.Max, strings.Join(s.Holders, ", "))
}

// Admit decides whether a rollout of cluster with cause may start while
// holders (every cluster with an operator-caused rollout under way or
// claimed, any order, duplicates allowed) hold slots, max at a time. A
// Spec rollout never waits: one tenant's halted rollout must not hold
// another tenant's change. A cluster that holds a slot keeps it. max < 1
// is no cap.
func Admit(cluster string, cause v1alpha1.RolloutCause, max int, holders []string) Slot {
	if cause != v1alpha1.RolloutCauseOperator || max < 1 || slices.Contains(holders, cluster) {
		return Slot{}
	}
	held := slices.Compact(slices.Sorted(slices.Values(holders)))
	if len(held) < max {
		return Slot{}
	}
	return Slot{Holders: held, Max: max}
}

// Slots is the rollout-slot count the operator's cluster reconciles
// share: Claim decides and records under one lock, so two reconciles
// (MaxConcurrentReconciles > 1) cannot both take the last slot inside the
// window in which the cache lags the status write that starts a rollout.
// The slots held are what the cache shows (status.upgrade with cause
// Operator, which a restarted operator reads back, so it does not start
// a second wave) and the claims of this process not shown yet. The nil
// Slots caps nothing.
type Slots struct {
	// Max is --max-concurrent-rollouts; below 1, no cap.
	Max int

	mu     sync.Mutex
	claims map[types.NamespacedName]types.UID
}

// Claim decides as Admit does for the cluster c (of uid), which has no
// rollout under way as its caller read it, with the holders the cache
// shows, and records a claim when an operator-caused rollout may start.
// A rollout the cache still lists for c is one that ended (the list may
// lag c's own read): it holds nothing. The caller Releases the claim when
// the rollout does not start after all; once the cache shows the rollout,
// the claim is dropped.
func (s *Slots) Claim(c types.NamespacedName, uid types.UID, cause v1alpha1.RolloutCause, shown []types.NamespacedName) Slot {
	return s.decide(c, uid, cause, shown, true)
}

// Check decides as Claim does and records nothing: a cluster that would
// wait learns it before asking OpenBao anything, and one that would not
// claims only once it knows whether it may start, so that the claim is
// not held across its calls to OpenBao.
func (s *Slots) Check(c types.NamespacedName, cause v1alpha1.RolloutCause, shown []types.NamespacedName) Slot {
	return s.decide(c, "", cause, shown, false)
}

func (s *Slots) decide(c types.NamespacedName, uid types.UID, cause v1alpha1.RolloutCause, shown []types.NamespacedName, claim bool) Slot {
	if s == nil {
		return Slot{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	holders := make([]string, 0, len(shown)+len(s.claims))
	for _, h := range shown {
		if h != c {
			holders = append(holders, h.String())
			delete(s.claims, h) // the cache shows it now: its claim is done
		}
	}
	for h := range s.claims {
		holders = append(holders, h.String())
	}
	v := Admit(c.String(), cause, s.Max, holders)
	if claim && v.OK() && cause == v1alpha1.RolloutCauseOperator {
		if s.claims == nil {
			s.claims = map[types.NamespacedName]types.UID{}
		}
		s.claims[c] = uid
	}
	return v
}

// Release drops c's claim: its rollout did not start (it waits for
// health, a snapshot that failed, another operation), or it is gone.
func (s *Slots) Release(c types.NamespacedName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.claims, c)
}

// Remembers says whether a claim of c is held; it is for tests that check
// memory is released.
func (s *Slots) Remembers(c types.NamespacedName) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.claims[c]
	return ok
}
