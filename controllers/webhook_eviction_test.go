package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestTheDrainGuardRemembersAPodByItsUID: a pod recreated under the same
// name starts afresh, Forget drops the memory, a second Start keeps the
// first clock, and an entry older than an hour is swept.
func TestTheDrainGuardRemembersAPodByItsUID(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := types.NamespacedName{Namespace: "ns", Name: "bao-0"}
	cases := map[string]struct {
		act       func(m *drainMemory)
		uid       types.UID
		now       time.Time
		wantFirst time.Time
	}{
		"the same pod is remembered":                       {func(*drainMemory) {}, "a", t0.Add(time.Second), t0},
		"a pod recreated under the same name is a new pod": {func(*drainMemory) {}, "b", t0.Add(time.Second), time.Time{}},
		"forget drops the memory":                          {func(m *drainMemory) { m.forget(key) }, "a", t0.Add(time.Second), time.Time{}},
		"a second start keeps the first clock": {
			func(m *drainMemory) { m.start(key, "a", t0.Add(5*time.Second)) }, "a", t0.Add(6 * time.Second), t0},
		"an entry older than an hour is swept": {func(*drainMemory) {}, "a", t0.Add(2 * time.Hour), time.Time{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := &drainMemory{entries: map[types.NamespacedName]drainEntry{}}
			m.start(key, "a", t0)
			tc.act(m)
			if first, _ := m.get(key, tc.uid, tc.now, time.Minute); !first.Equal(tc.wantFirst) {
				t.Fatalf("first refusal %v, want %v", first, tc.wantFirst)
			}
		})
	}
}
