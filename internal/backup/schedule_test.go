package backup_test

import (
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/backup"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParseScheduleAcceptsTheGrammar(t *testing.T) {
	cases := map[string]string{ // expression: first slot after 2025-01-01T00:00:00Z
		"*/15 * * * *":          "2025-01-01T00:15:00Z",
		"0 3 * * *":             "2025-01-01T03:00:00Z",
		" 0 3 * * * ":           "2025-01-01T03:00:00Z",
		"0\t3 * * *":            "2025-01-01T03:00:00Z",
		"0 3 * * MON-fri":       "2025-01-01T03:00:00Z", // a Wednesday
		"0 3 ? * sun":           "2025-01-05T03:00:00Z",
		"30 4 1,15 * *":         "2025-01-01T04:30:00Z",
		"3/20 * * * *":          "2025-01-01T00:03:00Z",
		"0 0 1 jan-dec/3 *":     "2025-04-01T00:00:00Z",
		"0 0 29 2 *":            "2028-02-29T00:00:00Z",
		"@daily":                "2025-01-02T00:00:00Z",
		"@hourly":               "2025-01-01T01:00:00Z",
		"@weekly":               "2025-01-05T00:00:00Z",
		"07 * * * *":            "2025-01-01T00:07:00Z",
		"59 23 31 12 6":         "2025-12-06T23:59:00Z", // day-of-month or day-of-week, as in cron
		"0-59/30 0-23/12 * * *": "2025-01-01T00:30:00Z",
	}
	for expr, want := range cases {
		s, err := backup.ParseSchedule(expr)
		if err != nil {
			t.Errorf("%q refused: %v", expr, err)
			continue
		}
		if got := s.Next(at("2025-01-01T00:00:00Z")); !got.Equal(at(want)) {
			t.Errorf("%q: first slot %s, want %s", expr, got.Format(time.RFC3339), want)
		}
	}
}

func TestParseScheduleRefusesWithAReason(t *testing.T) {
	cases := map[string]string{ // expression: phrase of the reason
		"* * * *":               `"* * * *"`,
		"1 2 3 4 5 6":           `must have 5 fields`,
		"CRON_TZ=UTC 0 3 * * *": `must have 5 fields`,
		"":                      `must have 5 fields`,
		"@every 1h":             `@every is not accepted`,
		"@reboot":               `is not one of @yearly`,
		"61 * * * *":            `the minute field "61"`,
		"*/0 * * * *":           `the minute field "*/0"`,
		"5-1 * * * *":           `the minute field "5-1"`,
		"*-5 * * * *":           `the minute field "*-5"`,
		"1,,2 * * * *":          `the minute field "1,,2"`,
		"1-2-3 * * * *":         `the minute field "1-2-3"`,
		"1/2/3 * * * *":         `the minute field "1/2/3"`,
		"0 24 * * *":            `the hour field "24"`,
		"0 0 0 * *":             `the day-of-month field "0"`,
		"0 0 * 13 *":            `the month field "13"`,
		"0 0 * foo *":           `the month field "foo"`,
		"0 0 * * 7":             `the day-of-week field "7"`,
		"0 0 * * fri-mon":       `the day-of-week field "fri-mon"`,
		"0 0 31 2 *":            `never fires`,
		"007 * * * *":           `the minute field "007"`,
		"*/100 * * * *":         `the minute field "*/100"`,
		"0 0 * * 1-fri":         `the day-of-week field "1-fri"`,
		"0 0 30 feb *":          `never fires`,
	}
	for expr, phrase := range cases {
		_, err := backup.ParseSchedule(expr)
		if err == nil || !backup.IsScheduleError(err) || !strings.Contains(err.Error(), phrase) {
			t.Errorf("%q: %v; want a schedule error saying %q", expr, err, phrase)
		}
	}
}

