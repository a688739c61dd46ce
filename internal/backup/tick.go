package backup

import "time"

// Tick is what the schedule says at one moment.
type Tick struct {
	// Due says a backup is to be taken now, for Slot.
	Due  bool
	Slot time.Time
	// Missed counts the slots before Slot that passed without a backup
	// (the operator was down); the one backup for Slot catches them all
	// up. It stops counting at maxMissedCount.
	Missed int
	// Next is the slot to wait for now; the caller records it, and passes
	// it back as recorded next time.
	Next time.Time
}

// maxMissedCount bounds the count of missed slots.
const maxMissedCount = 10000

// Tick decides at now, from the slot recorded at the last tick (nil when
// there is none):
//   - a schedule with no slot recorded starts at its next slot: it never
//     takes a backup for a time before it was first read;
//   - before the recorded slot, it waits for it, unless the schedule now
//     has an earlier slot (it was changed), which it waits for instead;
//   - at or after the recorded slot, the slot is due, and so is every slot
//     after it up to now: they are taken as one backup, for the latest of
//     them, so a restart never fires a burst. Unless the recorded slot is
//     not a slot of the schedule any more (it was changed while due): then
//     the changed schedule starts at its next slot.
//
// After a due tick Next is after now, so no slot is taken twice as long as
// the caller records Next; a caller that names the backup after Slot makes
// a repeated tick (its record was lost) create nothing new.
func (s Schedule) Tick(recorded *time.Time, now time.Time) Tick {
	now = now.UTC()
	next := s.Next(now)
	if recorded == nil {
		return Tick{Next: next}
	}
	r := recorded.UTC()
	if now.Before(r) {
		if next.Before(r) {
			return Tick{Next: next}
		}
		return Tick{Next: r}
	}
	if !s.IsSlot(r) {
		return Tick{Next: next}
	}
	slot := s.latestSlot(r, now)
	return Tick{Due: true, Slot: slot, Missed: s.countSlots(r, slot), Next: next}
}

// latestSlot returns the last slot at or before now, given that from is a
// slot at or before now. It probes back from now in doubling steps, so a
// long outage costs a few dozen look-ups, not one per missed slot.
func (s Schedule) latestSlot(from, now time.Time) time.Time {
	found := from
	for back := time.Minute; ; back *= 2 {
		start := now.Add(-back)
		if !start.After(from) {
			break
		}
		if t := s.Next(start); !t.After(now) {
			found = t
			break
		}
	}
	for t := s.Next(found); !t.IsZero() && !t.After(now); t = s.Next(t) {
		found = t
	}
	return found
}

// countSlots counts the slots in [from, until), up to maxMissedCount.
func (s Schedule) countSlots(from, until time.Time) int {
	n := 0
	for t := from; t.Before(until) && n < maxMissedCount; t = s.Next(t) {
		n++
	}
	return n
}
