package backup

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// The schedule grammar is a strict subset of what robfig/cron's standard
// parser takes: five fields separated by spaces or tabs, each a comma list
// of *, ?, a value or a range a-b (a <= b), each optionally /step with
// step >= 1; month and day-of-week also take three-letter names. Or one of
// the fixed descriptors. It leaves out what would make a slot ambiguous:
// @every (its times depend on when it is first read) and CRON_TZ= (every
// schedule runs in UTC). The same grammar is the CRD's admission rules
// (ScheduleRules), so the API server and the operator refuse the same
// expressions with the same words.

// Descriptors are the named schedules the grammar accepts.
var Descriptors = []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}

// scheduleField is one of the five fields: its bounds and, for month and
// day-of-week, the names that stand for zero, zero+1, ...
type scheduleField struct {
	name   string
	lo, hi int
	names  []string
	zero   int
}

var scheduleFields = []scheduleField{
	{name: "minute", lo: 0, hi: 59},
	{name: "hour", lo: 0, hi: 23},
	{name: "day-of-month", lo: 1, hi: 31},
	{name: "month", lo: 1, hi: 12, zero: 1,
		names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{name: "day-of-week", lo: 0, hi: 6, zero: 0,
		names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
}

// fieldPattern finds the fields: runs of anything but space and tab.
const fieldPattern = `[^ \t]+`

// controlPattern finds control characters other than tab, which no field
// holds and no message should echo.
const controlPattern = `[\x00-\x08\x0a-\x1f\x7f]`

const controlMessage = "schedule must not hold control characters other than tab"

var (
	fieldRE   = regexp.MustCompile(fieldPattern)
	controlRE = regexp.MustCompile(controlPattern)
	itemREs   = func() []*regexp.Regexp {
		out := make([]*regexp.Regexp, len(scheduleFields))
		for i, f := range scheduleFields {
			out[i] = regexp.MustCompile(f.itemPattern())
		}
		return out
	}()
)

func (f scheduleField) itemPattern() string {
	value := `[0-9]{1,4}`
	if f.names != nil {
		value = `([0-9]{1,4}|[A-Za-z]{3})`
	}
	return `^(\*|\?|` + value + `(-` + value + `)?)(/[0-9]{1,4})?$`
}

func (f scheduleField) describe() string {
	values := fmt.Sprintf("numbers %d-%d", f.lo, f.hi)
	if f.names != nil {
		values += fmt.Sprintf(" or names %s-%s", f.names[0], f.names[len(f.names)-1])
	}
	return "must be made of *, ?, " + values + " and ranges a-b of those with a <= b, " +
		"each optionally with /step (step >= 1), separated by commas"
}

// Messages, shared word for word with the CEL rules.
func descriptorMessage(expr string) string {
	return `schedule "` + expr + `" is not one of ` + strings.Join(Descriptors, ", ") +
		" (@every is not accepted: its times would depend on when the operator reads it)"
}

func fieldCountMessage(expr, count string) string {
	return `schedule must have 5 fields (minute hour day-of-month month day-of-week) in UTC, or be a descriptor such as @daily; "` +
		expr + `" has ` + count
}

func fieldMessage(f scheduleField, value string) string {
	return `schedule: the ` + f.name + ` field "` + value + `" ` + f.describe()
}

// ScheduleError says why an expression is refused.
type ScheduleError struct{ Message string }

func (e *ScheduleError) Error() string { return e.Message }

// Schedule is a parsed schedule; its slots are times in UTC.
type Schedule struct {
	expr string
	spec cron.Schedule
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// neverFiresProbe is where ParseSchedule looks for a first slot: a fixed
// time, so the answer never depends on the clock.
var neverFiresProbe = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ParseSchedule checks expr against the grammar, parses it and refuses a
// schedule that never fires (such as the 31st of February).
func ParseSchedule(expr string) (Schedule, error) {
	if err := CheckSyntax(expr); err != nil {
		return Schedule{}, err
	}
	spec, err := cronParser.Parse(expr)
	if err != nil {
		return Schedule{}, &ScheduleError{Message: "schedule: " + err.Error()}
	}
	if spec.Next(neverFiresProbe).IsZero() {
		return Schedule{}, &ScheduleError{Message: `schedule "` + expr + `" never fires: no date matches all of its fields`}
	}
	return Schedule{expr: expr, spec: spec}, nil
}

// CheckSyntax checks expr against the grammar alone: what the API server
// checks at admission (ScheduleRules), with the same message.
func CheckSyntax(expr string) error {
	if controlRE.MatchString(expr) {
		return &ScheduleError{Message: controlMessage}
	}
	if strings.HasPrefix(expr, "@") {
		for _, d := range Descriptors {
			if expr == d {
				return nil
			}
		}
		return &ScheduleError{Message: descriptorMessage(expr)}
	}
	fields := fieldRE.FindAllString(expr, -1)
	if len(fields) != len(scheduleFields) {
		return &ScheduleError{Message: fieldCountMessage(expr, strconv.Itoa(len(fields)))}
	}
	// Every bad field is named, in order, as the API server lists them.
	var msgs []string
	for i, f := range scheduleFields {
		if !f.valid(itemREs[i], fields[i]) {
			msgs = append(msgs, fieldMessage(f, fields[i]))
		}
	}
	if len(msgs) > 0 {
		return &ScheduleError{Message: strings.Join(msgs, "; ")}
	}
	return nil
}

func (f scheduleField) valid(re *regexp.Regexp, value string) bool {
	for _, item := range strings.Split(value, ",") {
		if !re.MatchString(item) {
			return false
		}
		rng, step, hasStep := strings.Cut(item, "/")
		if hasStep {
			if n, _ := strconv.Atoi(step); n < 1 {
				return false
			}
		}
		if rng == "*" || rng == "?" {
			continue
		}
		a, b, isRange := strings.Cut(rng, "-")
		va, vb := f.value(a), f.value(a)
		if isRange {
			vb = f.value(b)
		}
		if va < f.lo || va > f.hi || vb < f.lo || vb > f.hi || va > vb {
			return false
		}
	}
	return true
}

// value reads a number or a name; -1 when it is neither.
func (f scheduleField) value(s string) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	for i, name := range f.names {
		if strings.ToLower(s) == name {
			return f.zero + i
		}
	}
	return -1
}

// Next returns the first slot after t.
func (s Schedule) Next(t time.Time) time.Time { return s.spec.Next(t.UTC()) }

// IsSlot says whether t is a slot of the schedule.
func (s Schedule) IsSlot(t time.Time) bool {
	return t.Equal(t.Truncate(time.Second)) && s.Next(t.Add(-time.Second)).Equal(t)
}

// String returns the expression.
func (s Schedule) String() string { return s.expr }

// IsScheduleError says whether err is a refused expression.
func IsScheduleError(err error) bool {
	var se *ScheduleError
	return errors.As(err, &se)
}