func mustParse(t *testing.T, expr string) backup.Schedule {
	t.Helper()
	s, err := backup.ParseSchedule(expr)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ptr(t time.Time) *time.Time { return &t }

func TestTick(t *testing.T) {
	hourly := "0 * * * *"
	cases := []struct {
		name     string
		expr     string
		recorded *time.Time
		now      string
		want     backup.Tick
	}{
		{"a new schedule waits for its next slot and takes nothing for the past", hourly, nil, "2025-01-01T10:59:59Z",
			backup.Tick{Next: at("2025-01-01T11:00:00Z")}},
		{"before the recorded slot it waits", hourly, ptr(at("2025-01-01T11:00:00Z")), "2025-01-01T10:30:00Z",
			backup.Tick{Next: at("2025-01-01T11:00:00Z")}},
		{"at the recorded slot it is due and moves on", hourly, ptr(at("2025-01-01T11:00:00Z")), "2025-01-01T11:00:00Z",
			backup.Tick{Due: true, Slot: at("2025-01-01T11:00:00Z"), Next: at("2025-01-01T12:00:00Z")}},
		{"a late look is still due for the slot", hourly, ptr(at("2025-01-01T11:00:00Z")), "2025-01-01T11:42:10Z",
			backup.Tick{Due: true, Slot: at("2025-01-01T11:00:00Z"), Next: at("2025-01-01T12:00:00Z")}},
		{"slots missed while down are one catch-up for the latest", hourly, ptr(at("2025-01-01T11:00:00Z")), "2025-01-01T15:20:00Z",
			backup.Tick{Due: true, Slot: at("2025-01-01T15:00:00Z"), Missed: 4, Next: at("2025-01-01T16:00:00Z")}},
		{"a week down on a minute schedule is one backup", "* * * * *", ptr(at("2025-01-01T00:00:00Z")), "2025-01-08T00:00:30Z",
			backup.Tick{Due: true, Slot: at("2025-01-08T00:00:00Z"), Missed: 10000, Next: at("2025-01-08T00:01:00Z")}},
		{"a schedule changed to an earlier slot waits for that one", "*/10 * * * *", ptr(at("2025-01-01T11:00:00Z")), "2025-01-01T10:31:00Z",
			backup.Tick{Next: at("2025-01-01T10:40:00Z")}},
		{"a schedule changed while due starts at its next slot", "30 * * * *", ptr(at("2025-01-01T11:00:00Z")), "2025-01-01T11:05:00Z",
			backup.Tick{Next: at("2025-01-01T11:30:00Z")}},
		{"a daily schedule across a long outage", "0 3 * * *", ptr(at("2025-01-01T03:00:00Z")), "2025-03-01T02:00:00Z",
			backup.Tick{Due: true, Slot: at("2025-02-28T03:00:00Z"), Missed: 58, Next: at("2025-03-01T03:00:00Z")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustParse(t, tc.expr).Tick(tc.recorded, at(tc.now))
			if got != tc.want {
				t.Errorf("Tick = %+v\nwant   %+v", got, tc.want)
			}
		})
	}
}

// TestTickUnderAFakeClockTakesEverySlotOnce walks a clock through three
// days in uneven steps, recording Next as the reconciler does, and checks
// that every slot is taken exactly once and none early.
func TestTickUnderAFakeClockTakesEverySlotOnce(t *testing.T) {
	s := mustParse(t, "*/7 * * * *")
	now := at("2025-01-01T00:00:00Z")
	var recorded *time.Time
	taken := map[time.Time]int{}
	for end := now.Add(72 * time.Hour); now.Before(end); now = now.Add(time.Duration(17+now.Unix()%113) * time.Second) {
		tick := s.Tick(recorded, now)
		if tick.Due {
			if tick.Slot.After(now) {
				t.Fatalf("slot %s taken early at %s", tick.Slot, now)
			}
			taken[tick.Slot]++
		}
		recorded = ptr(tick.Next)
	}
	for slot, n := range taken {
		if n != 1 {
			t.Errorf("slot %s taken %d times", slot, n)
		}
	}
	if len(taken) < 72*60/7-30 {
		t.Errorf("only %d slots taken in 72h of a 7-minute schedule", len(taken))
	}
}

// TestTickAfterARestartRecomputesTheSameDecision: the decision depends on
// the recorded slot and the clock only, so an operator that restarts with
// the recorded slot makes the same one, and a lost record (the status write
// failed) repeats the same slot, which the caller's naming absorbs.
func TestTickAfterARestartRecomputesTheSameDecision(t *testing.T) {
	s := mustParse(t, "0 */6 * * *")
	recorded := ptr(at("2025-01-01T06:00:00Z"))
	now := at("2025-01-01T13:10:00Z")
	first, again := s.Tick(recorded, now), s.Tick(recorded, now.Add(time.Minute))
	if !first.Due || first.Slot != again.Slot || first.Next != again.Next {
		t.Fatalf("first %+v, after a restart %+v", first, again)
	}
	if after := s.Tick(ptr(first.Next), now.Add(2*time.Minute)); after.Due {
		t.Fatalf("the slot was taken again once recorded: %+v", after)
	}
}
